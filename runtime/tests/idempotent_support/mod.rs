//! Shared helpers of the idempotency tests: one factory per store (memory, SQLite, PostgreSQL
//! when `STALEGUARD_TEST_POSTGRES_URL` is set), unique table names, the test error type and a
//! ledger table with a unique constraint to count side effects.

#![allow(dead_code)]

pub mod wire;

#[path = "../store_support/mod.rs"]
mod stores;
#[cfg(feature = "redis")]
#[allow(unused_imports)] // not every test binary uses every helper
pub use stores::drop_redis_prefix;
#[allow(unused_imports)]
pub use stores::{postgres_url, redis_url};

use serde::{Deserialize, Serialize};
#[cfg(feature = "postgres")]
use staleguard::idempotency::PostgresStore;
use staleguard::idempotency::{
    Classify, Config, FailureKind, Idempotency, IdempotencyError, MemoryStore, SqliteStore,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A name no other test (in this process or another run) uses.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A Redis store under a key prefix of its own.
#[cfg(feature = "redis")]
pub async fn redis_store(
    url: &str,
    config: Config,
) -> Idempotency<staleguard::idempotency::RedisStore> {
    let prefix = unique("sg_idem");
    let store = staleguard::idempotency::RedisStore::connect(url, &prefix)
        .await
        .unwrap();
    Idempotency::with_config(store, config)
}

/// A scratch SQLite file (on tmpfs when available), removed on drop.
pub struct ScratchFile(pub PathBuf);

impl ScratchFile {
    pub fn new(prefix: &str) -> Self {
        let dir = PathBuf::from("/dev/shm");
        let dir = if dir.is_dir() {
            dir
        } else {
            std::env::temp_dir()
        };
        ScratchFile(dir.join(format!("{}.db", unique(prefix))))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

pub async fn sqlite_store(config: Config) -> (Idempotency<SqliteStore>, ScratchFile) {
    let file = ScratchFile::new("staleguard_idem");
    let store = SqliteStore::open(&file.0, "idempotency_records")
        .await
        .unwrap();
    (Idempotency::with_config(store, config), file)
}

#[cfg(feature = "postgres")]
pub async fn postgres_store(url: &str, config: Config) -> (Idempotency<PostgresStore>, String) {
    let table = unique("staleguard_idem");
    let store = PostgresStore::connect(url, &table).await.unwrap();
    (Idempotency::with_config(store, config), table)
}

#[cfg(feature = "postgres")]
pub async fn drop_postgres_table(engine: &Idempotency<PostgresStore>, table: &str) {
    let sql = format!("DROP TABLE IF EXISTS {table}");
    let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(engine.store().pool())
        .await;
}

pub fn memory_store(config: Config) -> Idempotency<MemoryStore> {
    Idempotency::with_config(MemoryStore::new(), config)
}

/// What a test handler returns on success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub order: String,
    pub amount: u64,
    pub attempt: u64,
}

/// The idempotency errors, as the test error type keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Idem {
    MissingKey,
    InvalidKey,
    InProgress,
    Mismatch,
    Fenced,
    Store(String),
    Codec(String),
}

/// The error type of the test handlers: one variant per failure kind, plus idempotency errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppError {
    /// Permanent: the card was declined.
    Declined(String),
    /// Retryable: the downstream refused before doing anything.
    Unavailable,
    /// Unknown: the remote call timed out.
    Timeout,
    /// The ledger refused a second effect (unique violation): must never happen.
    Ledger(String),
    Idem(Idem),
}

impl Classify for AppError {
    fn classify(&self) -> FailureKind {
        match self {
            AppError::Declined(_) | AppError::Ledger(_) => FailureKind::Permanent,
            AppError::Unavailable | AppError::Idem(_) => FailureKind::Retryable,
            AppError::Timeout => FailureKind::Unknown,
        }
    }
}

impl From<IdempotencyError> for AppError {
    fn from(e: IdempotencyError) -> Self {
        AppError::Idem(match e {
            IdempotencyError::MissingKey => Idem::MissingKey,
            IdempotencyError::InvalidKey { .. } => Idem::InvalidKey,
            IdempotencyError::InProgress { .. } => Idem::InProgress,
            IdempotencyError::Mismatch => Idem::Mismatch,
            IdempotencyError::Fenced => Idem::Fenced,
            IdempotencyError::Store(e) => Idem::Store(e.to_string()),
            IdempotencyError::Codec { reason } => Idem::Codec(reason),
        })
    }
}

/// A side-effect ledger: one row per effect, `effect_key` unique, so a duplicated effect is an
/// error the test sees (and a count it can check).
#[derive(Clone)]
pub enum Ledger {
    Sqlite(sqlx::SqlitePool, String),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool, String),
}

