//! What the `#[fenced]` expansion promises, observed from outside: verification runs before
//! any body code, a stale call writes nothing, `return` and `?` in the body behave as written,
//! the transaction commits on `Ok` and rolls back on `Err`, and the guard lives until the
//! body's future completes (then the lease is released). Memory store, SQLite and in-process
//! locks, on free functions and on `&self` / `&mut self` methods with generics.

mod fenced_support;

use std::fmt::Display;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fenced_support::sqlite_pool;
use staleguard::fence::FencedCell;
use staleguard::lease::{LeaseError, LeaseStore, MemoryLeaseStore, SqliteLeaseStore};
use tokio::sync::{Mutex, Notify};

const TTL: Duration = Duration::from_secs(30);

#[derive(Debug)]
#[allow(dead_code)] // the fields are read through `Debug` when a test fails
enum AppError {
    Db(sqlx::Error),
    Guard(staleguard::Error),
    Body(&'static str),
}

impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        AppError::Db(err)
    }
}

impl From<staleguard::Error> for AppError {
    fn from(err: staleguard::Error) -> Self {
        AppError::Guard(err)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Done {
    Finished,
    Early,
    Stale,
}

struct Counter {
    db: sqlx::SqlitePool,
    leases: SqliteLeaseStore,
    body_runs: AtomicUsize,
}

impl Counter {
    async fn value(db: &mut sqlx::SqliteConnection) -> Result<i64, sqlx::Error> {
        sqlx::query_scalar("SELECT value FROM counter WHERE id = 1")
            .fetch_one(db)
            .await
    }

    async fn current(&self) -> i64 {
        let mut conn = self.db.acquire().await.unwrap();
        Self::value(&mut conn).await.unwrap()
    }

    /// Sets the counter to `to` if it still is `expected`; `early` returns right after the
    /// write, `fail` fails with `?` right after it.
    #[staleguard::fenced(
        lease = self.leases, resource = "counter:1", ttl = TTL,
        begin = self.db.begin(), tx = tx,
        state = value, reread = Self::value(&mut tx).await?,
        verify = value == expected,
        stale = Ok(Done::Stale),
    )]
    async fn set(&self, expected: i64, to: i64, early: bool, fail: bool) -> Result<Done, AppError> {
        self.body_runs.fetch_add(1, Ordering::SeqCst);
        sqlx::query("UPDATE counter SET value = $1 WHERE id = 1")
            .bind(to)
            .execute(&mut *tx)
            .await?;
        if early {
            return Ok(Done::Early);
        }
        if fail {
            Err(AppError::Body("failed after the write"))?;
        }
        Ok(Done::Finished)
    }
}

async fn counter() -> Counter {
    let db = sqlite_pool().await;
    sqlx::raw_sql(
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL);
         INSERT INTO counter VALUES (1, 0);",
    )
    .execute(&db)
    .await
    .unwrap();
    let leases = SqliteLeaseStore::new(db.clone());
    leases.migrate().await.unwrap();
    Counter {
        db,
        leases,
        body_runs: AtomicUsize::new(0),
    }
}

/// After a call, the lease must be free again: another owner gets it at once.
async fn assert_lease_free(store: &impl LeaseStore, resource: &str) {
    let lease = store
        .acquire(resource, "checker", Duration::from_secs(1))
        .await
        .expect("the lease was not released after the call");
    store.release(&lease).await.unwrap();
}

#[tokio::test]
async fn body_runs_with_fresh_state_and_commits_on_ok() {
    let c = counter().await;
    assert_eq!(c.set(0, 1, false, false).await.unwrap(), Done::Finished);
    assert_eq!(c.current().await, 1);
    assert_lease_free(&c.leases, "counter:1").await;
}

#[tokio::test]
async fn stale_call_returns_the_stale_value_without_running_the_body() {
    let c = counter().await;
    assert_eq!(c.set(5, 9, false, false).await.unwrap(), Done::Stale);
    assert_eq!(c.body_runs.load(Ordering::SeqCst), 0, "the body ran");
    assert_eq!(c.current().await, 0);
    assert_lease_free(&c.leases, "counter:1").await;
}

