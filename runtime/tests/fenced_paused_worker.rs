//! Story 3, the paused worker: A takes the lease (token n) and pauses past its expiry; B takes
//! the lease (token n+1) and writes; A resumes and writes: rejected with `Fenced`, and the
//! stored value is B's. With `tokio::time::pause` on the memory store's clock, and with real
//! expiry on SQLite and PostgreSQL (when configured); through the runtime API and through
//! `#[fenced]` (with the token passed to the write, and with `begin`, where the fence check is
//! the transaction's first statement).

mod fenced_support;

use std::sync::Arc;
use std::time::Duration;

use fenced_support::{AppError, sqlite_pool};
use staleguard::fence::{FenceCheck, FenceError, FencedCell};
use staleguard::lease::{Lease, LeaseError, LeaseStore, MemoryLeaseStore, SqliteLeaseStore};
use tokio::sync::Notify;

fn is_fenced(result: &Result<Wrote, AppError>) -> bool {
    matches!(result, Err(AppError::Guard(staleguard::Error::Fenced(_))))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    Written,
    Stale,
}

/// Makes worker A stop at a chosen point until the test lets it go on.
#[derive(Default)]
struct Pause {
    entered: Notify,
    resume: Notify,
}

impl Pause {
    async fn here(&self) {
        self.entered.notify_one();
        self.resume.notified().await;
    }
}

// --- memory store, paused tokio clock -------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn memory_paused_worker_is_fenced_by_the_runtime_api() {
    let store = MemoryLeaseStore::new();
    let report = FencedCell::new("report", String::from("empty"));
    let a = store
        .acquire("report", "a", Duration::from_secs(10))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(11)).await; // A's GC pause
    let b = store
        .acquire("report", "b", Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(b.token().get(), a.token().get() + 1);
    report.write(b.token(), String::from("from b")).unwrap();

    let late = report.write(a.token(), String::from("from a")).unwrap_err();
    assert_eq!((late.token, late.current), (a.token(), Some(b.token())));
    assert_eq!(report.get(), "from b");
    assert!(matches!(
        store.renew(&a, Duration::from_secs(10)).await,
        Err(LeaseError::Lost(_))
    ));
}

struct MemoryWorker {
    leases: MemoryLeaseStore,
    report: Arc<FencedCell<String>>,
    pause: Option<Arc<Pause>>,
}

impl MemoryWorker {
    #[staleguard::fenced(
        lease = self.leases, resource = "report", ttl = Duration::from_secs(10),
        state = current, reread = self.report.get(),
        verify = current != "final",
        stale = Ok(Wrote::Stale),
        token = token,
    )]
    async fn write_report(&self, value: &str) -> Result<Wrote, AppError> {
        if let Some(pause) = &self.pause {
            pause.here().await; // A stops after its checks, before its write
        }
        self.report
            .write(token, value.to_string())
            .map_err(staleguard::Error::from)?;
        Ok(Wrote::Written)
    }
}

#[tokio::test(start_paused = true)]
async fn memory_paused_worker_is_fenced_through_the_macro() {
    let leases = MemoryLeaseStore::new();
    let report = Arc::new(FencedCell::new("report", String::from("empty")));
    let pause = Arc::new(Pause::default());
    let a = MemoryWorker {
        leases: leases.clone(),
        report: report.clone(),
        pause: Some(pause.clone()),
    };
    let b = MemoryWorker {
        leases,
        report: report.clone(),
        pause: None,
    };
    let then = async {
        pause.entered.notified().await;
        tokio::time::advance(Duration::from_secs(11)).await; // A's lease expires
        let wrote = b.write_report("from b").await.unwrap();
        pause.resume.notify_one();
        wrote
    };
    let (late, b_wrote) = tokio::join!(a.write_report("from a"), then);
    assert_eq!(b_wrote, Wrote::Written);
    assert!(is_fenced(&late), "A's late write was not fenced: {late:?}");
    assert_eq!(report.get(), "from b");
}

