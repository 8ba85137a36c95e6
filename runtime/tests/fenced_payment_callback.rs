//! Story 1, the late payment callback: the order is cancelled while the payment callback is on
//! its way; the callback handler under `#[fenced]` re-reads the order under the lease, sees it
//! cancelled and exits stale; no order ever goes from cancelled to paid. Forced interleavings
//! with `Notify`, then 1,000 randomized interleavings of callback, cancel and an unrelated
//! address edit, on SQLite and (when configured) PostgreSQL.
//!
//! And a cancel that pauses after its check past its lease while the callback arrives: only
//! the fence keeps both from writing. The mutation test re-runs that story with the fence
//! check switched off (feature `mutation-testing`) and requires it to fail.

mod fenced_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fenced_support::{AppError, IsHeld, Rng, mutant_switch, retry_while_held, sqlite_pool};
use sqlx::Row;
use staleguard::lease::SqliteLeaseStore;
use tokio::sync::Notify;

const TTL: Duration = Duration::from_secs(30);

impl IsHeld for AppError {
    fn is_held(&self) -> bool {
        matches!(self, AppError::Guard(staleguard::Error::Held(_)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Callback {
    /// Paid; the order's version the handler saw under the lease.
    Paid {
        seen_version: i64,
    },
    Stale,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cancel {
    Cancelled,
    Stale,
}

struct Order {
    status: String,
    attempt: i64,
    version: i64,
}

/// What the database says about one order after the handlers ran.
#[derive(Debug)]
struct Snapshot {
    status: String,
    address: String,
    /// Status changes, in the order they were committed.
    events: Vec<String>,
}

/// Makes the cancel handler stop inside its body (holding the lease and its transaction)
/// until the test lets it go on.
#[derive(Default)]
struct Pause {
    entered: Notify,
    resume: Notify,
}

const SCHEMA: &str = "\
CREATE TABLE orders (
    id      BIGINT PRIMARY KEY,
    status  TEXT   NOT NULL,
    attempt BIGINT NOT NULL,
    address TEXT   NOT NULL,
    version BIGINT NOT NULL
);
CREATE TABLE order_events (
    order_id BIGINT NOT NULL,
    version  BIGINT NOT NULL,
    kind     TEXT   NOT NULL
);";

trait Orders {
    async fn create(&self, order_id: i64, attempt: i64) -> Result<(), AppError>;
    async fn on_payment_succeeded(&self, order_id: i64, attempt: i64)
    -> Result<Callback, AppError>;
    async fn cancel(&self, order_id: i64) -> Result<Cancel, AppError>;
    async fn edit_address(&self, order_id: i64, address: &str) -> Result<(), AppError>;
    async fn snapshot(&self, order_id: i64) -> Result<Snapshot, AppError>;
    fn pause_cancel(&self, pause: Option<Arc<Pause>>);
    /// The leases' ttl (30 s unless a test shortens it).
    fn set_ttl(&self, ttl: Duration);
}

/// The same service for each backend: only the pool, connection and store types differ.
macro_rules! order_service {
    ($service:ident, $pool:ty, $conn:ty, $store:ty) => {
        struct $service {
            db: $pool,
            leases: $store,
            cancel_pause: Mutex<Option<Arc<Pause>>>,
            ttl_ms: AtomicU64,
        }

        impl $service {
            fn ttl(&self) -> Duration {
                Duration::from_millis(self.ttl_ms.load(Ordering::SeqCst))
            }

            async fn load(db: &mut $conn, id: i64) -> Result<Order, sqlx::Error> {
                let row = sqlx::query("SELECT status, attempt, version FROM orders WHERE id = $1")
                    .bind(id)
                    .fetch_one(db)
                    .await?;
                Ok(Order {
                    status: row.try_get(0)?,
                    attempt: row.try_get(1)?,
                    version: row.try_get(2)?,
                })
            }

            async fn in_cancel_body(&self) {
                let pause = self.cancel_pause.lock().unwrap().clone();
                if let Some(pause) = pause {
                    pause.entered.notify_one();
                    pause.resume.notified().await;
                }
            }

            async fn record(
                tx: &mut $conn,
                order_id: i64,
                status: &str,
            ) -> Result<(), sqlx::Error> {
                // A blind write on purpose: only `#[fenced]`'s verify keeps it correct.
                let version: i64 = sqlx::query_scalar(
                    "UPDATE orders SET status = $1, version = version + 1 WHERE id = $2 \
                     RETURNING version",
                )
                .bind(status)
                .bind(order_id)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO order_events (order_id, version, kind) VALUES ($1, $2, $3)",
                )
                .bind(order_id)
                .bind(version)
                .bind(status)
                .execute(&mut *tx)
                .await?;
                Ok(())
            }
        }

        impl Orders for $service {
            async fn create(&self, order_id: i64, attempt: i64) -> Result<(), AppError> {
                sqlx::query(
                    "INSERT INTO orders (id, status, attempt, address, version) \
                     VALUES ($1, 'awaiting_payment', $2, 'old street', 1)",
                )
                .bind(order_id)
                .bind(attempt)
                .execute(&self.db)
                .await?;
                Ok(())
            }

            #[staleguard::fenced(
                        lease = self.leases, resource = format!("order:{order_id}"), ttl = self.ttl(),
                        begin = self.db.begin(), tx = tx,
                        state = order, reread = Self::load(&mut tx, order_id).await?,
                        verify = order.status == "awaiting_payment" && order.attempt == attempt,
                        stale = Ok(Callback::Stale),
                    )]
            async fn on_payment_succeeded(
                &self,
                order_id: i64,
                attempt: i64,
            ) -> Result<Callback, AppError> {
                Self::record(&mut tx, order_id, "paid").await?;
                Ok(Callback::Paid {
                    seen_version: order.version,
                })
            }

            #[staleguard::fenced(
                        lease = self.leases, resource = format!("order:{order_id}"), ttl = self.ttl(),
                        begin = self.db.begin(), tx = tx,
                        state = order, reread = Self::load(&mut tx, order_id).await?,
                        verify = order.status == "awaiting_payment",
                        stale = Ok(Cancel::Stale),
                    )]
            async fn cancel(&self, order_id: i64) -> Result<Cancel, AppError> {
                self.in_cancel_body().await;
                Self::record(&mut tx, order_id, "cancelled").await?;
                Ok(Cancel::Cancelled)
            }

            /// Unrelated to payment: not fenced, one statement, bumps the whole-row version.
            async fn edit_address(&self, order_id: i64, address: &str) -> Result<(), AppError> {
                sqlx::query("UPDATE orders SET address = $1, version = version + 1 WHERE id = $2")
                    .bind(address)
                    .bind(order_id)
                    .execute(&self.db)
                    .await?;
                Ok(())
            }

            async fn snapshot(&self, order_id: i64) -> Result<Snapshot, AppError> {
                let row = sqlx::query("SELECT status, address FROM orders WHERE id = $1")
                    .bind(order_id)
                    .fetch_one(&self.db)
                    .await?;
                let events: Vec<String> = sqlx::query_scalar(
                    "SELECT kind FROM order_events WHERE order_id = $1 ORDER BY version",
                )
                .bind(order_id)
                .fetch_all(&self.db)
                .await?;
                Ok(Snapshot {
                    status: row.try_get(0)?,
                    address: row.try_get(1)?,
                    events,
                })
            }

            fn pause_cancel(&self, pause: Option<Arc<Pause>>) {
                *self.cancel_pause.lock().unwrap() = pause;
            }

            fn set_ttl(&self, ttl: Duration) {
                self.ttl_ms.store(ttl.as_millis() as u64, Ordering::SeqCst);
            }
        }
    };
}