#[tokio::test]
async fn return_in_the_body_returns_its_value_and_commits() {
    let c = counter().await;
    assert_eq!(c.set(0, 3, true, false).await.unwrap(), Done::Early);
    assert_eq!(c.current().await, 3);
    assert_lease_free(&c.leases, "counter:1").await;
}

#[tokio::test]
async fn question_mark_in_the_body_returns_the_error_and_rolls_back() {
    let c = counter().await;
    let err = c.set(0, 4, false, true).await.unwrap_err();
    assert!(
        matches!(err, AppError::Body("failed after the write")),
        "{err:?}"
    );
    assert_eq!(c.body_runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        c.current().await,
        0,
        "the failed body's write was committed"
    );
    assert_lease_free(&c.leases, "counter:1").await;
}

#[tokio::test]
async fn a_held_lease_is_returned_as_the_function_error_without_reading() {
    let c = counter().await;
    let other = c.leases.acquire("counter:1", "other", TTL).await.unwrap();
    let err = c.set(0, 1, false, false).await.unwrap_err();
    assert!(
        matches!(err, AppError::Guard(staleguard::Error::Held(_))),
        "{err:?}"
    );
    assert_eq!(c.body_runs.load(Ordering::SeqCst), 0);
    c.leases.release(&other).await.unwrap();
}

/// A free function over a generic store, with a `where` clause and an `impl Trait` inside the
/// `Result`; the body pauses so the test can look at the lease while it runs.
#[staleguard::fenced(
    lease = store, resource = key.as_str(), ttl = TTL,
    state = seen, reread = cell.get(),
    verify = seen < 10,
    stale = Ok(String::from("stale")),
    token = token,
)]
async fn bump<S>(
    store: &S,
    key: String,
    cell: &FencedCell<u32>,
    inside: &Notify,
    resume: &Notify,
) -> Result<impl Display, staleguard::Error>
where
    S: LeaseStore,
{
    inside.notify_one();
    resume.notified().await;
    cell.write(token, seen + 1)?;
    Ok(format!("{} with token {token}", seen + 1))
}

#[tokio::test(start_paused = true)]
async fn the_lease_is_held_until_the_body_completes() {
    let store = MemoryLeaseStore::new();
    let cell = FencedCell::new("k", 0_u32);
    let (inside, resume) = (Notify::new(), Notify::new());
    let call = bump(&store, String::from("k"), &cell, &inside, &resume);
    let look = async {
        inside.notified().await;
        let during = store.acquire("k", "other", TTL).await;
        resume.notify_one();
        during
    };
    let (result, during) = tokio::join!(call, look);
    assert!(matches!(during, Err(LeaseError::Held(_))), "{during:?}");
    assert_eq!(result.unwrap().to_string(), "1 with token 1");
    assert_lease_free(&store, "k").await;
}

/// `&mut self` with an in-process lock (an `Arc<Mutex>`, so the guard does not borrow `self`).
struct Wallet {
    lock: Arc<Mutex<()>>,
    balance: i64,
    spent: Vec<u32>,
}

impl Wallet {
    #[staleguard::fenced(
        lock = self.lock,
        state = balance, reread = self.balance,
        verify = balance >= amount,
        stale = false,
    )]
    async fn spend(&mut self, amount: i64, id: u32) -> bool {
        tokio::task::yield_now().await;
        assert!(
            self.lock.try_lock().is_err(),
            "the lock was not held while the body ran"
        );
        self.balance = balance - amount;
        self.spent.push(id);
        true
    }
}

#[tokio::test]
async fn mut_self_method_under_a_lock() {
    let mut wallet = Wallet {
        lock: Arc::new(Mutex::new(())),
        balance: 10,
        spent: Vec::new(),
    };
    assert!(wallet.spend(7, 1).await);
    assert!(!wallet.spend(7, 2).await, "overspent");
    assert_eq!((wallet.balance, wallet.spent.as_slice()), (3, &[1][..]));
    assert!(wallet.lock.try_lock().is_ok(), "the lock was not released");
}
