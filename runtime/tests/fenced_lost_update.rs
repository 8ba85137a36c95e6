//! Story 4, the lost update of the token form: `#[fenced(lease = .., token = ..)]` with the write
//! made by the body. A re-reads the counter (0) and pauses past its lease; B takes the lease
//! and re-reads 0 too; A resumes *before B has written* and writes 1; then B writes 1. A fence
//! that only knew the tokens already written accepted A (no larger token had been used yet) and
//! one increment was lost. The stores now register every granted token, so A is fenced as soon
//! as B acquires. Checked on memory, SQLite and PostgreSQL (when configured), with the forced
//! interleaving and with a race of many workers whose leases expire mid-increment.

mod fenced_support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fenced_support::{AppError, Rng, retry_while_held, sqlite_pool};
use staleguard::FencingToken;
use staleguard::fence::{FenceCheck, FencedCell};
use staleguard::lease::{LeaseStore, MemoryLeaseStore, SqliteLeaseStore};
use tokio::sync::Notify;

const RESOURCE: &str = "counter";

/// A counter the workers increment: a read outside any transaction, and a write that carries
/// the fencing token.
trait Counter {
    fn read(&self) -> impl Future<Output = Result<i64, AppError>> + Send;
    fn write(
        &self,
        token: FencingToken,
        value: i64,
    ) -> impl Future<Output = Result<(), AppError>> + Send;
}

/// The memory counterpart: a cell that knows the tokens its lease store granted.
struct MemoryCounter(FencedCell<i64>);

impl Counter for MemoryCounter {
    async fn read(&self) -> Result<i64, AppError> {
        Ok(self.0.get())
    }

    async fn write(&self, token: FencingToken, value: i64) -> Result<(), AppError> {
        self.0
            .write(token, value)
            .map_err(staleguard::Error::from)?;
        Ok(())
    }
}

/// A row in the lease store's own database, written in a transaction whose first statement is
/// the fence check.
macro_rules! sql_counter {
    ($name:ident, $pool:ty, $update:literal) => {
        struct $name($pool);

        impl $name {
            async fn create(pool: $pool) -> $name {
                sqlx::raw_sql(
                    "CREATE TABLE counter (id INTEGER PRIMARY KEY, value BIGINT NOT NULL);
                     INSERT INTO counter (id, value) VALUES (1, 0);",
                )
                .execute(&pool)
                .await
                .unwrap();
                $name(pool)
            }
        }

        impl Counter for $name {
            async fn read(&self) -> Result<i64, AppError> {
                Ok(sqlx::query_scalar("SELECT value FROM counter WHERE id = 1")
                    .fetch_one(&self.0)
                    .await?)
            }

            async fn write(&self, token: FencingToken, value: i64) -> Result<(), AppError> {
                let mut tx = self.0.begin().await?;
                tx.check_fence(RESOURCE, token)
                    .await
                    .map_err(staleguard::Error::from)?;
                sqlx::query($update).bind(value).execute(&mut *tx).await?;
                tx.commit().await?;
                Ok(())
            }
        }
    };
}

sql_counter!(
    SqliteCounter,
    sqlx::SqlitePool,
    "UPDATE counter SET value = ?1 WHERE id = 1"
);
#[cfg(feature = "postgres")]
sql_counter!(
    PgCounter,
    sqlx::PgPool,
    "UPDATE counter SET value = $1 WHERE id = 1"
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Wrote,
    Fenced,
}

/// Makes a worker stop between its re-read and its write until the test lets it go on.
#[derive(Default)]
struct Pause {
    entered: Notify,
    resume: Notify,
}

struct Worker<S, C> {
    leases: S,
    counter: Arc<C>,
    ttl: Duration,
    pause: Option<Arc<Pause>>,
    /// How long the body dawdles between its re-read and its write (the race).
    dawdle: Duration,
}

impl<S: LeaseStore + Clone, C: Counter> Worker<S, C> {
    #[staleguard::fenced(
        lease = self.leases, resource = RESOURCE, ttl = self.ttl,
        state = seen, reread = self.counter.read().await?,
        verify = true,
        stale = Ok(Outcome::Fenced),
        token = token,
    )]
    async fn increment(&self) -> Result<Outcome, AppError> {
        if let Some(pause) = &self.pause {
            pause.entered.notify_one();
            pause.resume.notified().await;
        }
        if !self.dawdle.is_zero() {
            tokio::time::sleep(self.dawdle).await;
        }
        match self.counter.write(token, seen + 1).await {
            Ok(()) => Ok(Outcome::Wrote),
            Err(AppError::Guard(staleguard::Error::Fenced(_))) => Ok(Outcome::Fenced),
            Err(err) => Err(err),
        }
    }
}

