//! Benchmark of `#[idempotent]` against the same effect run raw, in one run, on the same
//! database: the effect is one `INSERT` of an order row.
//!
//! - raw: the `INSERT` alone (autocommit), through the same pool as the idempotent calls; the
//!   one-transaction mode is also compared with `BEGIN`, the `INSERT`, `COMMIT` (the raw form of a
//!   handler whose writes already share one transaction), as a second reference, not the target's;
//! - remote-effect mode (`#[idempotent]`): claim, the same `INSERT` (autocommit, standing for a
//!   call to another system), completion;
//! - one-transaction mode (`#[idempotent(tx = tx)]`): claim, the `INSERT` through the handed
//!   transaction, completion, one commit;
//! - a replay of a stored outcome, against a point read of one order row by its key.
//!
//! Each pair is measured in alternating blocks (raw, idempotent, raw, ...) so that a drift of the
//! machine's speed hits both; sequential latency (mean per call) and concurrent throughput (16
//! callers). Round trips per call are counted on the wire by the PostgreSQL-protocol proxy of the
//! test support, in the same run.
//!
//! Run: `STALEGUARD_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test cargo bench -p
//! staleguard --all-features --bench idempotency` (SQLite is measured too; PostgreSQL only with
//! the URL and feature `postgres`).

#[allow(dead_code)]
#[path = "../tests/idempotent_support/wire.rs"]
mod wire;

use serde::{Deserialize, Serialize};
use staleguard::idempotency::{Classify, FailureKind, Idempotency, IdempotencyError, LocalStore};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pay {
    key: String,
    amount: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    amount: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct BenchError(String);

impl Classify for BenchError {
    fn classify(&self) -> FailureKind {
        FailureKind::Permanent
    }
}

impl From<IdempotencyError> for BenchError {
    fn from(e: IdempotencyError) -> Self {
        BenchError(e.to_string())
    }
}

/// The effect, in one database: insert the order row (through a pool, or a transaction).
trait Shop: Send + Sync + 'static {
    type Store: LocalStore;
    fn raw(&self, req: &Pay) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
    fn raw_tx(&self, req: &Pay) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
    fn point_read(&self, key: &str) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
    fn remote(&self, req: Pay) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
    fn local(&self, req: Pay) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
    fn fast(&self, req: Pay) -> impl Future<Output = Result<Receipt, BenchError>> + Send;
}

macro_rules! shop {
    ($shop:ident, $store:ty, $pool:ty, $insert:literal, $select:literal) => {
        struct $shop {
            idem: Idempotency<$store>,
            /// The remote-effect mode with asynchronous completions (PostgreSQL); the same
            /// engine elsewhere.
            fast: Idempotency<$store>,
            pool: $pool,
        }

        impl $shop {
            #[staleguard::idempotent(store = self.idem, key = req.key, name = "remote")]
            async fn remote_call(&self, req: Pay) -> Result<Receipt, BenchError> {
                self.raw(&req).await
            }

            #[staleguard::idempotent(store = self.fast, key = req.key, name = "fast")]
            async fn fast_call(&self, req: Pay) -> Result<Receipt, BenchError> {
                self.raw(&req).await
            }

            #[staleguard::idempotent(store = self.idem, key = req.key, name = "local", tx = tx)]
            async fn local_call(&self, req: Pay) -> Result<Receipt, BenchError> {
                sqlx::query($insert)
                    .bind(&req.key)
                    .bind(req.amount)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| BenchError(e.to_string()))?;
                Ok(Receipt { amount: req.amount })
            }
        }

        impl Shop for $shop {
            type Store = $store;

            async fn raw(&self, req: &Pay) -> Result<Receipt, BenchError> {
                sqlx::query($insert)
                    .bind(&req.key)
                    .bind(req.amount)
                    .execute(&self.pool)
                    .await
                    .map_err(|e| BenchError(e.to_string()))?;
                Ok(Receipt { amount: req.amount })
            }

            async fn raw_tx(&self, req: &Pay) -> Result<Receipt, BenchError> {
                let fail = |e: sqlx::Error| BenchError(e.to_string());
                let mut tx = self.pool.begin().await.map_err(fail)?;
                sqlx::query($insert)
                    .bind(&req.key)
                    .bind(req.amount)
                    .execute(&mut *tx)
                    .await
                    .map_err(fail)?;
                tx.commit().await.map_err(fail)?;
                Ok(Receipt { amount: req.amount })
            }

            async fn point_read(&self, key: &str) -> Result<Receipt, BenchError> {
                let amount: i64 = sqlx::query_scalar($select)
                    .bind(key)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(|e| BenchError(e.to_string()))?;
                Ok(Receipt { amount })
            }

            async fn remote(&self, req: Pay) -> Result<Receipt, BenchError> {
                self.remote_call(req).await
            }

            async fn local(&self, req: Pay) -> Result<Receipt, BenchError> {
                self.local_call(req).await
            }

            async fn fast(&self, req: Pay) -> Result<Receipt, BenchError> {
                self.fast_call(req).await
            }
        }
    };
}