order_service!(
    SqliteOrders,
    sqlx::SqlitePool,
    sqlx::SqliteConnection,
    SqliteLeaseStore
);

#[cfg(feature = "postgres")]
order_service!(
    PgOrders,
    sqlx::PgPool,
    sqlx::PgConnection,
    staleguard::lease::PgLeaseStore
);

async fn sqlite_service() -> SqliteOrders {
    let db = sqlite_pool().await;
    sqlx::raw_sql(SCHEMA).execute(&db).await.unwrap();
    // The fence table lives with the orders (same transaction); the leases in their own file.
    SqliteLeaseStore::new(db.clone()).migrate().await.unwrap();
    let leases = SqliteLeaseStore::new(sqlite_pool().await);
    leases.migrate().await.unwrap();
    SqliteOrders {
        db,
        leases,
        cancel_pause: Mutex::default(),
        ttl_ms: AtomicU64::new(TTL.as_millis() as u64),
    }
}

#[cfg(feature = "postgres")]
async fn pg_service(db: &fenced_support::pg::PgDb) -> PgOrders {
    sqlx::raw_sql(SCHEMA).execute(&db.pool).await.unwrap();
    let leases = staleguard::lease::PgLeaseStore::new(db.pool.clone());
    leases.migrate().await.unwrap();
    PgOrders {
        db: db.pool.clone(),
        leases,
        cancel_pause: Mutex::default(),
        ttl_ms: AtomicU64::new(TTL.as_millis() as u64),
    }
}

