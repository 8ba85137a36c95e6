//! The cost of a `#[fenced]` call over a bare one, per store: the fenced call adds the lease
//! acquire, the fence check (with a transaction: its first statement) and the lease release
//! around the same re-read and write. Run with `cargo bench -p staleguard --bench fenced`
//! (add `--all-features` and set `STALEGUARD_TEST_POSTGRES_URL` for PostgreSQL).

use std::time::{Duration, Instant};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use staleguard::fence::FencedCell;
use staleguard::lease::{MemoryLeaseStore, SqliteLeaseStore};

const TTL: Duration = Duration::from_secs(30);

#[derive(Debug)]
#[allow(dead_code)] // read through `Debug` on failure
enum BenchError {
    Db(sqlx::Error),
    Guard(staleguard::Error),
}

impl From<sqlx::Error> for BenchError {
    fn from(err: sqlx::Error) -> Self {
        BenchError::Db(err)
    }
}

impl From<staleguard::Error> for BenchError {
    fn from(err: staleguard::Error) -> Self {
        BenchError::Guard(err)
    }
}

fn report(store: &str, iterations: u32, bare: Duration, fenced: Duration) {
    let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(iterations);
    let (bare, fenced) = (per(bare), per(fenced));
    println!(
        "{store:<10} bare {bare:>9.2} µs/call   fenced {fenced:>9.2} µs/call   \
         overhead {:>9.2} µs ({:.1}x)",
        fenced - bare,
        fenced / bare
    );
}

async fn time<F, Fut>(iterations: u32, mut call: F) -> Duration
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for i in 0..iterations / 10 {
        call(i).await; // warm up
    }
    let start = Instant::now();
    for i in 0..iterations {
        call(i).await;
    }
    start.elapsed()
}

// --- memory ---------------------------------------------------------------------------------

struct MemoryCounter {
    leases: MemoryLeaseStore,
    value: FencedCell<u64>,
}

impl MemoryCounter {
    async fn bare(&self, expected: u64) -> bool {
        let value = self.value.get();
        if value != expected {
            return false;
        }
        self.value
            .update(staleguard::FencingToken::new(0), |v| *v = value + 1)
            .is_ok()
    }

    #[staleguard::fenced(
        lease = self.leases, resource = "counter", ttl = TTL,
        state = value, reread = self.value.get(),
        verify = value == expected,
        stale = Ok(false),
        token = token,
    )]
    async fn fenced(&self, expected: u64) -> Result<bool, staleguard::Error> {
        self.value.write(token, value + 1)?;
        Ok(true)
    }
}

async fn memory(iterations: u32) {
    let bare = MemoryCounter {
        leases: MemoryLeaseStore::new(),
        value: FencedCell::new("counter", 0),
    };
    let mut expected = 0;
    let bare_time = time(iterations, |_| {
        let e = expected;
        expected += 1;
        let bare = &bare;
        async move { assert!(bare.bare(e).await) }
    })
    .await;
    let fenced = MemoryCounter {
        leases: MemoryLeaseStore::new(),
        value: FencedCell::new("counter", 0),
    };
    let mut expected = 0;
    let fenced_time = time(iterations, |_| {
        let e = expected;
        expected += 1;
        let fenced = &fenced;
        async move { assert!(fenced.fenced(e).await.unwrap()) }
    })
    .await;
    report("memory", iterations, bare_time, fenced_time);
}

// --- SQL ------------------------------------------------------------------------------------

macro_rules! sql_counter {
    ($counter:ident, $pool:ty, $conn:ty, $store:ty) => {
        struct $counter {
            db: $pool,
            leases: $store,
        }

        impl $counter {
            async fn load(db: &mut $conn) -> Result<i64, sqlx::Error> {
                sqlx::query_scalar("SELECT value FROM bench_counter WHERE id = 1")
                    .fetch_one(db)
                    .await
            }

            async fn write(db: &mut $conn, value: i64) -> Result<(), sqlx::Error> {
                sqlx::query("UPDATE bench_counter SET value = $1 WHERE id = 1")
                    .bind(value)
                    .execute(db)
                    .await?;
                Ok(())
            }

            /// The same transaction, re-read, verify and write, without lease or fence.
            async fn bare(&self, expected: i64) -> Result<bool, BenchError> {
                let mut tx = self.db.begin().await?;
                let value = Self::load(&mut tx).await?;
                if value != expected {
                    return Ok(false);
                }
                Self::write(&mut tx, value + 1).await?;
                tx.commit().await?;
                Ok(true)
            }

            #[staleguard::fenced(
                lease = self.leases, resource = "counter", ttl = TTL,
                begin = self.db.begin(), tx = tx,
                state = value, reread = Self::load(&mut tx).await?,
                verify = value == expected,
                stale = Ok(false),
            )]
            async fn fenced(&self, expected: i64) -> Result<bool, BenchError> {
                Self::write(&mut tx, value + 1).await?;
                Ok(true)
            }

            async fn run(&self, name: &str, iterations: u32) {
                sqlx::raw_sql(
                    "CREATE TABLE IF NOT EXISTS bench_counter (id BIGINT PRIMARY KEY, value BIGINT NOT NULL);
                     DELETE FROM bench_counter;
                     INSERT INTO bench_counter (id, value) VALUES (1, 0);",
                )
                .execute(&self.db)
                .await
                .unwrap();
                self.leases.migrate().await.unwrap();
                let mut expected = 0;
                let bare = time(iterations, |_| {
                    let e = expected;
                    expected += 1;
                    async move { assert!(self.bare(e).await.unwrap()) }
                })
                .await;
                let fenced = time(iterations, |_| {
                    let e = expected;
                    expected += 1;
                    async move { assert!(self.fenced(e).await.unwrap()) }
                })
                .await;
                report(name, iterations, bare, fenced);
            }
        }
    };
}

sql_counter!(
    SqliteCounter,
    sqlx::SqlitePool,
    sqlx::SqliteConnection,
    SqliteLeaseStore
);

#[cfg(feature = "postgres")]
sql_counter!(
    PgCounter,
    sqlx::PgPool,
    sqlx::PgConnection,
    staleguard::lease::PgLeaseStore
);

async fn sqlite(iterations: u32) {
    let path =
        std::env::temp_dir().join(format!("staleguard_bench_fenced_{}.db", std::process::id()));
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal);
    let db = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .unwrap();
    let counter = SqliteCounter {
        leases: SqliteLeaseStore::new(db.clone()),
        db,
    };
    counter.run("sqlite", iterations).await;
    counter.db.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[cfg(feature = "postgres")]
async fn postgres(iterations: u32) {
    use std::str::FromStr;

    use sqlx::AssertSqlSafe;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    let Ok(url) = std::env::var("STALEGUARD_TEST_POSTGRES_URL") else {
        println!("postgres   skipped: STALEGUARD_TEST_POSTGRES_URL is unset");
        return;
    };
    let schema = format!("sg_bench_fenced_{}", std::process::id());
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let db = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .unwrap();
    let counter = PgCounter {
        leases: staleguard::lease::PgLeaseStore::new(db.clone()),
        db,
    };
    counter.run("postgres", iterations).await;
    counter.db.close().await;
    sqlx::raw_sql(AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // `cargo test --benches` runs this once with `--bench` absent: keep that quick.
    let quick = !std::env::args().any(|arg| arg == "--bench");
    let scale = if quick { 1 } else { 100 };
    println!("fenced call vs bare call (same re-read, verify and write), mean per call:");
    memory(2_000 * scale).await;
    sqlite(20 * scale).await;
    #[cfg(feature = "postgres")]
    postgres(20 * scale).await;
}