// --- SQL stores, real expiry ------------------------------------------------------------------

const TTL: Duration = Duration::from_millis(300);

const SCHEMA: &str = "\
CREATE TABLE reports (id BIGINT PRIMARY KEY, body TEXT NOT NULL);
INSERT INTO reports (id, body) VALUES (1, 'empty');";

/// Waits, without asserting anything about time, until `owner` gets the lease (A's expires).
async fn acquire_after_expiry(store: &impl LeaseStore, owner: &str) -> Lease {
    loop {
        match store.acquire("report:1", owner, TTL).await {
            Ok(lease) => return lease,
            Err(LeaseError::Held(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(err) => panic!("acquire failed: {err}"),
        }
    }
}

macro_rules! sql_paused_worker {
    ($worker:ident, $pool:ty, $conn:ty, $store:ty) => {
        struct $worker {
            db: $pool,
            leases: $store,
            pause: Option<Arc<Pause>>,
        }

        impl $worker {
            async fn body(db: &mut $conn) -> Result<String, sqlx::Error> {
                sqlx::query_scalar("SELECT body FROM reports WHERE id = 1")
                    .fetch_one(db)
                    .await
            }

            async fn stored(&self) -> String {
                let mut conn = self.db.acquire().await.unwrap();
                Self::body(&mut conn).await.unwrap()
            }

            async fn pause_here(&self) {
                if let Some(pause) = &self.pause {
                    pause.here().await;
                }
            }

            /// The raw API: the lease is taken by the caller; the write opens a transaction
            /// whose first statement is the fence check.
            async fn write_with(&self, lease: &Lease, value: &str) -> Result<(), FenceError> {
                let mut tx = self.db.begin().await?;
                tx.check_fence(lease.resource(), lease.token()).await?;
                sqlx::query("UPDATE reports SET body = $1 WHERE id = 1")
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            /// `#[fenced]` with the token bound and the write done by the body.
            #[staleguard::fenced(
                                        lease = self.leases, resource = "report:1", ttl = TTL,
                                        state = current, reread = self.stored().await,
                                        verify = current != "final",
                                        stale = Ok(Wrote::Stale),
                                        token = token,
                                    )]
            async fn write_by_token(&self, value: &str) -> Result<Wrote, AppError> {
                self.pause_here().await;
                let mut tx = self.db.begin().await?;
                tx.check_fence("report:1", token)
                    .await
                    .map_err(staleguard::Error::from)?;
                sqlx::query("UPDATE reports SET body = $1 WHERE id = 1")
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Wrote::Written)
            }

            async fn begin_after_pause(
                &self,
            ) -> Result<sqlx::Transaction<'static, <$pool as PoolDb>::Db>, sqlx::Error> {
                self.pause_here().await;
                self.db.begin().await
            }

            /// `#[fenced]` with `begin`: A pauses before its transaction starts, so the fence
            /// check (the transaction's first statement) rejects it and it returns `stale`.
            #[staleguard::fenced(
                                        lease = self.leases, resource = "report:1", ttl = TTL,
                                        begin = self.begin_after_pause(), tx = tx,
                                        state = current, reread = Self::body(&mut tx).await?,
                                        verify = current != "final",
                                        stale = Ok(Wrote::Stale),
                                    )]
            async fn write_in_transaction(&self, value: &str) -> Result<Wrote, AppError> {
                sqlx::query("UPDATE reports SET body = $1 WHERE id = 1")
                    .bind(value)
                    .execute(&mut *tx)
                    .await?;
                Ok(Wrote::Written)
            }
        }
    };
}

/// Names a pool's database type, so the macro above can spell the transaction type.
trait PoolDb {
    type Db: sqlx::Database;
}

impl<DB: sqlx::Database> PoolDb for sqlx::Pool<DB> {
    type Db = DB;
}

sql_paused_worker!(
    SqliteWorker,
    sqlx::SqlitePool,
    sqlx::SqliteConnection,
    SqliteLeaseStore
);

