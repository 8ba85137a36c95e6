//! The SQLite store (the embedded default, SQLite bundled): one table, one statement per
//! operation; SQLite serialises writers, so a claim never races another claim.

use super::sql::{Dialect, Statements, check_table_name, sql_local_store, sql_store};
use super::store::StoreError;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const DIALECT: Dialect = Dialect {
    param: |n| format!("?{n}"),
    now: "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    big_int: "INTEGER",
    greatest: "MAX",
    skip_locked: "",
};

/// Idempotency records in a SQLite table.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    sql: Arc<Statements>,
}

impl SqliteStore {
    /// Uses `pool` and `table` (`name`, letters, digits and `_`). Call [`migrate`](Self::migrate)
    /// once to create the table.
    pub fn new(pool: SqlitePool, table: &str) -> Result<Self, StoreError> {
        check_table_name(table)?;
        Ok(SqliteStore {
            pool,
            sql: Arc::new(Statements::new(table, &DIALECT)),
        })
    }

    /// Opens (creating it if needed) the database file at `path` in WAL mode with a busy
    /// timeout, and creates `table`.
    pub async fn open(path: impl AsRef<Path>, table: &str) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30));
        // No ping before each statement (sqlx's default): a file does not drop connections.
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        let store = SqliteStore::new(pool, table)?;
        store.migrate().await?;
        Ok(store)
    }

    /// Creates the table and its index when missing.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(self.sql.create_table.clone()))
            .execute(&self.pool)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(self.sql.create_index.clone()))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn success_pool(&self) -> &SqlitePool {
        &self.pool
    }
}

sql_store!(SqliteStore, sqlx::Sqlite);
sql_local_store!(SqliteStore, sqlx::Sqlite, begin_with("BEGIN IMMEDIATE"));
