//! True round trips, counted on the wire, and read-only replays.
//!
//! PostgreSQL: the store's own pool (`PostgresStore::connect`) talks to the server through a
//! counting proxy (`idempotent_support::wire`), which counts the server's `ReadyForQuery`
//! messages: a new key costs 3 statements (read and insert on one connection, completion on
//! another), a replay 1 and an "in progress" answer 1, with no ping before them; sqlx pings
//! each connection on its way back to the pool, after the answer: 2 for a new key (one per
//! connection), 1 for a replay. The one-transaction mode: `BEGIN`, the insert, the completion
//! and `COMMIT` on one connection, one ping. A replay or an "in progress" answer leaves the
//! row's version (`xmin`) as it was: they write nothing. SQLite: a replay and an "in progress"
//! answer finish while another connection holds the writer lock, so they do not need it.

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use staleguard::idempotency::{
    Begun, Call, Config, Fingerprinter, Idempotency, IdempotencyError, IdempotencyKey,
    IdempotencyStore,
};
#[cfg(feature = "postgres")]
use staleguard::idempotency::{BegunLocal, ErrorCodec, LocalStore, ResponseCodec};
use std::time::Duration;

fn call(key: &str) -> Call {
    let mut fp = Fingerprinter::new();
    fp.add("amount", &100u64);
    Call::new(
        "charge",
        IdempotencyKey::new(key).unwrap(),
        fp.finish().unwrap(),
    )
}

fn receipt() -> Receipt {
    Receipt {
        order: "o1".to_owned(),
        amount: 100,
        attempt: 1,
    }
}

/// Claims and completes `key`.
async fn complete<S: IdempotencyStore>(engine: &Idempotency<S>, key: &str) {
    let Ok(Begun::Run(guard)) = engine.begin(call(key)).await else {
        panic!("{key}: expected to run");
    };
    guard.finish::<_, AppError>(Ok(receipt())).await.unwrap();
}

/// Claims `key` in the one-transaction mode and commits it with nothing else written.
#[cfg(feature = "postgres")]
async fn complete_local<S: LocalStore>(engine: &Idempotency<S>, key: &str) {
    let Ok(BegunLocal::Run(guard, tx)) = engine.begin_local(call(key)).await else {
        panic!("{key}: expected to run in the transaction");
    };
    let (response, error) = (ResponseCodec::new(), ErrorCodec::<AppError>::new());
    guard
        .finish_with(tx, Ok(receipt()), &response, &error)
        .await
        .unwrap();
}

#[cfg(feature = "postgres")]
async fn is_local_replay<S: LocalStore>(engine: &Idempotency<S>, key: &str) {
    match engine.begin_local(call(key)).await {
        Ok(BegunLocal::Replay(Ok(body))) => {
            assert_eq!(serde_json::from_str::<Receipt>(&body).unwrap(), receipt())
        }
        Ok(BegunLocal::Replay(Err(e))) => panic!("{key}: replayed an error {e}"),
        Ok(BegunLocal::Run(..)) => panic!("{key}: the body would run again"),
        Err(e) => panic!("{key}: {e}"),
    }
}

async fn is_replay<S: IdempotencyStore>(engine: &Idempotency<S>, key: &str) {
    match engine.begin(call(key)).await {
        Ok(Begun::Replay(Ok(body))) => {
            assert_eq!(serde_json::from_str::<Receipt>(&body).unwrap(), receipt())
        }
        Ok(Begun::Replay(Err(e))) => panic!("{key}: replayed an error {e}"),
        Ok(Begun::Run(_)) => panic!("{key}: the body would run again"),
        Err(e) => panic!("{key}: {e}"),
    }
}

