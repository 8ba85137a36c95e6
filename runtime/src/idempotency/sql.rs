//! The SQL text shared by the SQLite and PostgreSQL stores, built once per table. Each store
//! operation is one of these statements (one round trip), except the claim: a read first (a
//! replay or an "in progress" answer is that read and writes nothing), then for a new key the
//! insert, and only to take a record over the compare-and-set upsert; the statements of one
//! claim share one connection.

use super::key::RecordKey;
use super::record::{Record, State};
use super::store::StoreError;
use std::sync::Arc;

/// How the two dialects differ: numbered parameters and the store clock in milliseconds.
pub(crate) struct Dialect {
    pub param: fn(usize) -> String,
    /// An expression for "now" in ms since the epoch, stable within one statement.
    pub now: &'static str,
    pub big_int: &'static str,
    /// The two-argument maximum (`MAX` in SQLite, `GREATEST` in PostgreSQL).
    pub greatest: &'static str,
    /// What a row-picking subquery appends so that concurrent reconcilers pick different rows
    /// (`FOR UPDATE SKIP LOCKED` in PostgreSQL; nothing in SQLite, which has one writer).
    pub skip_locked: &'static str,
}

/// Every statement a store runs, for one table.
/// The table name in them is checked by [`check_table_name`]; values are always bound.
pub(crate) struct Statements {
    pub create_table: Arc<str>,
    pub create_index: Arc<str>,
    /// One record by its key: the [`RECORD`] columns and the store's clock.
    pub read: Arc<str>,
    /// A new record, or nothing when the key exists (`ON CONFLICT DO NOTHING`: nothing is
    /// written then); returns what [`Statements::read`] returns.
    pub insert: Arc<str>,
    /// The compare-and-set upsert: creates, takes over, or returns the record unchanged.
    pub claim: Arc<str>,
    pub finish: Arc<str>,
    pub release: Arc<str>,
    /// The release after a takeover: the record stays, its lease ended.
    pub release_taken_over: Arc<str>,
    pub heartbeat: Arc<str>,
    pub unknown: Arc<str>,
    pub resolve: Arc<str>,
    /// A record still UNKNOWN after the resolver asked: to the back of the queue.
    pub defer: Arc<str>,
    pub reap: Arc<str>,
}

/// Accepts `name` or `schema.name`, each an unquoted identifier.
pub(crate) fn check_table_name(table: &str) -> Result<(), StoreError> {
    let ok = !table.is_empty()
        && table.split('.').count() <= 2
        && table.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err(StoreError::msg(format!(
            "invalid table name `{table}`: expected `name` or `schema.name` made of letters, digits and `_`"
        )))
    }
}

/// The columns a claim and a read return, then the store's clock, decoded by position
/// ([`decode`]); the caller knows the key.
const RECORD: &str =
    "record_id, fingerprint, state, owner, fence, lease_expires_at, expires_at, response";

/// The key columns, which only the reconciler's many-record read returns (before [`RECORD`]).
const KEY: &str = "handler, tenant, idem_key";

