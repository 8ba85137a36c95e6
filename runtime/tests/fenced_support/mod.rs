//! Shared set-up for the `fenced_*` tests: a fresh SQLite database file per test, a fresh
//! PostgreSQL schema per test (skipped with a printed reason when
//! `STALEGUARD_TEST_POSTGRES_URL` is unset), unique names, a seeded random source, and the
//! caller-side retry that a contended lease needs.

#![allow(dead_code)]

#[path = "../store_support/mod.rs"]
mod stores;
#[cfg(feature = "redis")]
#[allow(unused_imports)] // not every test binary uses every helper
pub use stores::drop_redis_prefix;
#[allow(unused_imports)]
pub use stores::redis_url;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// A name no other test (or test run) uses: `<prefix>_<pid>_<nanos>_<n>`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{nanos}_{n}", std::process::id())
}

/// A new SQLite database file in the temp dir (WAL, writers wait for each other).
///
/// SQLite has one writer per file, so tests that hold a transaction open while another task
/// takes a lease keep the leases in a database of their own (as a service with long
/// transactions would).
pub async fn sqlite_pool() -> SqlitePool {
    let path = std::env::temp_dir().join(format!("{}.db", unique_name("staleguard_fenced")));
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(60));
    SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .expect("open a SQLite database in the temp dir")
}

#[cfg(feature = "postgres")]
pub mod pg {
    use std::str::FromStr;

    use sqlx::AssertSqlSafe;
    use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

    /// A pool whose `search_path` is a schema created for this test only.
    pub struct PgDb {
        pub pool: PgPool,
        admin: PgPool,
        schema: String,
    }

    impl PgDb {
        /// `None` (after printing why) when `STALEGUARD_TEST_POSTGRES_URL` is unset; under CI
        /// (`CI` set) a missing URL fails the test instead of skipping it silently.
        pub async fn connect(test: &str) -> Option<PgDb> {
            let url = super::stores::postgres_url(test)?;
            let admin = PgPoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await
                .expect("connect to STALEGUARD_TEST_POSTGRES_URL");
            let schema = super::unique_name("sg_fenced").to_lowercase();
            sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&admin)
                .await
                .expect("create the test schema");
            let options = PgConnectOptions::from_str(&url)
                .expect("parse STALEGUARD_TEST_POSTGRES_URL")
                .options([("search_path", schema.as_str())]);
            let pool = PgPoolOptions::new()
                .max_connections(8)
                .connect_with(options)
                .await
                .expect("connect with the test schema");
            Some(PgDb {
                pool,
                admin,
                schema,
            })
        }

        /// Drops the test's schema.
        pub async fn finish(self) {
            self.pool.close().await;
            sqlx::raw_sql(AssertSqlSafe(format!(
                "DROP SCHEMA {} CASCADE",
                self.schema
            )))
            .execute(&self.admin)
            .await
            .expect("drop the test schema");
        }
    }
}

/// The environment variable that makes a story test run with the fence check switched off.
pub const MUTANT: &str = "STALEGUARD_MUTANT";

/// Switches the fence checks off in this process when it runs as the mutation check's child
/// (`STALEGUARD_MUTANT=no-fence`); otherwise does nothing. Story tests call it first.
pub fn mutant_switch() {
    if std::env::var(MUTANT).is_ok_and(|v| v == "no-fence") {
        #[cfg(feature = "mutation-testing")]
        staleguard::fence::__mutation::disable_fence_checks();
        #[cfg(not(feature = "mutation-testing"))]
        panic!("{MUTANT} needs the `mutation-testing` feature");
    }
}

/// Whether the PostgreSQL URL is set (under CI a missing one fails `test`).
pub fn postgres_url_for(test: &str) -> bool {
    stores::postgres_url(test).is_some()
}

/// Runs the test `story` of this binary in a child process with the fence checks switched
/// off, and requires it to fail (and to pass with them on, in this process's own run).
pub fn assert_fails_without_the_fence(story: &str) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([story, "--exact", "--test-threads=1"])
        .env(MUTANT, "no-fence")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("running 1 test"),
        "the mutant run did not find `{story}`:\n{stdout}"
    );
    assert!(
        !output.status.success() && stdout.contains(&format!("test {story} ... FAILED")),
        "`{story}` still passes with the fence check switched off: it does not test the fence\n{stdout}"
    );
}

/// Retries `op` while the lease is held by someone else: the caller's durable retry, which
/// `#[fenced]` leaves to the caller (liveness is not its job). Other outcomes are returned.
pub async fn retry_while_held<T, E, F, Fut>(mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: IsHeld,
{
    loop {
        match op().await {
            Err(err) if err.is_held() => tokio::time::sleep(Duration::from_millis(1)).await,
            other => return other,
        }
    }
}

/// The error type of the test handlers: what `#[fenced]` needs (`From<sqlx::Error>` for the
/// transaction and the re-read, `From<staleguard::Error>` for the lease).
#[derive(Debug)]
#[allow(dead_code)] // the fields are read through `Debug` when a test fails
pub enum AppError {
    Db(sqlx::Error),
    Guard(staleguard::Error),
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

/// Whether an error means "the lease is held by another owner, try again".
pub trait IsHeld {
    fn is_held(&self) -> bool;
}

impl IsHeld for staleguard::Error {
    fn is_held(&self) -> bool {
        matches!(self, staleguard::Error::Held(_))
    }
}

/// xorshift64*: a small seeded generator, so a failing run can be replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn seeded() -> (Rng, u64) {
        let seed = std::env::var("STALEGUARD_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x9E37_79B9_7F4A_7C15)
                    | 1
            });
        (Rng(seed), seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