/// No status change after a cancel: in particular never cancelled → paid.
fn assert_never_paid_after_cancel(snapshot: &Snapshot) {
    if let Some(cancel) = snapshot.events.iter().position(|e| e == "cancelled") {
        assert_eq!(
            cancel,
            snapshot.events.len() - 1,
            "status changed after the cancel: {:?}",
            snapshot.events
        );
    }
    assert!(
        snapshot.events.len() <= 1,
        "more than one status change: {:?}",
        snapshot.events
    );
}

/// The callback leaves for the order; the user cancels; the callback lands afterwards.
async fn callback_lands_after_cancel(orders: &impl Orders) {
    orders.create(1, 7).await.unwrap();
    let landed = Notify::new();
    let callback = async {
        let attempt = 7; // the message was built while the order awaited payment attempt 7
        landed.notified().await;
        orders.on_payment_succeeded(1, attempt).await.unwrap()
    };
    let cancel = async {
        let outcome = orders.cancel(1).await.unwrap();
        landed.notify_one();
        outcome
    };
    let (callback, cancel) = tokio::join!(callback, cancel);
    assert_eq!(cancel, Cancel::Cancelled);
    assert_eq!(callback, Callback::Stale);
    let snapshot = orders.snapshot(1).await.unwrap();
    assert_eq!(snapshot.status, "cancelled");
    assert_eq!(snapshot.events, ["cancelled"]);
}

/// The callback lands while the cancel holds the lease mid-body: it cannot enter; once the
/// cancel committed, the caller's retry enters, re-reads, and exits stale.
async fn callback_lands_during_cancel(orders: &impl Orders) {
    orders.create(2, 7).await.unwrap();
    let pause = Arc::new(Pause::default());
    orders.pause_cancel(Some(pause.clone()));
    let cancel = orders.cancel(2);
    let callback = async {
        pause.entered.notified().await;
        let first = orders.on_payment_succeeded(2, 7).await;
        assert!(
            matches!(first, Err(ref err) if err.is_held()),
            "the callback entered while the cancel held the lease: {first:?}"
        );
        pause.resume.notify_one();
        retry_while_held(|| orders.on_payment_succeeded(2, 7))
            .await
            .unwrap()
    };
    let (cancel, callback) = tokio::join!(cancel, callback);
    orders.pause_cancel(None);
    assert_eq!(cancel.unwrap(), Cancel::Cancelled);
    assert_eq!(callback, Callback::Stale);
    let snapshot = orders.snapshot(2).await.unwrap();
    assert_eq!(snapshot.status, "cancelled");
    assert_eq!(snapshot.events, ["cancelled"]);
}