/// The forced interleaving: A re-reads and pauses, its lease expires, B acquires and re-reads
/// and pauses, A writes (fenced: B holds a newer token, unwritten), then B writes.
async fn older_holder_is_fenced_before_the_newer_one_writes<S, C>(leases: S, counter: Arc<C>)
where
    S: LeaseStore + Clone,
    C: Counter,
{
    let ttl = Duration::from_millis(150);
    let (pause_a, pause_b) = (Arc::new(Pause::default()), Arc::new(Pause::default()));
    let worker = |pause: &Arc<Pause>| Worker {
        leases: leases.clone(),
        counter: counter.clone(),
        ttl,
        pause: Some(pause.clone()),
        dawdle: Duration::ZERO,
    };
    let (a, b) = (worker(&pause_a), worker(&pause_b));
    let (a_done, b_done) = (a.increment(), b.increment());
    tokio::pin!(a_done, b_done);
    tokio::select! {
        _ = pause_a.entered.notified() => {} // A holds the lease and has read 0
        done = &mut a_done => panic!("A finished before pausing: {done:?}"),
    }
    tokio::time::sleep(ttl * 2).await; // A's lease expires
    tokio::select! {
        _ = pause_b.entered.notified() => {} // B holds the lease and has read 0
        done = &mut b_done => panic!("B finished before pausing: {done:?}"),
    }
    pause_a.resume.notify_one(); // A writes now, before B
    let a_done = a_done.await.unwrap();
    pause_b.resume.notify_one();
    let b_done = b_done.await.unwrap();
    assert_eq!(
        (a_done, b_done),
        (Outcome::Fenced, Outcome::Wrote),
        "the holder whose lease expired wrote after a newer holder acquired"
    );
    assert_eq!(counter.read().await.unwrap(), 1);
}

/// Many workers increment one counter with leases shorter than some of their pauses: every
/// accepted increment is in the final value (none lost), and some were fenced.
async fn racing_increments_are_never_lost<S, C>(leases: S, counter: Arc<C>)
where
    S: LeaseStore + Clone + Send + Sync + 'static,
    C: Counter + Send + Sync + 'static,
{
    let (mut rng, seed) = Rng::seeded();
    let accepted = Arc::new(AtomicU64::new(0));
    let fenced = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let dawdles: Vec<Duration> = (0..10)
            .map(|_| Duration::from_millis(rng.below(60)))
            .collect();
        let (leases, counter) = (leases.clone(), counter.clone());
        let (accepted, fenced) = (accepted.clone(), fenced.clone());
        tasks.spawn(async move {
            for dawdle in dawdles {
                let worker = Worker {
                    leases: leases.clone(),
                    counter: counter.clone(),
                    ttl: Duration::from_millis(30),
                    pause: None,
                    dawdle,
                };
                let outcome = retry_while_held(|| async {
                    match worker.increment().await {
                        Err(AppError::Guard(err)) => Err(err),
                        other => Ok(other.unwrap()),
                    }
                })
                .await
                .unwrap();
                match outcome {
                    Outcome::Wrote => accepted.fetch_add(1, Ordering::Relaxed),
                    Outcome::Fenced => fenced.fetch_add(1, Ordering::Relaxed),
                };
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let (accepted, fenced) = (
        accepted.load(Ordering::Relaxed),
        fenced.load(Ordering::Relaxed),
    );
    let value = counter.read().await.unwrap();
    assert_eq!(
        u64::try_from(value).unwrap(),
        accepted,
        "{accepted} increments were accepted but the counter holds {value} (seed {seed}, {fenced} fenced)"
    );
    assert!(
        accepted > 0 && fenced > 0,
        "no race happened: {accepted} accepted, {fenced} fenced (seed {seed})"
    );
}

fn memory() -> (MemoryLeaseStore, Arc<MemoryCounter>) {
    let leases = MemoryLeaseStore::new();
    let counter = MemoryCounter(FencedCell::with_leases(&leases, RESOURCE, 0));
    (leases, Arc::new(counter))
}

async fn sqlite() -> (SqliteLeaseStore, Arc<SqliteCounter>) {
    let leases = SqliteLeaseStore::new(sqlite_pool().await);
    leases.migrate().await.unwrap();
    let counter = SqliteCounter::create(leases.pool().clone()).await;
    (leases, Arc::new(counter))
}

#[tokio::test]
async fn memory_older_holder_is_fenced_before_the_newer_one_writes() {
    let (leases, counter) = memory();
    older_holder_is_fenced_before_the_newer_one_writes(leases, counter).await;
}

#[tokio::test]
async fn sqlite_older_holder_is_fenced_before_the_newer_one_writes() {
    let (leases, counter) = sqlite().await;
    older_holder_is_fenced_before_the_newer_one_writes(leases, counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_racing_increments_are_never_lost() {
    let (leases, counter) = memory();
    racing_increments_are_never_lost(leases, counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_racing_increments_are_never_lost() {
    let (leases, counter) = sqlite().await;
    racing_increments_are_never_lost(leases, counter).await;
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use fenced_support::pg::PgDb;
    use staleguard::lease::PgLeaseStore;

    async fn postgres(test: &str) -> Option<(PgDb, PgLeaseStore, Arc<PgCounter>)> {
        let pg = PgDb::connect(test).await?;
        let leases = PgLeaseStore::new(pg.pool.clone());
        leases.migrate().await.unwrap();
        let counter = PgCounter::create(pg.pool.clone()).await;
        Some((pg, leases, Arc::new(counter)))
    }

    #[tokio::test]
    async fn postgres_older_holder_is_fenced_before_the_newer_one_writes() {
        let Some((pg, leases, counter)) =
            postgres("postgres_older_holder_is_fenced_before_the_newer_one_writes").await
        else {
            return;
        };
        older_holder_is_fenced_before_the_newer_one_writes(leases, counter).await;
        pg.finish().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_racing_increments_are_never_lost() {
        let Some((pg, leases, counter)) =
            postgres("postgres_racing_increments_are_never_lost").await
        else {
            return;
        };
        racing_increments_are_never_lost(leases, counter).await;
        pg.finish().await;
    }
}