async fn is_in_progress<S: IdempotencyStore>(engine: &Idempotency<S>, key: &str) {
    match engine.begin(call(key)).await {
        Err(IdempotencyError::InProgress { .. }) => {}
        Err(e) => panic!("{key}: expected in progress, got {e}"),
        Ok(_) => panic!("{key}: expected in progress"),
    }
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_round_trips_on_the_wire() {
    use staleguard::idempotency::PostgresStore;
    let Some(url) = postgres_url("postgres_round_trips_on_the_wire") else {
        return;
    };
    let proxy = wire::CountingProxy::start(&url).await;
    let table = unique("staleguard_idem_rt");
    let own = PostgresStore::connect(&proxy.url, &table).await.unwrap();
    assert!(
        !own.pool().options().get_test_before_acquire(),
        "the store's own pool pings before every statement"
    );
    // The same options on one connection, so that every statement is prepared once and the
    // count does not depend on which pooled connection a call gets.
    let pool = own.pool().options().clone().max_connections(1);
    let pool = pool.connect(&proxy.url).await.unwrap();
    let store = PostgresStore::new(pool, &table).unwrap();
    let held = Idempotency::with_config(
        store.clone(),
        Config {
            lease: Duration::from_secs(3600),
            ..Config::default()
        },
    );
    let expiring = Idempotency::with_config(
        store.clone(),
        Config {
            lease: Duration::ZERO,
            ..Config::default()
        },
    );
    // Warm up: each statement prepared once on the connection (a first use costs one more
    // round trip, to parse and describe it).
    complete(&held, "warm").await;
    is_replay(&held, "warm").await;
    let _busy = held.begin(call("warm-busy")).await.unwrap();
    is_in_progress(&held, "warm-busy").await;
    let Ok(Begun::Run(_crashed)) = expiring.begin(call("warm-take")).await else {
        panic!()
    };
    let Ok(Begun::Run(_taken)) = expiring.begin(call("warm-take")).await else {
        panic!()
    };
    complete_local(&held, "warm-local").await;
    is_local_replay(&held, "warm-local").await;

    // The connection is back in the pool (sqlx pings it on the way, after the answer).
    let pool = store.pool().clone();
    let counted = || {
        let pool = pool.clone();
        let proxy = &proxy;
        async move {
            while pool.num_idle() < pool.size() as usize {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            proxy.take()
        }
    };
    let trips = |statements, pings| wire::RoundTrips {
        total: statements + pings,
        statements,
        pings,
    };
    let xmin = |key: &'static str| {
        let pool = store.pool().clone();
        let sql = format!("SELECT xmin::text FROM {table} WHERE idem_key = $1");
        async move {
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
                .bind(key)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };

    counted().await;
    complete(&held, "k1").await;
    assert_eq!(
        counted().await,
        trips(3, 2),
        "a new key: the read and the insert on one connection, the completion on another, \
         each connection followed by sqlx's release ping"
    );

    let version = xmin("k1").await;
    counted().await;
    is_replay(&held, "k1").await;
    assert_eq!(counted().await, trips(1, 1), "a replay: one read");
    is_replay(&held, "k1").await;
    assert_eq!(xmin("k1").await, version, "a replay wrote the record");

    let Ok(Begun::Run(first)) = held.begin(call("k2")).await else {
        panic!()
    };
    let version = xmin("k2").await;
    counted().await;
    is_in_progress(&held, "k2").await;
    assert_eq!(counted().await, trips(1, 1), "in progress: one read");
    assert_eq!(
        xmin("k2").await,
        version,
        "an in-progress answer wrote the record"
    );
    first.finish::<_, AppError>(Ok(receipt())).await.unwrap();

    // A takeover reads, then takes the record over by compare-and-set.
    let Ok(Begun::Run(_crashed)) = expiring.begin(call("k3")).await else {
        panic!()
    };
    counted().await;
    let Ok(Begun::Run(taken)) = expiring.begin(call("k3")).await else {
        panic!("expected a takeover")
    };
    assert_eq!(taken.handle().fence(), 2);
    assert_eq!(
        counted().await,
        trips(2, 1),
        "a takeover: the read and the compare-and-set upsert, on one connection"
    );

    // The one-transaction mode: BEGIN, the insert, the completion and COMMIT on one connection
    // (the body's own statements would go between them); a duplicate after the commit is
    // BEGIN, the insert that finds the key (and writes nothing) and the read; its ROLLBACK
    // goes out with the release ping, after the answer.
    counted().await;
    complete_local(&held, "k5").await;
    assert_eq!(
        counted().await,
        trips(4, 1),
        "the one-transaction mode: BEGIN, insert, completion, COMMIT"
    );
    let version = xmin("k5").await;
    counted().await;
    is_local_replay(&held, "k5").await;
    assert_eq!(
        counted().await,
        trips(4, 1),
        "a one-transaction replay: BEGIN, insert, read, then ROLLBACK and the release ping"
    );
    assert_eq!(xmin("k5").await, version, "a replay wrote the record");

    // sqlx's default pool pings each connection it hands out: one more round trip for each
    // acquisition (what the store's own pool does not do).
    let pinging = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&proxy.url)
        .await
        .unwrap();
    let ping_pool = pinging.clone();
    let pinging = Idempotency::new(PostgresStore::new(pinging, &table).unwrap());
    complete(&pinging, "warm-ping").await;
    is_replay(&pinging, "warm-ping").await;
    let settled = || async {
        while ping_pool.num_idle() < ping_pool.size() as usize {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        proxy.take()
    };
    settled().await;
    complete(&pinging, "k4").await;
    assert_eq!(
        settled().await,
        trips(3, 4),
        "sqlx's default pool: a ping before and after each of the two connections"
    );

    let drop = format!("DROP TABLE IF EXISTS {table}");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(store.pool())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_replays_and_in_progress_answers_do_not_take_the_writer_lock() {
    let (engine, file) = sqlite_store(Config {
        lease: Duration::from_secs(3600),
        ..Config::default()
    })
    .await;
    complete(&engine, "k1").await;
    let _busy = engine.begin(call("k2")).await.unwrap();

    // Another process's writer holds the lock (the store's busy timeout is 30 s).
    use sqlx::Connection;
    let mut writer = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.0.display()))
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE; CREATE TABLE held (x INTEGER);")
        .execute(&mut writer)
        .await
        .unwrap();
    let reads = async {
        is_replay(&engine, "k1").await;
        is_in_progress(&engine, "k2").await;
    };
    tokio::time::timeout(Duration::from_secs(5), reads)
        .await
        .expect("a replay or an in-progress answer waited for the writer lock");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut writer)
        .await
        .unwrap();
}