/// The cancel checks the order (awaiting payment) and pauses, holding its transaction, past its
/// lease; the callback then takes the lease. With the fence, the callback's transaction waits
/// for the cancel's (its fence check meets the cancel's), then re-reads "cancelled" and exits
/// stale; without it both would act on "awaiting payment" and the order would be paid and
/// cancelled.
async fn cancel_paused_past_its_lease(orders: &impl Orders) {
    orders.create(6, 7).await.unwrap();
    let short = Duration::from_millis(150);
    orders.set_ttl(short);
    let pause = Arc::new(Pause::default());
    orders.pause_cancel(Some(pause.clone()));
    let cancel = orders.cancel(6);
    let callback = async {
        pause.entered.notified().await;
        tokio::time::sleep(short * 3).await; // the cancel's lease is over
        let done = Notify::new();
        let call = async {
            let outcome = retry_while_held(|| orders.on_payment_succeeded(6, 7)).await;
            done.notify_one();
            outcome
        };
        // The cancel resumes once the callback is done, or after a second if it waits.
        let resume = async {
            let _ = tokio::time::timeout(Duration::from_secs(1), done.notified()).await;
            pause.resume.notify_one();
        };
        tokio::join!(call, resume).0
    };
    let (cancel, callback) = tokio::join!(cancel, callback);
    orders.pause_cancel(None);
    orders.set_ttl(TTL);
    let snapshot = orders.snapshot(6).await.unwrap();
    assert_never_paid_after_cancel(&snapshot);
    assert_eq!(
        (cancel.unwrap(), callback.unwrap()),
        (Cancel::Cancelled, Callback::Stale),
        "{snapshot:?}"
    );
    assert_eq!(snapshot.events, ["cancelled"]);
}

/// The other order: the callback lands first and pays; the late cancel is the stale one.
async fn callback_first_then_cancel(orders: &impl Orders) {
    orders.create(3, 7).await.unwrap();
    assert_eq!(
        orders.on_payment_succeeded(3, 7).await.unwrap(),
        Callback::Paid { seen_version: 1 }
    );
    assert_eq!(orders.cancel(3).await.unwrap(), Cancel::Stale);
    let snapshot = orders.snapshot(3).await.unwrap();
    assert_eq!(snapshot.status, "paid");
    assert_eq!(snapshot.events, ["paid"]);
}

/// A callback for an older payment attempt is stale even though the order awaits payment.
async fn callback_for_an_old_attempt_is_stale(orders: &impl Orders) {
    orders.create(4, 8).await.unwrap();
    assert_eq!(
        orders.on_payment_succeeded(4, 7).await.unwrap(),
        Callback::Stale
    );
    assert_eq!(orders.snapshot(4).await.unwrap().status, "awaiting_payment");
}

/// An address edit after the callback left changes the order's version, not its payment
/// identity: the callback still pays.
async fn address_edit_does_not_make_the_callback_stale(orders: &impl Orders) {
    orders.create(5, 7).await.unwrap();
    orders.edit_address(5, "new street").await.unwrap();
    assert_eq!(
        orders.on_payment_succeeded(5, 7).await.unwrap(),
        Callback::Paid { seen_version: 2 }
    );
    let snapshot = orders.snapshot(5).await.unwrap();
    assert_eq!(
        (snapshot.status.as_str(), snapshot.address.as_str()),
        ("paid", "new street")
    );
}

async fn forced_interleavings(orders: &impl Orders) {
    callback_lands_after_cancel(orders).await;
    callback_lands_during_cancel(orders).await;
    callback_first_then_cancel(orders).await;
    callback_for_an_old_attempt_is_stale(orders).await;
    address_edit_does_not_make_the_callback_stale(orders).await;
}

async fn jitter(rng: u64) {
    for _ in 0..rng % 16 {
        tokio::task::yield_now().await;
    }
    if rng.is_multiple_of(5) {
        tokio::time::sleep(Duration::from_micros(rng % 700)).await;
    }
}