impl Ledger {
    /// A ledger in a scratch SQLite file of its own (for the stores that are not SQL).
    pub async fn scratch() -> (Ledger, ScratchFile) {
        let file = ScratchFile::new("ledger");
        let pool = sqlx::SqlitePool::connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&file.0)
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .busy_timeout(std::time::Duration::from_secs(30)),
        )
        .await
        .unwrap();
        (Ledger::sqlite(pool).await, file)
    }

    pub async fn sqlite(pool: sqlx::SqlitePool) -> Ledger {
        let table = unique("ledger");
        let sql = format!(
            "CREATE TABLE {table} (effect_key TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL, fence INTEGER NOT NULL)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        Ledger::Sqlite(pool, table)
    }

    #[cfg(feature = "postgres")]
    pub async fn postgres(pool: sqlx::PgPool) -> Ledger {
        let table = unique("ledger");
        let sql = format!(
            "CREATE TABLE {table} (effect_key TEXT NOT NULL UNIQUE, order_id TEXT NOT NULL, fence BIGINT NOT NULL)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        Ledger::Postgres(pool, table)
    }

    /// Records one effect; a second effect with the same `effect_key` fails.
    pub async fn record(&self, effect_key: &str, order: &str, fence: i64) -> Result<(), AppError> {
        self.insert(effect_key, order, fence, "")
            .await
            .map(drop)
            .map_err(|e| AppError::Ledger(e.to_string()))
    }

    /// Records the effect unless one with `effect_key` exists (a downstream that deduplicates
    /// on the key it is given). Returns whether a row was written.
    pub async fn record_once(
        &self,
        effect_key: &str,
        order: &str,
        fence: i64,
    ) -> Result<bool, AppError> {
        self.insert(
            effect_key,
            order,
            fence,
            " ON CONFLICT (effect_key) DO NOTHING",
        )
        .await
        .map(|n| n == 1)
        .map_err(|e| AppError::Ledger(e.to_string()))
    }

    /// Inserts one effect row, with `conflict` appended to the statement; returns rows affected.
    async fn insert(
        &self,
        effect_key: &str,
        order: &str,
        fence: i64,
        conflict: &str,
    ) -> Result<u64, sqlx::Error> {
        match self {
            Ledger::Sqlite(pool, table) => {
                let sql = format!(
                    "INSERT INTO {table} (effect_key, order_id, fence) VALUES (?1, ?2, ?3){conflict}"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(effect_key)
                    .bind(order)
                    .bind(fence)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
            #[cfg(feature = "postgres")]
            Ledger::Postgres(pool, table) => {
                let sql = format!(
                    "INSERT INTO {table} (effect_key, order_id, fence) VALUES ($1, $2, $3){conflict}"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(effect_key)
                    .bind(order)
                    .bind(fence)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            }
        }
    }

    /// The fence under which the effect keyed `effect_key` happened, if it did (what a
    /// downstream that deduplicates on the key answers a repeated request with).
    pub async fn effect_fence(&self, effect_key: &str) -> Result<Option<i64>, AppError> {
        let found = match self {
            Ledger::Sqlite(pool, table) => {
                let sql = format!("SELECT fence FROM {table} WHERE effect_key = ?1");
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(effect_key)
                    .fetch_optional(pool)
                    .await
            }
            #[cfg(feature = "postgres")]
            Ledger::Postgres(pool, table) => {
                let sql = format!("SELECT fence FROM {table} WHERE effect_key = $1");
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(effect_key)
                    .fetch_optional(pool)
                    .await
            }
        };
        found.map_err(|e| AppError::Ledger(e.to_string()))
    }

    /// The ledger's table name.
    pub fn table(&self) -> &str {
        match self {
            Ledger::Sqlite(_, table) => table,
            #[cfg(feature = "postgres")]
            Ledger::Postgres(_, table) => table,
        }
    }

    /// Effects recorded for `order`, with their fences, in insertion order.
    pub async fn effects(&self, order: &str) -> Vec<i64> {
        match self {
            Ledger::Sqlite(pool, table) => {
                let sql = format!("SELECT fence FROM {table} WHERE order_id = ?1 ORDER BY rowid");
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(order)
                    .fetch_all(pool)
                    .await
                    .unwrap()
            }
            #[cfg(feature = "postgres")]
            Ledger::Postgres(pool, table) => {
                let sql = format!("SELECT fence FROM {table} WHERE order_id = $1 ORDER BY fence");
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .bind(order)
                    .fetch_all(pool)
                    .await
                    .unwrap()
            }
        }
    }

    pub async fn drop_table(&self) {
        match self {
            Ledger::Sqlite(..) => {}
            #[cfg(feature = "postgres")]
            Ledger::Postgres(pool, table) => {
                let sql = format!("DROP TABLE IF EXISTS {table}");
                let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(pool).await;
            }
        }
    }
}