shop!(
    SqliteShop,
    staleguard::idempotency::SqliteStore,
    sqlx::SqlitePool,
    "INSERT INTO bench_orders (order_key, amount) VALUES (?1, ?2)",
    "SELECT amount FROM bench_orders WHERE order_key = ?1"
);

#[cfg(feature = "postgres")]
shop!(
    PgShop,
    staleguard::idempotency::PostgresStore,
    sqlx::PgPool,
    "INSERT INTO bench_orders (order_key, amount) VALUES ($1, $2)",
    "SELECT amount FROM bench_orders WHERE order_key = $1"
);

static NEXT: AtomicU64 = AtomicU64::new(0);

fn fresh() -> Pay {
    Pay {
        key: format!(
            "bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ),
        amount: 1,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Raw,
    RawTx,
    Remote,
    Fast,
    Local,
    PointRead,
    Replay,
}

async fn one<S: Shop>(shop: &S, kind: Kind, replay: &Pay) {
    let done = match kind {
        Kind::Raw => shop.raw(&fresh()).await,
        Kind::RawTx => shop.raw_tx(&fresh()).await,
        Kind::Remote => shop.remote(fresh()).await,
        Kind::Fast => shop.fast(fresh()).await,
        Kind::Local => shop.local(fresh()).await,
        Kind::PointRead => shop.point_read(&replay.key).await,
        Kind::Replay => shop.remote(replay.clone()).await,
    };
    done.expect("bench call failed");
}

/// Sequential latency of `a` and `b` in alternating blocks of `block` calls, `rounds` times:
/// the medians of the per-call means of the blocks, and the median and quartiles of the rounds'
/// ratios (robust to a drift of the machine's speed, which moves both halves of a round alike).
async fn paired<S: Shop>(shop: &S, a: Kind, b: Kind, rounds: usize, block: usize) -> Paired {
    let replay = fresh();
    shop.remote(replay.clone()).await.unwrap();
    for _ in 0..block {
        one(shop, a, &replay).await;
        one(shop, b, &replay).await;
    }
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..block {
            one(shop, a, &replay).await;
        }
        let x = start.elapsed().as_secs_f64() * 1e6 / block as f64;
        let start = Instant::now();
        for _ in 0..block {
            one(shop, b, &replay).await;
        }
        let y = start.elapsed().as_secs_f64() * 1e6 / block as f64;
        ta.push(x);
        tb.push(y);
        ratios.push(y / x);
    }
    Paired {
        a: quantile(&mut ta, 0.5),
        b: quantile(&mut tb, 0.5),
        ratio: quantile(&mut ratios, 0.5),
        low: quantile(&mut ratios, 0.25),
        high: quantile(&mut ratios, 0.75),
    }
}

/// What [`paired`] measured: medians in µs per call, and the rounds' ratios.
struct Paired {
    a: f64,
    b: f64,
    ratio: f64,
    low: f64,
    high: f64,
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The machine's load averages (1, 5 and 15 minutes), where `/proc/loadavg` exists.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Calls per second with `tasks` concurrent callers doing `per_task` calls each, after an
/// unmeasured burst of the same concurrency (so that every pool has its connections open and
/// its statements prepared).
async fn throughput<S: Shop>(shop: &Arc<S>, kind: Kind, tasks: usize, per_task: usize) -> f64 {
    let replay = fresh();
    shop.remote(replay.clone()).await.unwrap();
    let burst = |per_task: usize| {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let (shop, replay) = (shop.clone(), replay.clone());
            set.spawn(async move {
                for _ in 0..per_task {
                    one(&*shop, kind, &replay).await;
                }
            });
        }
        async move {
            while let Some(done) = set.join_next().await {
                done.unwrap();
            }
        }
    };
    burst(4).await;
    let start = Instant::now();
    burst(per_task).await;
    (tasks * per_task) as f64 / start.elapsed().as_secs_f64()
}

async fn report<S: Shop>(name: &str, shop: Arc<S>, blocks: usize, block: usize, fast: bool) {
    println!("\n## {name}\n");
    println!("load average before: {}\n", load());
    println!(
        "| comparison | raw | idempotent | ratio (median of rounds) | middle half of the rounds |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut pairs = vec![
        ("remote-effect mode vs the INSERT", Kind::Raw, Kind::Remote),
        ("one-transaction mode vs the INSERT", Kind::Raw, Kind::Local),
        (
            "one-transaction mode vs the INSERT in a transaction of its own",
            Kind::RawTx,
            Kind::Local,
        ),
        ("replay vs a point read", Kind::PointRead, Kind::Replay),
    ];
    if fast {
        pairs.insert(
            1,
            (
                "remote-effect mode, asynchronous completion, vs the INSERT",
                Kind::Raw,
                Kind::Fast,
            ),
        );
    }
    for (label, a, b) in pairs {
        let p = paired(&*shop, a, b, blocks, block).await;
        println!(
            "| {label} (sequential, µs/call) | {:.0} | {:.0} | {:.2}x | {:.2}x–{:.2}x |",
            p.a, p.b, p.ratio, p.low, p.high
        );
    }
    let (tasks, per_task) = (16, 40);
    let mut pairs = vec![
        ("remote-effect mode vs the INSERT", Kind::Raw, Kind::Remote),
        ("one-transaction mode vs the INSERT", Kind::Raw, Kind::Local),
    ];
    if fast {
        pairs.insert(
            1,
            (
                "remote-effect mode, asynchronous completion, vs the INSERT",
                Kind::Raw,
                Kind::Fast,
            ),
        );
    }
    for (label, a, b) in pairs {
        let ta = throughput(&shop, a, tasks, per_task).await;
        let tb = throughput(&shop, b, tasks, per_task).await;
        println!(
            "| {label} ({tasks} callers, calls/s) | {ta:.0} | {tb:.0} | {:.2}x | single run |",
            ta / tb
        );
    }
    println!("\nload average after: {}", load());
}

/// Where the time of a remote-effect call goes on PostgreSQL: its parts timed alone through the
/// store's API, in alternating blocks (medians of the rounds' means), next to what one round
/// trip, a point read and the raw `INSERT` cost in the same rounds.
#[cfg(feature = "postgres")]
async fn phases(shop: &PgShop, rounds: usize, block: usize) {
    use staleguard::idempotency::{
        Attempt, ClaimRequest, IdempotencyKey, IdempotencyStore, Outcome, RecordKey,
    };
    let parts = [
        "one round trip on a held connection (`SELECT 1`)",
        "a point read through the pool",
        "the raw `INSERT` (autocommit)",
        "the claim of a new key (read, insert, commit; one connection)",
        "the completion, durable commit",
        "the completion, asynchronous commit",
    ];
    let fingerprint = "0".repeat(64);
    let point = fresh();
    shop.raw(&point).await.unwrap();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); parts.len()];
    for round in 0..rounds + 2 {
        let mut spent = [0.0; 6];
        let mut conn = shop.pool.acquire().await.unwrap();
        let start = Instant::now();
        for _ in 0..block {
            sqlx::query("SELECT 1").execute(&mut *conn).await.unwrap();
        }
        spent[0] = start.elapsed().as_secs_f64();
        drop(conn);
        let start = Instant::now();
        for _ in 0..block {
            shop.point_read(&point.key).await.unwrap();
        }
        spent[1] = start.elapsed().as_secs_f64();
        let start = Instant::now();
        for _ in 0..block {
            shop.raw(&fresh()).await.unwrap();
        }
        spent[2] = start.elapsed().as_secs_f64();
        let keys: Vec<(RecordKey, String)> = (0..2 * block)
            .map(|_| {
                let key = IdempotencyKey::new(fresh().key).unwrap();
                (RecordKey::new("phases", None, &key), fresh().key)
            })
            .collect();
        let start = Instant::now();
        for (key, owner) in &keys {
            let request = ClaimRequest {
                key,
                record_id: owner,
                fingerprint: &fingerprint,
                owner,
                lease_ms: 30_000,
                retention_ms: 86_400_000,
                retry_failed: false,
            };
            let record = shop.idem.store().claim(&request).await.unwrap();
            assert_eq!(
                &record.owner, owner,
                "the claim of a new key was not this one's"
            );
        }
        spent[3] = start.elapsed().as_secs_f64() / 2.0;
        for (i, (store, half)) in [(shop.idem.store(), 0), (shop.fast.store(), 1)]
            .into_iter()
            .enumerate()
        {
            let start = Instant::now();
            for (key, owner) in &keys[half * block..(half + 1) * block] {
                let attempt = Attempt {
                    key,
                    fence: 1,
                    owner,
                };
                let done = store
                    .finish(&attempt, Outcome::Success("{\"amount\":1}"), 86_400_000)
                    .await
                    .unwrap();
                assert_eq!(done, staleguard::idempotency::Transition::Applied);
            }
            spent[4 + i] = start.elapsed().as_secs_f64();
        }
        if round >= 2 {
            for (t, s) in times.iter_mut().zip(spent) {
                t.push(s * 1e6 / block as f64);
            }
        }
    }
    println!("\n## PostgreSQL: where a remote-effect call's time goes (sequential, µs)\n");
    println!("load average: {}\n", load());
    println!("| part | median | middle half of the rounds |");
    println!("| --- | --- | --- |");
    for (part, t) in parts.iter().zip(&mut times) {
        println!(
            "| {part} | {:.0} | {:.0}–{:.0} |",
            quantile(t, 0.5),
            quantile(t, 0.25),
            quantile(t, 0.75)
        );
    }
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) {
    use sqlx::postgres::PgPoolOptions;
    use staleguard::idempotency::PostgresStore;
    let schema = format!("sg_bench_{}", std::process::id());
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let open = |url: String, schema: String| async move {
        let options = url
            .parse::<sqlx::postgres::PgConnectOptions>()
            .unwrap()
            .options([("search_path", schema.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .unwrap();
        let store = PostgresStore::new(pool.clone(), "idempotency_records").unwrap();
        store.migrate().await.unwrap();
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS bench_orders (order_key TEXT PRIMARY KEY, amount BIGINT NOT NULL)",
        )
        .execute(&pool)
        .await
        .unwrap();
        PgShop {
            idem: Idempotency::new(store.clone()),
            fast: Idempotency::new(store.asynchronous_completion()),
            pool,
        }
    };

    // Round trips per call, on the wire: each call made on a settled pool (every connection
    // back and pinged), its statements prepared by earlier calls.
    let proxy = wire::CountingProxy::start(url).await;
    let counted = open(proxy.url.clone(), schema.clone()).await;
    let replay = fresh();
    counted.remote(replay.clone()).await.unwrap();
    let settled = || async {
        while counted.pool.num_idle() < counted.pool.size() as usize {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        proxy.take()
    };
    println!("\n## PostgreSQL: round trips per call (counted on the wire)\n");
    println!("| call | statements | sqlx release pings | total |");
    println!("| --- | --- | --- | --- |");
    for (label, kind) in [
        ("the INSERT alone", Kind::Raw),
        ("BEGIN, the INSERT, COMMIT", Kind::RawTx),
        ("remote-effect mode, new key", Kind::Remote),
        (
            "remote-effect mode, asynchronous completion, new key",
            Kind::Fast,
        ),
        ("one-transaction mode, new key", Kind::Local),
        ("replay", Kind::Replay),
        ("point read", Kind::PointRead),
    ] {
        for _ in 0..5 {
            one(&counted, kind, &replay).await;
        }
        let n = 20;
        let mut sum = (0, 0, 0);
        for _ in 0..n {
            settled().await;
            one(&counted, kind, &replay).await;
            let t = settled().await;
            sum = (sum.0 + t.statements, sum.1 + t.pings, sum.2 + t.total);
        }
        let avg = |x: usize| x as f64 / n as f64;
        println!(
            "| {label} | {:.1} | {:.1} | {:.1} |",
            avg(sum.0),
            avg(sum.1),
            avg(sum.2)
        );
    }
    counted.pool.close().await;

    let shop = Arc::new(open(url.to_owned(), schema.clone()).await);
    report(
        "PostgreSQL (local server, fsync on)",
        shop.clone(),
        100,
        10,
        true,
    )
    .await;
    phases(&shop, 60, 10).await;
    shop.pool.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&admin)
        .await
        .unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm".into()
        } else {
            std::env::temp_dir()
        };
        let file = dir.join(format!("staleguard-bench-{}.db", std::process::id()));
        let store = staleguard::idempotency::SqliteStore::open(&file, "idempotency_records")
            .await
            .unwrap();
        let pool = store.pool().clone();
        sqlx::raw_sql(
            "CREATE TABLE bench_orders (order_key TEXT PRIMARY KEY, amount INTEGER NOT NULL)",
        )
        .execute(&pool)
        .await
        .unwrap();
        let idem = Idempotency::new(store);
        let shop = Arc::new(SqliteShop {
            fast: idem.clone(),
            idem,
            pool,
        });
        report("SQLite (file on tmpfs, WAL)", shop, 40, 20, false).await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }

        #[cfg(feature = "postgres")]
        match std::env::var("STALEGUARD_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => postgres(&url).await,
            _ => println!("\nPostgreSQL: skipped (STALEGUARD_TEST_POSTGRES_URL is not set)"),
        }
    });
}
