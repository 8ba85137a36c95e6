//! The PostgreSQL store: one table, one statement per operation. The claim is an
//! `INSERT .. ON CONFLICT DO UPDATE .. RETURNING`, so concurrent duplicates queue on the row lock
//! and each sees the committed winner: no gap between "insert failed" and "read the record".

use super::sql::{Dialect, Statements, check_table_name, sql_local_store, sql_store};
use super::store::StoreError;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::sync::Arc;

const DIALECT: Dialect = Dialect {
    param: |n| format!("${n}"),
    now: "(EXTRACT(EPOCH FROM now()) * 1000)::BIGINT",
    big_int: "BIGINT",
    greatest: "GREATEST",
    skip_locked: " FOR UPDATE SKIP LOCKED",
    insert_or_read: true,
};

/// Idempotency records in a PostgreSQL table.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    sql: Arc<Statements>,
}

impl PostgresStore {
    /// Uses `pool` and `table` (`name` or `schema.name`). Call [`migrate`](Self::migrate) once
    /// to create the table.
    pub fn new(pool: PgPool, table: &str) -> Result<Self, StoreError> {
        check_table_name(table)?;
        Ok(PostgresStore {
            pool,
            sql: Arc::new(Statements::new(table, &DIALECT)),
        })
    }

    /// Connects to `url` and creates `table`.
    ///
    /// The pool does not ping a connection before handing it out (sqlx's
    /// `test_before_acquire`, on by default, costs one extra round trip per statement, as much
    /// as the statement itself): every store operation is one statement that is safe to
    /// retry, and a connection found dead fails that statement, which the engine retries once
    /// on a fresh connection (a claim, a read) or resolves by reading the record back (a
    /// completion).
    pub async fn connect(url: &str, table: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .test_before_acquire(false)
            .connect(url)
            .await?;
        let store = PostgresStore::new(pool, table)?;
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

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The claim statement's text (for the benchmark's `pgbench` reference).
    pub fn claim_sql(&self) -> &str {
        &self.sql.claim
    }

    /// The success-completion statement's text.
    pub fn finish_sql(&self) -> &str {
        &self.sql.finish
    }
}

sql_store!(PostgresStore, sqlx::Postgres);
sql_local_store!(PostgresStore, sqlx::Postgres, begin());