impl Statements {
    pub fn new(table: &str, d: &Dialect) -> Statements {
        let p = d.param;
        let now = d.now;
        let big = d.big_int;
        let index = table.rsplit('.').next().unwrap_or(table);
        let pk = format!(
            "handler = {} AND tenant = {} AND idem_key = {}",
            p(1),
            p(2),
            p(3)
        );
        let reset = format!("(t.state IN ('SUCCESS', 'FAILED') AND t.expires_at <= {now})");
        let take = format!(
            "({reset} OR (t.fingerprint = excluded.fingerprint AND \
             ((t.state = 'PROCESSING' AND t.lease_expires_at <= {now}) \
             OR (t.state = 'FAILED' AND {retry}))))",
            retry = p(9)
        );
        let pick = |cond: &str, col: &str, new: &str| {
            format!("{col} = CASE WHEN {cond} THEN {new} ELSE t.{col} END")
        };
        // The new row and the key it conflicts on, shared by the claim and the plain insert.
        let row = format!(
            "(handler, tenant, idem_key, record_id, fingerprint, state, \
             owner, fence, lease_expires_at, expires_at, response, created_at, updated_at) \
             VALUES ({p1}, {p2}, {p3}, {p4}, {p5}, 'PROCESSING', {p6}, 1, {now} + {p7}, \
             {now} + {p8}, NULL, {now}, {now}) \
             ON CONFLICT (handler, tenant, idem_key)",
            p1 = p(1),
            p2 = p(2),
            p3 = p(3),
            p4 = p(4),
            p5 = p(5),
            p6 = p(6),
            p7 = p(7),
            p8 = p(8),
        );
        let claim = format!(
            "INSERT INTO {table} AS t {row} DO UPDATE SET {sets} RETURNING {RECORD}, {now}",
            sets = [
                pick(&reset, "record_id", "excluded.record_id"),
                pick(&reset, "fingerprint", "excluded.fingerprint"),
                pick(&reset, "created_at", "excluded.created_at"),
                pick(&take, "state", "'PROCESSING'"),
                pick(&take, "owner", "excluded.owner"),
                pick(&take, "fence", "t.fence + 1"),
                pick(&take, "lease_expires_at", "excluded.lease_expires_at"),
                pick(&take, "expires_at", "excluded.expires_at"),
                pick(&take, "response", "NULL"),
                pick(&take, "updated_at", "excluded.updated_at"),
            ]
            .join(", "),
        );
        let insert = format!("INSERT INTO {table} {row} DO NOTHING RETURNING {RECORD}, {now}");
        Statements {
            read: format!("SELECT {RECORD}, {now} FROM {table} WHERE {pk}").into(),
            insert: insert.into(),
            create_table: format!(
                "CREATE TABLE IF NOT EXISTS {table} (\
                 handler TEXT NOT NULL, tenant TEXT NOT NULL, idem_key TEXT NOT NULL, \
                 record_id TEXT NOT NULL, fingerprint TEXT NOT NULL, \
                 state TEXT NOT NULL CHECK (state IN ('PROCESSING', 'SUCCESS', 'FAILED', 'UNKNOWN')), \
                 owner TEXT NOT NULL, fence {big} NOT NULL, lease_expires_at {big} NOT NULL, \
                 expires_at {big} NOT NULL, response TEXT, created_at {big} NOT NULL, \
                 updated_at {big} NOT NULL, PRIMARY KEY (handler, tenant, idem_key))"
            )
            .into(),
            create_index: format!(
                "CREATE INDEX IF NOT EXISTS {index}_state_idx ON {table} (state, expires_at)"
            )
            .into(),
            claim: claim.into(),
            finish: format!(
                "UPDATE {table} SET state = {p5}, response = {p6}, expires_at = {now} + {p7}, \
                 lease_expires_at = {now}, updated_at = {now} \
                 WHERE {pk} AND fence = {p4} AND owner = {p8} AND state = 'PROCESSING'",
                p4 = p(4),
                p5 = p(5),
                p6 = p(6),
                p7 = p(7),
                p8 = p(8),
            )
            .into(),
            release: format!(
                "DELETE FROM {table} WHERE {pk} AND fence = {} AND owner = {} \
                 AND state = 'PROCESSING'",
                p(4),
                p(5)
            )
            .into(),
            release_taken_over: format!(
                "UPDATE {table} SET lease_expires_at = {now}, updated_at = {now} \
                 WHERE {pk} AND fence = {} AND owner = {} AND state = 'PROCESSING'",
                p(4),
                p(5)
            )
            .into(),
            heartbeat: format!(
                "UPDATE {table} SET lease_expires_at = {now} + {}, updated_at = {now} \
                 WHERE {pk} AND fence = {} AND owner = {} AND state = 'PROCESSING'",
                p(6),
                p(4),
                p(5)
            )
            .into(),
            // Reserved by moving the (unused) lease: a second reconciler skips these rows.
            unknown: format!(
                "UPDATE {table} SET lease_expires_at = {now} + {p2} \
                 WHERE (handler, tenant, idem_key) IN (SELECT handler, tenant, idem_key \
                 FROM {table} WHERE state = 'UNKNOWN' AND lease_expires_at <= {now} \
                 ORDER BY updated_at LIMIT {p1}{skip}) \
                 AND state = 'UNKNOWN' AND lease_expires_at <= {now} \
                 RETURNING {KEY}, {RECORD}, {now}",
                p1 = p(1),
                p2 = p(2),
                skip = d.skip_locked,
            )
            .into(),
            resolve: format!(
                "UPDATE {table} SET state = {p5}, response = {p6}, expires_at = {now} + {p7}, \
                 updated_at = {now} WHERE {pk} AND fence = {p4} AND state = 'UNKNOWN'",
                p4 = p(4),
                p5 = p(5),
                p6 = p(6),
                p7 = p(7),
            )
            .into(),
            // Strictly after every other UNKNOWN record, also within one millisecond.
            defer: format!(
                "UPDATE {table} SET lease_expires_at = {now}, updated_at = {greatest}({now}, \
                 (SELECT COALESCE(MAX(u.updated_at), 0) + 1 FROM {table} u WHERE u.state = 'UNKNOWN')) \
                 WHERE {pk} AND fence = {} AND state = 'UNKNOWN'",
                p(4),
                greatest = d.greatest,
            )
            .into(),
            reap: format!(
                "DELETE FROM {table} WHERE state IN ('SUCCESS', 'FAILED') AND expires_at <= {now}"
            )
            .into(),
        }
    }
}

