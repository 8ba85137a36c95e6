//! Benchmark of `#[idempotent]`: claim + complete throughput and per-request overhead (p50,
//! p99) for each store next to the same handler without the attribute, and — for PostgreSQL —
//! `pgbench` running the same two statements on the same server as the physical reference.
//!
//! Run: `cargo bench -p staleguard --all-features --bench idempotency`. PostgreSQL is measured
//! when `STALEGUARD_TEST_POSTGRES_URL` is set; `pgbench` when it is on the `PATH`.

use serde::{Deserialize, Serialize};
use staleguard::idempotency::{
    Classify, FailureKind, Idempotency, IdempotencyError, IdempotencyStore, MemoryStore,
    SqliteStore,
};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pay {
    key: String,
    amount: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Receipt {
    amount: u64,
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

async fn bare(req: Pay) -> Result<Receipt, BenchError> {
    Ok(Receipt {
        amount: std::hint::black_box(req.amount),
    })
}

#[staleguard::idempotent(store = idem, key = req.key)]
async fn guarded<S: IdempotencyStore>(
    idem: &Idempotency<S>,
    req: Pay,
) -> Result<Receipt, BenchError> {
    Ok(Receipt {
        amount: std::hint::black_box(req.amount),
    })
}

static NEXT: AtomicU64 = AtomicU64::new(0);

fn fresh_key() -> String {
    format!(
        "bench-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

struct Stats {
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// Sequential latency of `call`, one request at a time.
async fn latency<F, Fut>(n: usize, mut call: F) -> Stats
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Receipt, BenchError>>,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        call().await.expect("bench call failed");
        samples.push(start.elapsed());
    }
    stats(samples)
}

/// Requests per second with `tasks` concurrent callers doing `per_task` requests each.
async fn throughput<F, Fut>(tasks: usize, per_task: usize, call: F) -> f64
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Receipt, BenchError>> + Send,
{
    let call = Arc::new(call);
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        let call = Arc::clone(&call);
        set.spawn(async move {
            for _ in 0..per_task {
                call().await.expect("bench call failed");
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.unwrap();
    }
    (tasks * per_task) as f64 / start.elapsed().as_secs_f64()
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

async fn measure<S: IdempotencyStore>(name: &str, idem: Idempotency<S>, n: usize, tasks: usize) {
    let idem = Arc::new(idem);
    // Warm up (connections, prepared statements, page cache).
    for _ in 0..200 {
        let req = Pay {
            key: fresh_key(),
            amount: 1,
        };
        guarded(&idem, req).await.unwrap();
    }
    let base = latency(n, || {
        bare(Pay {
            key: fresh_key(),
            amount: 1,
        })
    })
    .await;
    let claim_complete = latency(n, || {
        let idem = Arc::clone(&idem);
        async move {
            guarded(
                &idem,
                Pay {
                    key: fresh_key(),
                    amount: 1,
                },
            )
            .await
        }
    })
    .await;
    let replay_key = fresh_key();
    guarded(
        &idem,
        Pay {
            key: replay_key.clone(),
            amount: 1,
        },
    )
    .await
    .unwrap();
    let replay = latency(n, || {
        let idem = Arc::clone(&idem);
        let key = replay_key.clone();
        async move { guarded(&idem, Pay { key, amount: 1 }).await }
    })
    .await;
    let per_task = (n / tasks).max(1);
    let bare_tput = throughput(tasks, per_task * 10, || {
        bare(Pay {
            key: fresh_key(),
            amount: 1,
        })
    })
    .await;
    let tput_idem = Arc::clone(&idem);
    let tput = throughput(tasks, per_task, move || {
        let idem = Arc::clone(&tput_idem);
        async move {
            guarded(
                &idem,
                Pay {
                    key: fresh_key(),
                    amount: 1,
                },
            )
            .await
        }
    })
    .await;
    println!(
        "| {name} | {} / {} | {} / {} | {} / {} | {:.0} | {:.0} |",
        us(base.p50),
        us(base.p99),
        us(claim_complete.p50),
        us(claim_complete.p99),
        us(replay.p50),
        us(replay.p99),
        bare_tput,
        tput,
    );
}

#[cfg(feature = "postgres")]
/// Runs the store's own claim and completion statements through `pgbench -M prepared` with
/// `clients` connections for `seconds`, one transaction = claim + complete of a fresh key.
fn pgbench(url: &str, claim: &str, finish: &str, clients: usize, seconds: u64) -> Option<String> {
    if std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("pgbench not found on PATH: skipped".to_owned());
    }
    let key = "CAST(:key AS TEXT)";
    let bind = |sql: &str, params: &[&str]| {
        let mut sql = sql.to_owned();
        for (i, value) in params.iter().enumerate().rev() {
            sql = sql.replace(&format!("${}", i + 1), value);
        }
        format!("{sql};\n")
    };
    let script = format!(
        "\\set key random(1, 999999999999)\n{}{}",
        bind(
            claim,
            &[
                "'pgbench'",
                "''",
                key,
                key,
                "'fp'",
                key,
                "30000",
                "86400000",
                "false"
            ]
        ),
        bind(
            finish,
            &[
                "'pgbench'",
                "''",
                key,
                "1",
                "'SUCCESS'",
                "'{\"amount\":1}'",
                "86400000",
                key
            ]
        ),
    );
    let path = std::env::temp_dir().join(format!("staleguard-pgbench-{}.sql", std::process::id()));
    std::fs::write(&path, script).ok()?;
    let out = std::process::Command::new("pgbench")
        .args([
            "-n",
            "-M",
            "prepared",
            "-c",
            &clients.to_string(),
            "-j",
            "2",
            "-T",
            &seconds.to_string(),
        ])
        .arg("-f")
        .arg(&path)
        .arg(url)
        .output()
        .ok()?;
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let pick = |prefix: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .map(str::trim)
            .map(str::to_owned)
    };
    Some(format!(
        "{} | {}",
        pick("latency average")
            .unwrap_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned()),
        pick("tps").unwrap_or_default()
    ))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let n = 5_000;
        let tasks = 16;
        println!("per-request latency p50 / p99 in µs, sequential, {n} requests; throughput in requests/s with {tasks} concurrent callers\n");
        println!("| store | bare handler | claim + complete | replay | bare req/s | claim + complete req/s |");
        println!("| --- | --- | --- | --- | --- | --- |");
        measure("memory", Idempotency::new(MemoryStore::new()), n, tasks).await;

        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let file = dir.join(format!("staleguard-bench-{}.db", std::process::id()));
        let sqlite = SqliteStore::open(&file, "idempotency_records").await.unwrap();
        measure("sqlite (WAL, synchronous=FULL)", Idempotency::new(sqlite), n, tasks).await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
        }

        #[cfg(feature = "postgres")]
        match std::env::var("STALEGUARD_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => {
                let table = format!("staleguard_bench_{}", std::process::id());
                let pg = staleguard::idempotency::PostgresStore::connect(&url, &table).await.unwrap();
                measure("postgres", Idempotency::new(pg.clone()), n, tasks).await;
                let reference = pgbench(&url, pg.claim_sql(), pg.finish_sql(), tasks, 10);
                println!("\npgbench -M prepared -c {tasks} -j 2 -T 10, claim + complete per transaction: {}", reference.unwrap_or_default());
                let drop = format!("DROP TABLE IF EXISTS {table}");
                let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(pg.pool()).await;
            }
            _ => println!("\npostgres: skipped (STALEGUARD_TEST_POSTGRES_URL is not set)"),
        }
    });
}
