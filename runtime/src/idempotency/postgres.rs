//! The PostgreSQL store: one table, one statement per operation, except the claim (see
//! `sql.rs`): a read, then for a new key an `INSERT .. ON CONFLICT DO NOTHING` (a concurrent
//! duplicate's insert waits for the winner's row and writes nothing), and only to take a
//! record over the compare-and-set upsert, all on one connection.

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
};

/// Idempotency records in a PostgreSQL table.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// With [`PostgresStore::asynchronous_completion`]: connections with
    /// `synchronous_commit = off`, for the SUCCESS completions.
    completions: Option<PgPool>,
    sql: Arc<Statements>,
}

impl PostgresStore {
    /// Uses `pool` and `table` (`name` or `schema.name`). Call [`migrate`](Self::migrate) once
    /// to create the table.
    pub fn new(pool: PgPool, table: &str) -> Result<Self, StoreError> {
        check_table_name(table)?;
        Ok(PostgresStore {
            pool,
            completions: None,
            sql: Arc::new(Statements::new(table, &DIALECT)),
        })
    }

    /// Writes SUCCESS completions with `synchronous_commit = off` (through a second pool with
    /// the same connect options; claims, failures, UNKNOWN and releases stay synchronous). The
    /// caller then does not wait for the completion's WAL flush: one disk flush less per call
    /// (the remote-effect mode's three commits become two waits).
    ///
    /// What it costs: if the *database server* crashes within a moment (PostgreSQL flushes
    /// asynchronous commits within three `wal_writer_delay`s, 600 ms by default) after a
    /// completion, that completion is lost and the record is PROCESSING again, as if the handler
    /// had crashed before completing: after the lease a retry takes it over and runs the body
    /// again under the **same record id**. A body that passes `claim.record_id()` downstream
    /// still has its effect once, and a downstream that answers a repeat with the original
    /// outcome gives the same response; any other body has the at-least-once of a crash
    /// (guarantee 5 in `docs/macros.md`). The claim itself is always durable.
    pub fn asynchronous_completion(mut self) -> Self {
        let options = self
            .pool
            .connect_options()
            .as_ref()
            .clone()
            .options([("synchronous_commit", "off")]);
        let pool = PgPoolOptions::new()
            .max_connections(self.pool.options().get_max_connections())
            .test_before_acquire(false)
            .connect_lazy_with(options);
        self.completions = Some(pool);
        self
    }

    fn success_pool(&self) -> &PgPool {
        self.completions.as_ref().unwrap_or(&self.pool)
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
