//! Fault injection against the real stores: SQLite (a file, several pools, other processes),
//! PostgreSQL and Redis (when their URLs are set; under CI a missing URL fails).
//!
//! Every scenario runs the same handler: its effect is a row in a ledger whose key is unique,
//! written under `claim.record_id()` (a downstream that deduplicates on the key it is given,
//! and answers a repeat with the original outcome: the fence the effect happened under). The
//! checks are the documented guarantees: at most one effect per key; no stuck key (every key
//! ends SUCCESS and replays); no response lost or replaced (every answer a client got for a key
//! is the one the store replays).
//!
//! - a body that panics after its effect, and a task aborted after its effect;
//! - connections killed mid-call (PostgreSQL: `pg_terminate_backend` of the test's own pool,
//!   found by its `application_name`; Redis: `CLIENT KILL` of the store's connection) while
//!   duplicates storm; SQLite: the storm over two pools on one file;
//! - a process killed (SIGKILL) between the effect and the completion: the test binary runs
//!   itself as the child (`STALEGUARD_FAULT_ROLE`);
//! - duplicates from two processes at once.

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use serde::{Deserialize, Serialize};
use staleguard::idempotency::{
    Config, Idempotency, IdempotencyStore, Reconciler, Resolution, UnknownRecord,
};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const ROLE: &str = "STALEGUARD_FAULT_ROLE";
const AMOUNT: u64 = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pay {
    key: String,
    amount: u64,
}

/// What the body does right after its effect.
#[derive(Clone, Default)]
enum Fault {
    #[default]
    None,
    Panic,
    /// Signals, then waits for ever (the task is aborted).
    Hang(Arc<Notify>),
    /// Prints `EFFECT <key>` on stdout, then waits for ever (the process is killed).
    Announce,
}

struct Svc<S> {
    idem: Idempotency<S>,
    ledger: Ledger,
    fault: std::sync::Mutex<Fault>,
}

impl<S> Svc<S> {
    fn new(idem: Idempotency<S>, ledger: Ledger) -> Arc<Self> {
        Arc::new(Svc {
            idem,
            ledger,
            fault: Default::default(),
        })
    }

    fn arm(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }
}

#[staleguard::idempotent(store = svc.idem, key = req.key, claim = claim)]
async fn charge<S: IdempotencyStore>(svc: &Svc<S>, req: Pay) -> Result<Receipt, AppError> {
    svc.ledger
        .record_once(claim.record_id(), &req.key, claim.fence())
        .await?;
    let fault = std::mem::take(&mut *svc.fault.lock().unwrap());
    match fault {
        Fault::None => {}
        Fault::Panic => panic!("the body panics after its effect"),
        Fault::Hang(reached) => {
            reached.notify_one();
            std::future::pending::<()>().await;
        }
        Fault::Announce => {
            println!("EFFECT {}", req.key);
            std::future::pending::<()>().await;
        }
    }
    receipt_of(&svc.ledger, claim.record_id(), &req.key).await
}

/// The downstream's answer for the effect keyed `record_id`.
async fn receipt_of(ledger: &Ledger, record_id: &str, key: &str) -> Result<Receipt, AppError> {
    let fence = ledger
        .effect_fence(record_id)
        .await?
        .ok_or_else(|| AppError::Ledger(format!("no effect for {key}")))?;
    Ok(Receipt {
        order: key.to_owned(),
        amount: AMOUNT,
        attempt: fence as u64,
    })
}

fn pay(key: &str) -> Pay {
    Pay {
        key: key.to_owned(),
        amount: AMOUNT,
    }
}