#[cfg(feature = "postgres")]
sql_paused_worker!(
    PgWorker,
    sqlx::PgPool,
    sqlx::PgConnection,
    staleguard::lease::PgLeaseStore
);

/// The three flavours of the story against one SQL backend; `worker` builds a worker sharing
/// the database, paused or not.
macro_rules! paused_worker_story {
    ($make:expr) => {{
        let make = $make;

        // Runtime API.
        let plain = make(None);
        let a = plain.leases.acquire("report:1", "a", TTL).await.unwrap();
        assert!(matches!(
            plain.leases.acquire("report:1", "b", TTL).await,
            Err(LeaseError::Held(_))
        ));
        let b = acquire_after_expiry(&plain.leases, "b").await;
        assert!(b.token() > a.token());
        plain.write_with(&b, "from b").await.unwrap();
        let late = plain.write_with(&a, "from a").await;
        assert!(
            matches!(&late, Err(FenceError::Fenced(f)) if f.token == a.token() && f.current == Some(b.token())),
            "A's late write was not fenced: {late:?}"
        );
        assert_eq!(plain.stored().await, "from b");
        assert!(matches!(plain.leases.renew(&a, TTL).await, Err(LeaseError::Lost(_))));
        assert!(matches!(plain.leases.release(&a).await, Err(LeaseError::Lost(_))));
        plain.leases.release(&b).await.unwrap();

        // Through the macro, token passed to the write.
        let pause = Arc::new(Pause::default());
        let a = make(Some(pause.clone()));
        let b = make(None);
        let then = async {
            pause.entered.notified().await;
            let wrote = retry_until_acquired(|| b.write_by_token("macro b")).await;
            pause.resume.notify_one();
            wrote
        };
        let (late, b_wrote) = tokio::join!(a.write_by_token("macro a"), then);
        assert_eq!(b_wrote, Wrote::Written);
        assert!(is_fenced(&late), "A's late write was not fenced: {late:?}");
        assert_eq!(b.stored().await, "macro b");

        // Through the macro with `begin`: A is stale, nothing written.
        let pause = Arc::new(Pause::default());
        let a = make(Some(pause.clone()));
        let then = async {
            pause.entered.notified().await;
            let wrote = retry_until_acquired(|| b.write_in_transaction("tx b")).await;
            pause.resume.notify_one();
            wrote
        };
        let (late, b_wrote) = tokio::join!(a.write_in_transaction("tx a"), then);
        assert_eq!(b_wrote, Wrote::Written);
        assert_eq!(late.unwrap(), Wrote::Stale);
        assert_eq!(b.stored().await, "tx b");
    }};
}

/// Retries while the lease is held (A's has not expired yet); no assertion on how long.
async fn retry_until_acquired<F, Fut>(mut op: F) -> Wrote
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Wrote, AppError>>,
{
    loop {
        match op().await {
            Err(AppError::Guard(staleguard::Error::Held(_))) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other.unwrap(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_paused_worker_is_fenced_with_real_expiry() {
    let db = sqlite_pool().await;
    sqlx::raw_sql(SCHEMA).execute(&db).await.unwrap();
    let leases = SqliteLeaseStore::new(db.clone());
    leases.migrate().await.unwrap();
    paused_worker_story!(|pause: Option<Arc<Pause>>| SqliteWorker {
        db: db.clone(),
        leases: leases.clone(),
        pause,
    });
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_paused_worker_is_fenced_with_real_expiry() {
    let Some(pg) =
        fenced_support::pg::PgDb::connect("postgres_paused_worker_is_fenced_with_real_expiry")
            .await
    else {
        return;
    };
    sqlx::raw_sql(SCHEMA).execute(&pg.pool).await.unwrap();
    let leases = staleguard::lease::PgLeaseStore::new(pg.pool.clone());
    leases.migrate().await.unwrap();
    paused_worker_story!(|pause: Option<Arc<Pause>>| PgWorker {
        db: pg.pool.clone(),
        leases: leases.clone(),
        pause,
    });
    pg.finish().await;
}