/// Decodes the [`RECORD`] columns and the clock, from column `at` on, as the record of `key`.
pub(crate) fn decode<'r, R>(row: &'r R, key: RecordKey, at: usize) -> Result<Record, StoreError>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let state: &str = row.try_get(at + 2)?;
    Ok(Record {
        key,
        record_id: row.try_get(at)?,
        fingerprint: row.try_get(at + 1)?,
        state: State::parse(state)
            .ok_or_else(|| StoreError::msg(format!("unknown record state `{state}`")))?,
        owner: row.try_get(at + 3)?,
        fence: row.try_get(at + 4)?,
        lease_expires_at: row.try_get(at + 5)?,
        expires_at: row.try_get(at + 6)?,
        response: row.try_get(at + 7)?,
        now: row.try_get(at + 8)?,
    })
}

/// Decodes a row of [`KEY`], then [`RECORD`] and the clock.
pub(crate) fn decode_keyed<'r, R>(row: &'r R) -> Result<Record, StoreError>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    &'r str: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let key = RecordKey {
        handler: row.try_get(0)?,
        tenant: row.try_get(1)?,
        key: row.try_get(2)?,
    };
    decode(row, key, 3)
}

/// The read of one record by its key.
macro_rules! read_query {
    ($sql:expr, $key:expr) => {
        sqlx::query(sqlx::AssertSqlSafe($sql.read.clone()))
            .bind(&$key.handler)
            .bind(&$key.tenant)
            .bind(&$key.key)
    };
}
pub(crate) use read_query;

/// A claim's statements on one connection (`$conn`: a pooled connection or a transaction),
/// evaluating to `Result<Record, StoreError>`. Read first (`$read_first`, the remote-effect
/// mode: a replay or an "in progress" answer is that read alone, and a new key adds the
/// insert) or insert first (the one-transaction mode: a new key is the insert alone, and a
/// duplicate waits on the new row's lock, then reads the record). The insert writes nothing
/// when the key exists; only a record that may be taken over (or one that vanished between
/// the insert and the read) goes on to the upsert, which decides again atomically.
macro_rules! claim_on {
    ($sql:expr, $conn:ident, $r:expr, $read_first:expr) => {
        async {
            let sql: &$crate::idempotency::sql::Statements = $sql;
            let r: &$crate::idempotency::record::ClaimRequest<'_> = $r;
            let mut found = None;
            if $read_first {
                found = $crate::idempotency::sql::read_query!(sql, r.key)
                    .fetch_optional(&mut *$conn)
                    .await?;
            }
            if found.is_none() {
                let inserted = $crate::idempotency::sql::claim_query!(sql.insert.clone(), r)
                    .fetch_optional(&mut *$conn)
                    .await?;
                if let Some(row) = inserted {
                    return $crate::idempotency::sql::decode(&row, r.key.clone(), 0);
                }
                found = $crate::idempotency::sql::read_query!(sql, r.key)
                    .fetch_optional(&mut *$conn)
                    .await?;
            }
            if let Some(row) = found {
                let record = $crate::idempotency::sql::decode(&row, r.key.clone(), 0)?;
                if !r.may_take(&record) {
                    return Ok(record);
                }
            }
            let row = $crate::idempotency::sql::claim_query!(sql.claim.clone(), r)
                .bind(r.retry_failed)
                .fetch_one(&mut *$conn)
                .await?;
            $crate::idempotency::sql::decode(&row, r.key.clone(), 0)
        }
    };
}
pub(crate) use claim_on;

