//! The one-transaction mode (`#[idempotent(tx = tx, ..)]`), on SQLite and PostgreSQL: the
//! claim, the body's writes through `tx` and the completion commit together; an error or a
//! crash rolls all of them back; duplicates in flight wait on the claimed row (or the writer
//! lock) and replay the one outcome: one order row per key, every answer the same.

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use serde::{Deserialize, Serialize};
use staleguard::idempotency::{Config, Idempotency};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    key: String,
    amount: u64,
}

/// The handler's own data, in the store's database.
struct Shop<S> {
    idem: Idempotency<S>,
    orders: String,
    /// When set, the body signals after its write and never finishes (the task is aborted).
    hang: std::sync::Mutex<Option<Arc<Notify>>>,
}

/// Inserts the order in the transaction; amount 0 is declined after the insert (rolled back).
macro_rules! place_order {
    ($name:ident, $store:ty, $insert:literal) => {
        #[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim, tx = tx)]
        async fn $name(shop: &Shop<$store>, req: Order) -> Result<Receipt, AppError> {
            let sql = format!($insert, shop.orders);
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&req.key)
                .bind(req.amount as i64)
                .execute(&mut *tx)
                .await
                .map_err(|e| AppError::Ledger(e.to_string()))?;
            if req.amount == 0 {
                return Err(AppError::Declined("nothing to pay".into()));
            }
            let hang = shop.hang.lock().unwrap().take();
            if let Some(reached) = hang {
                reached.notify_one();
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(Receipt {
                order: req.key,
                amount: req.amount,
                attempt: claim.fence() as u64,
            })
        }
    };
}

place_order!(
    place_sqlite,
    staleguard::idempotency::SqliteStore,
    "INSERT INTO {} (order_key, amount) VALUES (?1, ?2)"
);
#[cfg(feature = "postgres")]
place_order!(
    place_pg,
    staleguard::idempotency::PostgresStore,
    "INSERT INTO {} (order_key, amount) VALUES ($1, $2)"
);

/// The two probes of a store's database: how many order rows a key has, and whether the key
/// has an idempotency record (for the handler `$handler`).
macro_rules! probes {
    ($store:ty, $count_sql:literal, $handler:literal) => {
        (
            |shop: &Shop<$store>, key: &str| {
                let (pool, sql) = (
                    shop.idem.store().pool().clone(),
                    format!($count_sql, shop.orders),
                );
                let key = key.to_owned();
                async move {
                    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
                        .bind(key)
                        .fetch_one(&pool)
                        .await
                        .unwrap()
                }
            },
            |shop: &Shop<$store>, key: &str| {
                let store = shop.idem.store().clone();
                let key = staleguard::idempotency::RecordKey::new(
                    $handler,
                    None,
                    &staleguard::idempotency::IdempotencyKey::new(key).unwrap(),
                );
                async move {
                    staleguard::idempotency::IdempotencyStore::get(&store, &key)
                        .await
                        .unwrap()
                        .is_some()
                }
            },
        )
    };
}

fn order(key: &str, amount: u64) -> Order {
    Order {
        key: key.to_owned(),
        amount,
    }
}

/// The scenarios, for one store: `place` is the handler, `count` the order rows for a key,
/// `record` whether the key has an idempotency record.
macro_rules! scenarios {
    ($shop:expr, $place:ident, $count:expr, $record:expr) => {{
        let shop: Arc<Shop<_>> = $shop;
        let count = $count;
        let record = $record;

        // Success: the order and the record commit together; a replay adds nothing.
        let first = $place(&shop, order("k1", 5)).await.unwrap();
        assert_eq!(count(&shop, "k1").await, 1);
        assert!(
            record(&shop, "k1").await,
            "the record committed with the order"
        );
        assert_eq!($place(&shop, order("k1", 5)).await.unwrap(), first);
        assert_eq!(count(&shop, "k1").await, 1);
        assert_eq!(
            $place(&shop, order("k1", 6)).await,
            Err(AppError::Idem(Idem::Mismatch))
        );

        // An error rolls back the order and the claim: the key is free.
        assert!(matches!(
            $place(&shop, order("k2", 0)).await,
            Err(AppError::Declined(_))
        ));
        assert_eq!(
            count(&shop, "k2").await,
            0,
            "the failed body's write was committed"
        );
        assert!(!record(&shop, "k2").await, "the failed claim was committed");

        // A task aborted mid-body (after its write): nothing committed, the key is free.
        let reached = Arc::new(Notify::new());
        *shop.hang.lock().unwrap() = Some(reached.clone());
        let task = tokio::spawn({
            let shop = shop.clone();
            async move { $place(&shop, order("k3", 5)).await }
        });
        reached.notified().await;
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        assert_eq!(count(&shop, "k3").await, 0);
        let after = $place(&shop, order("k3", 5)).await.unwrap();
        assert_eq!(after.attempt, 1, "a new claim, not a takeover");
        assert_eq!(count(&shop, "k3").await, 1);

        // 16 duplicates at once: they wait for the first transaction and replay its outcome.
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let shop = shop.clone();
            tasks.spawn(async move { $place(&shop, order("k4", 7)).await });
        }
        let mut answers = Vec::new();
        while let Some(done) = tasks.join_next().await {
            answers.push(done.unwrap().unwrap());
        }
        assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
        assert_eq!(count(&shop, "k4").await, 1);
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_one_transaction() {
    let (idem, _file) = sqlite_store(Config::default()).await;
    let pool = idem.store().pool().clone();
    let orders = unique("orders");
    let sql = format!("CREATE TABLE {orders} (order_key TEXT NOT NULL, amount INTEGER NOT NULL)");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&pool)
        .await
        .unwrap();
    let shop = Arc::new(Shop {
        idem,
        orders,
        hang: Default::default(),
    });
    let (count, record) = probes!(
        staleguard::idempotency::SqliteStore,
        "SELECT count(*) FROM {} WHERE order_key = ?1",
        "place_sqlite"
    );
    scenarios!(shop, place_sqlite, count, record);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_one_transaction() {
    let Some(url) = postgres_url("postgres_one_transaction") else {
        return;
    };
    let (idem, table) = postgres_store(&url, Config::default()).await;
    let orders = unique("orders");
    let sql = format!("CREATE TABLE {orders} (order_key TEXT NOT NULL, amount BIGINT NOT NULL)");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(idem.store().pool())
        .await
        .unwrap();
    let shop = Arc::new(Shop {
        idem,
        orders: orders.clone(),
        hang: Default::default(),
    });
    let (count, record) = probes!(
        staleguard::idempotency::PostgresStore,
        "SELECT count(*) FROM {} WHERE order_key = $1",
        "place_pg"
    );
    scenarios!(shop.clone(), place_pg, count, record);
    let drop = format!("DROP TABLE IF EXISTS {orders}");
    sqlx::query(sqlx::AssertSqlSafe(drop))
        .execute(shop.idem.store().pool())
        .await
        .unwrap();
    drop_postgres_table(&shop.idem, &table).await;
}