/// Sends the request until it gets a final answer: "in progress", a store failure and a
/// taken-over claim are retried, as a client would.
async fn until_final<S: IdempotencyStore>(svc: &Svc<S>, key: &str) -> Result<Receipt, AppError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match charge(svc, pay(key)).await {
            Err(AppError::Idem(Idem::InProgress | Idem::Store(_) | Idem::Fenced))
                if Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// A reconciler that asks the downstream (the ledger): a record left UNKNOWN by a store
/// failure after the effect converges to the downstream's answer.
fn reconciler<S: IdempotencyStore>(svc: &Arc<Svc<S>>) -> tokio::task::JoinHandle<()> {
    let ledger = svc.ledger.clone();
    Reconciler::new(svc.idem.clone(), move |record: UnknownRecord| {
        let ledger = ledger.clone();
        async move {
            match receipt_of(&ledger, &record.record_id, &record.key.key).await {
                Ok(receipt) => Resolution::success(&receipt).unwrap(),
                Err(_) => Resolution::StillUnknown,
            }
        }
    })
    .reserve(Duration::from_secs(1))
    .spawn(Duration::from_millis(50))
}

/// The guarantees, for each key: one effect, the key ends replayed (not stuck), and every
/// answer a client got is the replayed one.
async fn check_guarantees<S: IdempotencyStore>(
    svc: &Arc<Svc<S>>,
    answers: &HashMap<String, Vec<Receipt>>,
) {
    let reconciling = reconciler(svc);
    for (key, got) in answers {
        assert_eq!(
            svc.ledger.effects(key).await.len(),
            1,
            "{key}: not exactly one effect"
        );
        let replayed = until_final(svc, key).await.unwrap_or_else(|e| {
            panic!("{key}: no final answer ({e:?}): stuck");
        });
        for answer in got {
            assert_eq!(answer, &replayed, "{key}: an answer was replaced");
        }
    }
    reconciling.abort();
}

fn short_lease() -> Config {
    Config {
        lease: Duration::from_millis(300),
        ..Config::default()
    }
}

// --- a panicking body, an aborted task -------------------------------------------------------

async fn a_panicking_body_is_taken_over_without_a_second_effect<S: IdempotencyStore>(
    svc: Arc<Svc<S>>,
) {
    svc.arm(Fault::Panic);
    let crashed = tokio::spawn({
        let svc = svc.clone();
        async move { charge(&svc, pay("k-panic")).await }
    })
    .await;
    assert!(crashed.unwrap_err().is_panic());
    let answer = until_final(&svc, "k-panic").await.unwrap();
    assert_eq!(
        answer.attempt, 1,
        "the takeover answers with the first effect"
    );
    check_guarantees(&svc, &HashMap::from([("k-panic".to_owned(), vec![answer])])).await;
}

async fn an_aborted_task_is_taken_over_without_a_second_effect<S: IdempotencyStore>(
    svc: Arc<Svc<S>>,
) {
    let reached = Arc::new(Notify::new());
    svc.arm(Fault::Hang(reached.clone()));
    let task = tokio::spawn({
        let svc = svc.clone();
        async move { charge(&svc, pay("k-abort")).await }
    });
    reached.notified().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let answer = until_final(&svc, "k-abort").await.unwrap();
    check_guarantees(&svc, &HashMap::from([("k-abort".to_owned(), vec![answer])])).await;
}

// --- duplicates while connections die ---------------------------------------------------------

const KEYS: usize = 8;
const DUPLICATES: usize = 8;

/// `KEYS` keys × `DUPLICATES` concurrent requests each, over the given services (one per pool),
/// while `kill` runs every few milliseconds; returns every final answer per key, and how many
/// connections were killed.
async fn storm<S, K, Fut>(
    services: &[Arc<Svc<S>>],
    prefix: &str,
    kill: K,
) -> (HashMap<String, Vec<Receipt>>, usize)
where
    S: IdempotencyStore,
    K: Fn() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = usize> + Send,
{
    let killed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let killing = tokio::spawn({
        let killed = killed.clone();
        async move {
            loop {
                killed.fetch_add(kill().await, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        }
    });
    // A completion that fails twice (its connections killed) leaves the record UNKNOWN, as the
    // docs say; the reconciler, which the docs ask to run, resolves it meanwhile.
    let reconciling = reconciler(&services[0]);
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..KEYS {
        for d in 0..DUPLICATES {
            let svc = services[d % services.len()].clone();
            let key = format!("{prefix}-{k}");
            tasks.spawn(async move {
                let answer = until_final(&svc, &key).await;
                (key, answer)
            });
        }
    }
    let mut answers: HashMap<String, Vec<Receipt>> = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        let (key, answer) = done.unwrap();
        let answer = answer.unwrap_or_else(|e| panic!("{key}: {e:?}"));
        answers.entry(key).or_default().push(answer);
    }
    killing.abort();
    reconciling.abort();
    (answers, killed.load(std::sync::atomic::Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_duplicates_over_two_pools_on_one_file() {
    let (first, file) = sqlite_store(short_lease()).await;
    let second = staleguard::idempotency::SqliteStore::open(&file.0, "idempotency_records")
        .await
        .unwrap();
    let ledger = Ledger::sqlite(first.store().pool().clone()).await;
    let services = [
        Svc::new(first, ledger.clone()),
        Svc::new(Idempotency::with_config(second, short_lease()), ledger),
    ];
    let (answers, _) = storm(&services, "k-pools", || async { 0 }).await;
    check_guarantees(&services[0], &answers).await;
}

#[cfg(feature = "postgres")]
mod pg {
    use super::*;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    use staleguard::idempotency::PostgresStore;
    use std::str::FromStr;

    /// A store whose connections carry `application_name = app`, and a ledger.
    pub async fn open(
        url: &str,
        app: &str,
        table: &str,
        ledger: Option<&str>,
    ) -> Arc<Svc<PostgresStore>> {
        let options = PgConnectOptions::from_str(url)
            .unwrap()
            .application_name(app);
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .unwrap();
        let store = PostgresStore::new(pool, table).unwrap();
        store.migrate().await.unwrap();
        // The downstream has connections of its own, which the test does not kill.
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let ledger = match ledger {
            Some(name) => Ledger::Postgres(pool, name.to_owned()),
            None => Ledger::postgres(pool).await,
        };
        Svc::new(Idempotency::with_config(store, short_lease()), ledger)
    }

    /// Terminates every connection named `app` (the test's own); returns how many.
    pub async fn kill(admin: &sqlx::PgPool, app: &str) -> usize {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()) AS killed",
        )
        .bind(app)
        .fetch_one(admin)
        .await
        .map(|n| n as usize)
        .unwrap_or(0)
    }

    pub async fn cleanup(url: &str, svc: &Svc<PostgresStore>, table: &str) {
        let admin = sqlx::PgPool::connect(url).await.unwrap();
        for name in [table, svc.ledger.table()] {
            let sql = format!("DROP TABLE IF EXISTS {name}");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&admin)
                .await
                .unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_duplicates_while_connections_are_killed() {
        let Some(url) = postgres_url("postgres_duplicates_while_connections_are_killed") else {
            return;
        };
        let app = unique("sg_fault");
        let table = unique("staleguard_idem_fault");
        let svc = open(&url, &app, &table, None).await;
        let admin = sqlx::PgPool::connect(&url).await.unwrap();
        let killer = (admin.clone(), app.clone());
        let (answers, killed) = storm(std::slice::from_ref(&svc), "k-kill", move || {
            let (admin, app) = killer.clone();
            async move { kill(&admin, &app).await }
        })
        .await;
        assert!(killed > 0, "no connection was killed");
        check_guarantees(&svc, &answers).await;
        cleanup(&url, &svc, &table).await;
    }
}

#[cfg(feature = "redis")]
mod rd {
    use super::*;
    use staleguard::idempotency::RedisStore;

    /// Kills the store's own connection (by its client id); returns how many.
    pub async fn kill(
        admin: &mut ::redis::aio::MultiplexedConnection,
        store: &RedisStore,
    ) -> usize {
        let mut own = store.connection().clone();
        let Ok(id) = ::redis::cmd("CLIENT")
            .arg("ID")
            .query_async::<i64>(&mut own)
            .await
        else {
            return 0;
        };
        ::redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async::<i64>(admin)
            .await
            .map(|n| n as usize)
            .unwrap_or(0)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_duplicates_while_connections_are_killed() {
        let Some(url) = redis_url("redis_duplicates_while_connections_are_killed") else {
            return;
        };
        let (ledger, _file) = Ledger::scratch().await;
        let svc = Svc::new(redis_store(&url, short_lease()).await, ledger);
        let admin = ::redis::Client::open(url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let store = svc.idem.store().clone();
        let (answers, killed) = storm(std::slice::from_ref(&svc), "k-kill", move || {
            let (mut admin, store) = (admin.clone(), store.clone());
            async move { kill(&mut admin, &store).await }
        })
        .await;
        assert!(killed > 0, "no connection was killed");
        check_guarantees(&svc, &answers).await;
        drop_redis_prefix(&url, svc.idem.store().prefix()).await;
    }
}

// --- other processes --------------------------------------------------------------------------

/// Where a child process finds the store and the ledger (passed in its environment).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Place {
    store: String,
    url: String,
    location: String,
    ledger: String,
}

/// Opens the service a `Place` describes, in this process.
macro_rules! with_service {
    ($place:expr, |$svc:ident| $body:expr) => {{
        let place: &Place = $place;
        match place.store.as_str() {
            "sqlite" => {
                let store = staleguard::idempotency::SqliteStore::open(
                    &place.location,
                    "idempotency_records",
                )
                .await
                .unwrap();
                let ledger = Ledger::Sqlite(store.pool().clone(), place.ledger.clone());
                let $svc = Svc::new(Idempotency::with_config(store, short_lease()), ledger);
                $body
            }
            #[cfg(feature = "postgres")]
            "postgres" => {
                let $svc = pg::open(
                    &place.url,
                    "sg_fault_child",
                    &place.location,
                    Some(&place.ledger),
                )
                .await;
                $body
            }
            #[cfg(feature = "redis")]
            "redis" => {
                let store =
                    staleguard::idempotency::RedisStore::connect(&place.url, &place.location)
                        .await
                        .unwrap();
                let pool = sqlx::SqlitePool::connect_with(
                    sqlx::sqlite::SqliteConnectOptions::new()
                        .filename(&place.ledger)
                        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                        .busy_timeout(Duration::from_secs(30)),
                )
                .await
                .unwrap();
                let table: String = sqlx::query_scalar(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ledger%'",
                )
                .fetch_one(&pool)
                .await
                .unwrap();
                let ledger = Ledger::Sqlite(pool, table);
                let $svc = Svc::new(Idempotency::with_config(store, short_lease()), ledger);
                $body
            }
            other => panic!("unknown store `{other}`"),
        }
    }};
}

/// The child's side: `kill` runs one request that announces its effect and hangs (the parent
/// kills the process); `dup` sends every key's duplicates and prints each final answer.
async fn child(role: &str, place: &Place) {
    match role {
        "kill" => with_service!(place, |svc| {
            svc.arm(Fault::Announce);
            let _ = charge(&svc, pay("k-proc")).await;
            unreachable!("the body hangs after its effect");
        }),
        "dup" => with_service!(place, |svc| {
            let mut tasks = tokio::task::JoinSet::new();
            for k in 0..KEYS {
                for _ in 0..DUPLICATES / 2 {
                    let svc = svc.clone();
                    let key = format!("k-proc-{k}");
                    tasks.spawn(async move { (key.clone(), until_final(&svc, &key).await) });
                }
            }
            while let Some(done) = tasks.join_next().await {
                let (key, answer) = done.unwrap();
                let answer = answer.unwrap_or_else(|e| panic!("{key}: {e:?}"));
                println!("ANSWER {key} {}", serde_json::to_string(&answer).unwrap());
            }
        }),
        other => panic!("unknown role `{other}`"),
    }
}

/// A child process, killed if the test ends (or fails) before it does.
struct ChildProcess(std::process::Child);

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// This test again, as a child process in `role` (its stdout piped).
fn spawn_child(test: &str, role: &str, place: &Place) -> ChildProcess {
    ChildProcess(
        Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env(
                "STALEGUARD_FAULT_PLACE",
                serde_json::to_string(place).unwrap(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

/// Runs the child role when this process is a child; returns whether it was.
async fn as_child() -> bool {
    let Ok(role) = std::env::var(ROLE) else {
        return false;
    };
    let place: Place =
        serde_json::from_str(&std::env::var("STALEGUARD_FAULT_PLACE").unwrap()).unwrap();
    child(&role, &place).await;
    true
}

/// The test's name as the harness knows it (`sqlite::processes`, ..).
fn harness_name(path: &str) -> String {
    path.split_once("::")
        .map_or(path, |(_, rest)| rest)
        .to_owned()
}

/// A child process runs the request, announces its effect and is killed (SIGKILL) before its
/// completion; then this process retries: after the lease, the takeover finds the effect
/// (same record id) and does not repeat it.
async fn a_killed_process_is_taken_over_without_a_second_effect<S: IdempotencyStore>(
    test: &str,
    svc: Arc<Svc<S>>,
    place: Place,
) {
    let mut child = spawn_child(test, "kill", &place);
    let stdout = child.0.stdout.take().unwrap();
    // (The harness prints the test's name first, on the same line.)
    let announced = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.ends_with("EFFECT k-proc"))
    });
    let announced = tokio::time::timeout(Duration::from_secs(120), announced)
        .await
        .expect("the child did not reach its effect")
        .unwrap();
    assert!(announced, "the child ended without its effect");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let answer = until_final(&svc, "k-proc").await.unwrap();
    assert_eq!(
        answer.attempt, 1,
        "the answer is the killed process's effect"
    );
    check_guarantees(&svc, &HashMap::from([("k-proc".to_owned(), vec![answer])])).await;
}

/// Two child processes send the same keys' duplicates at once.
async fn duplicates_from_two_processes<S: IdempotencyStore>(
    test: &str,
    svc: Arc<Svc<S>>,
    place: Place,
) {
    let children = [
        spawn_child(test, "dup", &place),
        spawn_child(test, "dup", &place),
    ];
    let mut answers: HashMap<String, Vec<Receipt>> = HashMap::new();
    let outputs = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|mut c| {
                let mut stdout = String::new();
                std::io::Read::read_to_string(&mut c.0.stdout.take().unwrap(), &mut stdout)
                    .unwrap();
                (c.0.wait().unwrap(), stdout)
            })
            .collect::<Vec<_>>()
    });
    let outputs = tokio::time::timeout(Duration::from_secs(180), outputs)
        .await
        .expect("the children did not finish")
        .unwrap();
    for (status, stdout) in outputs {
        assert!(status.success(), "a child failed: {status:?}");
        for line in stdout.lines() {
            if let Some(at) = line.find("ANSWER ") {
                let rest = &line[at + "ANSWER ".len()..];
                let (key, json) = rest.split_once(' ').unwrap();
                answers
                    .entry(key.to_owned())
                    .or_default()
                    .push(serde_json::from_str(json).unwrap());
            }
        }
    }
    assert_eq!(answers.len(), KEYS);
    assert!(answers.values().all(|a| a.len() == DUPLICATES));
    check_guarantees(&svc, &answers).await;
}

macro_rules! process_tests {
    ($($scenario:ident),* $(,)?) => {
        mod processes {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if as_child().await {
                        return;
                    }
                    let test = harness_name(concat!(module_path!(), "::", stringify!($scenario)));
                    let (first, file) = sqlite_store(short_lease()).await;
                    let ledger = Ledger::sqlite(first.store().pool().clone()).await;
                    let place = Place {
                        store: "sqlite".into(),
                        url: String::new(),
                        location: file.0.display().to_string(),
                        ledger: ledger.table().to_owned(),
                    };
                    crate::$scenario(&test, Svc::new(first, ledger), place).await;
                }
            )*

            #[cfg(feature = "postgres")]
            mod postgres {
                use super::*;
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $scenario() {
                        if as_child().await {
                            return;
                        }
                        let test = harness_name(concat!(module_path!(), "::", stringify!($scenario)));
                        let Some(url) = postgres_url(&test) else { return };
                        let table = unique("staleguard_idem_proc");
                        let svc = pg::open(&url, &unique("sg_fault"), &table, None).await;
                        let place = Place {
                            store: "postgres".into(),
                            url: url.clone(),
                            location: table.clone(),
                            ledger: svc.ledger.table().to_owned(),
                        };
                        crate::$scenario(&test, svc.clone(), place).await;
                        pg::cleanup(&url, &svc, &table).await;
                    }
                )*
            }

            #[cfg(feature = "redis")]
            mod redis {
                use super::*;
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $scenario() {
                        if as_child().await {
                            return;
                        }
                        let test = harness_name(concat!(module_path!(), "::", stringify!($scenario)));
                        let Some(url) = redis_url(&test) else { return };
                        let (ledger, file) = Ledger::scratch().await;
                        let idem = redis_store(&url, short_lease()).await;
                        let place = Place {
                            store: "redis".into(),
                            url: url.clone(),
                            location: idem.store().prefix().to_owned(),
                            ledger: file.0.display().to_string(),
                        };
                        let prefix = place.location.clone();
                        crate::$scenario(&test, Svc::new(idem, ledger), place).await;
                        drop_redis_prefix(&url, &prefix).await;
                    }
                )*
            }
        }
    };
}