/// The claim statements' first eight parameters, bound from a `ClaimRequest` (the upsert adds
/// `retry_failed`).
macro_rules! claim_query {
    ($sql:expr, $r:expr) => {
        sqlx::query(sqlx::AssertSqlSafe($sql))
            .bind(&$r.key.handler)
            .bind(&$r.key.tenant)
            .bind(&$r.key.key)
            .bind($r.record_id)
            .bind($r.fingerprint)
            .bind($r.owner)
            .bind($r.lease_ms)
            .bind($r.retention_ms)
    };
}
pub(crate) use claim_query;

/// The completion statement bound from an `Attempt`, the new state, the stored body and the
/// retention.
macro_rules! finish_query {
    ($sql:expr, $a:expr, $state:expr, $body:expr, $retention_ms:expr) => {
        sqlx::query(sqlx::AssertSqlSafe($sql.finish.clone()))
            .bind(&$a.key.handler)
            .bind(&$a.key.tenant)
            .bind(&$a.key.key)
            .bind($a.fence)
            .bind($state.as_str())
            .bind($body)
            .bind($retention_ms)
            .bind($a.owner)
    };
}
pub(crate) use finish_query;

/// Implements [`IdempotencyStore`](super::store::IdempotencyStore) for a sqlx pool type; the
/// SQLite and PostgreSQL stores differ only in their [`Dialect`] (and in the pool a successful
/// completion is written through: `success_pool()`).
macro_rules! sql_store {
    ($store:ident, $db:ty) => {
        impl $crate::idempotency::store::IdempotencyStore for $store {
            async fn claim(
                &self,
                r: &$crate::idempotency::record::ClaimRequest<'_>,
            ) -> Result<$crate::idempotency::record::Record, $crate::idempotency::store::StoreError>
            {
                // One connection for the claim's statements: one acquisition from the pool.
                let mut conn = self.pool.acquire().await?;
                let claimed: Result<_, $crate::idempotency::store::StoreError> =
                    $crate::idempotency::sql::claim_on!(&self.sql, conn, r, true).await;
                claimed
            }

            async fn finish(
                &self,
                a: &$crate::idempotency::record::Attempt<'_>,
                outcome: $crate::idempotency::record::Outcome<'_>,
                retention_ms: i64,
            ) -> Result<
                $crate::idempotency::record::Transition,
                $crate::idempotency::store::StoreError,
            > {
                use $crate::idempotency::record::{Outcome, State};
                let (state, body) = match outcome {
                    Outcome::Success(body) => (State::Success, body),
                    Outcome::Failed(body) => (State::Failed, body),
                    Outcome::Unknown(body) => (State::Unknown, body),
                    Outcome::Release => {
                        // After a takeover an earlier owner may have acted under the record
                        // id: the record stays, its lease ended, for the next claim to take
                        // over with the same id.
                        let sql = if a.fence > 1 {
                            self.sql.release_taken_over.clone()
                        } else {
                            self.sql.release.clone()
                        };
                        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(&a.key.handler)
                            .bind(&a.key.tenant)
                            .bind(&a.key.key)
                            .bind(a.fence)
                            .bind(a.owner)
                            .execute(&self.pool)
                            .await?;
                        return Ok($crate::idempotency::record::Transition::from_rows(
                            done.rows_affected(),
                        ));
                    }
                };
                let pool = if state == State::Success {
                    self.success_pool()
                } else {
                    &self.pool
                };
                let done =
                    $crate::idempotency::sql::finish_query!(self.sql, a, state, body, retention_ms)
                        .execute(pool)
                        .await?;
                Ok($crate::idempotency::record::Transition::from_rows(
                    done.rows_affected(),
                ))
            }

            async fn heartbeat(
                &self,
                a: &$crate::idempotency::record::Attempt<'_>,
                lease_ms: i64,
            ) -> Result<
                $crate::idempotency::record::Transition,
                $crate::idempotency::store::StoreError,
            > {
                let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.heartbeat.clone()))
                    .bind(&a.key.handler)
                    .bind(&a.key.tenant)
                    .bind(&a.key.key)
                    .bind(a.fence)
                    .bind(a.owner)
                    .bind(lease_ms)
                    .execute(&self.pool)
                    .await?;
                Ok($crate::idempotency::record::Transition::from_rows(
                    done.rows_affected(),
                ))
            }

            async fn get(
                &self,
                key: &$crate::idempotency::key::RecordKey,
            ) -> Result<
                Option<$crate::idempotency::record::Record>,
                $crate::idempotency::store::StoreError,
            > {
                let row = $crate::idempotency::sql::read_query!(self.sql, key)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| $crate::idempotency::sql::decode(&row, key.clone(), 0))
                    .transpose()
            }

            async fn unknown(
                &self,
                limit: u32,
                reserve_ms: i64,
            ) -> Result<
                Vec<$crate::idempotency::record::Record>,
                $crate::idempotency::store::StoreError,
            > {
                let rows = sqlx::query(sqlx::AssertSqlSafe(self.sql.unknown.clone()))
                    .bind(i64::from(limit))
                    .bind(reserve_ms)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter()
                    .map($crate::idempotency::sql::decode_keyed)
                    .collect()
            }

            async fn resolve(
                &self,
                key: &$crate::idempotency::key::RecordKey,
                fence: i64,
                resolved: $crate::idempotency::record::Resolved<'_>,
                retention_ms: i64,
            ) -> Result<
                $crate::idempotency::record::Transition,
                $crate::idempotency::store::StoreError,
            > {
                use $crate::idempotency::record::{Resolved, State};
                let (state, body) = match resolved {
                    Resolved::Success(body) => (State::Success, body),
                    Resolved::Failed(body) => (State::Failed, body),
                    Resolved::Deferred => {
                        let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.defer.clone()))
                            .bind(&key.handler)
                            .bind(&key.tenant)
                            .bind(&key.key)
                            .bind(fence)
                            .execute(&self.pool)
                            .await?;
                        return Ok($crate::idempotency::record::Transition::from_rows(
                            done.rows_affected(),
                        ));
                    }
                };
                let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.resolve.clone()))
                    .bind(&key.handler)
                    .bind(&key.tenant)
                    .bind(&key.key)
                    .bind(fence)
                    .bind(state.as_str())
                    .bind(body)
                    .bind(retention_ms)
                    .execute(&self.pool)
                    .await?;
                Ok($crate::idempotency::record::Transition::from_rows(
                    done.rows_affected(),
                ))
            }

            async fn reap(&self) -> Result<u64, $crate::idempotency::store::StoreError> {
                let done = sqlx::query(sqlx::AssertSqlSafe(self.sql.reap.clone()))
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use sql_store;

/// Implements [`LocalStore`](super::store::LocalStore) for a sqlx pool type: the pool method
/// call after the type opens the transaction (SQLite takes its writer lock at once, so that the read and the insert of the
/// claim cannot meet another writer's commit in between).
macro_rules! sql_local_store {
    ($store:ident, $db:ty, $($begin:tt)+) => {
        impl $crate::idempotency::store::LocalStore for $store {
            type Tx = sqlx::Transaction<'static, $db>;

            async fn claim_in_transaction(
                &self,
                r: &$crate::idempotency::record::ClaimRequest<'_>,
            ) -> Result<
                ($crate::idempotency::record::Record, Self::Tx),
                $crate::idempotency::store::StoreError,
            > {
                let mut tx = self.pool.$($begin)+.await?;
                // Insert first: in this mode a new key is the common case, and a duplicate
                // waits on the new row's lock until this transaction ends.
                let claimed: Result<_, $crate::idempotency::store::StoreError> =
                    $crate::idempotency::sql::claim_on!(&self.sql, tx, r, false).await;
                Ok((claimed?, tx))
            }

            async fn complete_in_transaction(
                &self,
                mut tx: Self::Tx,
                a: &$crate::idempotency::record::Attempt<'_>,
                response: &str,
                retention_ms: i64,
            ) -> Result<
                $crate::idempotency::record::Transition,
                $crate::idempotency::store::StoreError,
            > {
                let success = $crate::idempotency::record::State::Success;
                let done = $crate::idempotency::sql::finish_query!(self.sql, a, success, response, retention_ms)
                    .execute(&mut *tx)
                    .await?;
                let done = $crate::idempotency::record::Transition::from_rows(done.rows_affected());
                if done == $crate::idempotency::record::Transition::Applied {
                    tx.commit().await?;
                }
                Ok(done)
            }
        }
    };
}
pub(crate) use sql_local_store;

#[cfg(test)]
mod tests {
    #[test]
    fn table_names_are_plain_identifiers() {
        assert!(super::check_table_name("idempotency_records").is_ok());
        assert!(super::check_table_name("app.idem_2").is_ok());
        assert!(super::check_table_name("x; DROP TABLE y").is_err());
        assert!(super::check_table_name("a.b.c").is_err());
        assert!(super::check_table_name("").is_err());
    }
}