/// 1,000 rounds of callback, cancel and address edit racing on a fresh order each, each
/// started after a random delay. Each round: exactly one of callback and cancel wins, its
/// outcome matches the stored status, nothing changes after a cancel, and the edit always lands.
/// Over the run, the callbacks that won after the edit had already changed the order's version
/// must exist and have paid (identity, not whole-object version).
async fn randomized_interleavings(orders: &impl Orders, rounds: i64) {
    let (mut rng, seed) = Rng::seeded();
    eprintln!("randomized interleavings: seed {seed} (replay with STALEGUARD_TEST_SEED={seed})");
    let mut paid_after_edit = 0;
    for round in 0..rounds {
        let id = 1_000 + round;
        orders.create(id, 1).await.unwrap();
        let (a, b, c) = (rng.next(), rng.next(), rng.next());
        let (callback, cancel, edit) = tokio::join!(
            async {
                jitter(a).await;
                retry_while_held(|| orders.on_payment_succeeded(id, 1)).await
            },
            async {
                jitter(b).await;
                retry_while_held(|| orders.cancel(id)).await
            },
            async {
                jitter(c).await;
                orders.edit_address(id, "new street").await
            },
        );
        let (callback, cancel) = (callback.unwrap(), cancel.unwrap());
        edit.unwrap();
        let snapshot = orders.snapshot(id).await.unwrap();
        let context = format!("seed {seed}, round {round}: {callback:?} {cancel:?} {snapshot:?}");
        assert_never_paid_after_cancel(&snapshot);
        assert_eq!(snapshot.address, "new street", "{context}");
        match snapshot.status.as_str() {
            "paid" => {
                assert!(matches!(callback, Callback::Paid { .. }), "{context}");
                assert_eq!(cancel, Cancel::Stale, "{context}");
                if let Callback::Paid { seen_version: 2 } = callback {
                    paid_after_edit += 1;
                }
            }
            "cancelled" => {
                assert_eq!(callback, Callback::Stale, "{context}");
                assert_eq!(cancel, Cancel::Cancelled, "{context}");
            }
            other => panic!("unexpected status {other}: {context}"),
        }
    }
    assert!(
        paid_after_edit > 0,
        "seed {seed}: no round had the edit land before a winning callback"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_forced_interleavings() {
    forced_interleavings(&sqlite_service().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_cancel_paused_past_its_lease_is_not_undone() {
    mutant_switch();
    cancel_paused_past_its_lease(&sqlite_service().await).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cancel_paused_past_its_lease_is_not_undone() {
    mutant_switch();
    let Some(db) =
        fenced_support::pg::PgDb::connect("postgres_cancel_paused_past_its_lease_is_not_undone")
            .await
    else {
        return;
    };
    cancel_paused_past_its_lease(&pg_service(&db).await).await;
    db.finish().await;
}

/// The mutation check: with the fence check switched off, the paused-cancel story must fail
/// (re-run in a child process of this test binary, so the switch touches nothing else).
#[cfg(feature = "mutation-testing")]
#[test]
fn without_the_fence_check_a_cancelled_order_is_paid() {
    let mut stories = vec!["sqlite_cancel_paused_past_its_lease_is_not_undone"];
    if cfg!(feature = "postgres")
        && fenced_support::postgres_url_for("without_the_fence_check_a_cancelled_order_is_paid")
    {
        stories.push("postgres_cancel_paused_past_its_lease_is_not_undone");
    }
    for story in stories {
        fenced_support::assert_fails_without_the_fence(story);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_randomized_interleavings() {
    randomized_interleavings(&sqlite_service().await, 1_000).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_forced_interleavings() {
    let Some(db) = fenced_support::pg::PgDb::connect("postgres_forced_interleavings").await else {
        return;
    };
    forced_interleavings(&pg_service(&db).await).await;
    db.finish().await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_randomized_interleavings() {
    let Some(db) = fenced_support::pg::PgDb::connect("postgres_randomized_interleavings").await
    else {
        return;
    };
    randomized_interleavings(&pg_service(&db).await, 1_000).await;
    db.finish().await;
}