process_tests!(
    a_killed_process_is_taken_over_without_a_second_effect,
    duplicates_from_two_processes,
);

macro_rules! in_process_tests {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (idem, _file) = super::sqlite_store(super::short_lease()).await;
                    let ledger = super::Ledger::sqlite(idem.store().pool().clone()).await;
                    super::$scenario(super::Svc::new(idem, ledger)).await;
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some(url) = super::postgres_url(concat!("faults postgres::", stringify!($scenario))) else { return };
                    let table = super::unique("staleguard_idem_fault");
                    let svc = super::pg::open(&url, &super::unique("sg_fault"), &table, None).await;
                    super::$scenario(svc.clone()).await;
                    super::pg::cleanup(&url, &svc, &table).await;
                }
            )*
        }

        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let Some(url) = super::redis_url(concat!("faults redis::", stringify!($scenario))) else { return };
                    let (ledger, _file) = super::Ledger::scratch().await;
                    let idem = super::redis_store(&url, super::short_lease()).await;
                    let prefix = idem.store().prefix().to_owned();
                    super::$scenario(super::Svc::new(idem, ledger)).await;
                    super::drop_redis_prefix(&url, &prefix).await;
                }
            )*
        }
    };
}

in_process_tests!(
    a_panicking_body_is_taken_over_without_a_second_effect,
    an_aborted_task_is_taken_over_without_a_second_effect,
);
