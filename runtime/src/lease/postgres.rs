//! `PgLeaseStore` and the PostgreSQL fenced-write check: leases and accepted fencing tokens in two
//! tables (in the connection's `search_path`), each operation one conditional statement, clocked
//! by the server's `statement_timestamp()`: one instant for the whole statement, so a grant's
//! expiry and the check that the previous lease had ended use the same "now" (with
//! `clock_timestamp()`, read twice, a new lease could start, by its own expiry, before the
//! previous one ended). A granted token is registered in `staleguard_fences` by the
//! same statement, so a newer holder fences an older one as soon as it acquires, before it writes.

use sqlx::postgres::{PgConnection, PgPool, Postgres};

use crate::fence::StoreError;

const SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS staleguard_leases (
    resource      TEXT   PRIMARY KEY,
    owner         TEXT   NOT NULL,
    token         BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS staleguard_fences (
    resource TEXT   PRIMARY KEY,
    token    BIGINT NOT NULL
);";

const ACQUIRE: &str = "\
WITH granted AS (
    INSERT INTO staleguard_leases AS l (resource, owner, token, expires_at_ms)
    VALUES ($1, $2, 1, (extract(epoch from statement_timestamp()) * 1000)::bigint + $3)
    ON CONFLICT (resource) DO UPDATE SET
        owner = excluded.owner,
        token = l.token + 1,
        expires_at_ms = excluded.expires_at_ms
    WHERE l.expires_at_ms <= (extract(epoch from statement_timestamp()) * 1000)::bigint
       OR l.owner = excluded.owner
    RETURNING resource, token, expires_at_ms
), issued AS (
    INSERT INTO staleguard_fences AS f (resource, token)
    SELECT resource, token FROM granted
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token
    WHERE f.token < excluded.token
)
SELECT token, expires_at_ms FROM granted";

const RENEW: &str = "\
UPDATE staleguard_leases
SET expires_at_ms = (extract(epoch from statement_timestamp()) * 1000)::bigint + $3
WHERE resource = $1 AND token = $2
  AND expires_at_ms > (extract(epoch from statement_timestamp()) * 1000)::bigint
RETURNING expires_at_ms";

const RELEASE: &str = "\
UPDATE staleguard_leases SET expires_at_ms = 0 WHERE resource = $1 AND token = $2";

const FENCE: &str = "\
INSERT INTO staleguard_fences AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE f.token <= excluded.token";

const FENCE_CURRENT: &str = "SELECT token FROM staleguard_fences WHERE resource = $1";

/// Leases in PostgreSQL (feature `postgres`). Clones share the pool.
///
/// Call [`PgLeaseStore::migrate`] once to create `staleguard_leases` and `staleguard_fences` in
/// the first schema of the connection's `search_path`. Expiry is decided by the server's clock,
/// so every client agrees on it whatever its own clock says.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), staleguard::Error> {
/// use std::time::Duration;
/// use staleguard::lease::{LeaseStore, PgLeaseStore};
///
/// let pool = sqlx::PgPool::connect("postgres://postgres@127.0.0.1:5432/test")
///     .await
///     .map_err(staleguard::StoreError::from)?;
/// let store = PgLeaseStore::new(pool);
/// store.migrate().await?;
/// let lease = store.acquire("order:42", "worker-1", Duration::from_secs(30)).await?;
/// store.release(&lease).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgLeaseStore {
    pool: PgPool,
}

impl PgLeaseStore {
    /// A store using `pool` (run [`Self::migrate`] once).
    pub fn new(pool: PgPool) -> Self {
        PgLeaseStore { pool }
    }

    /// The store's pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Creates the tables the leases and the fence check need (idempotent):
    ///
    /// ```sql
    /// CREATE TABLE IF NOT EXISTS staleguard_leases (
    ///     resource TEXT PRIMARY KEY, owner TEXT NOT NULL,
    ///     token BIGINT NOT NULL, expires_at_ms BIGINT NOT NULL);
    /// CREATE TABLE IF NOT EXISTS staleguard_fences (
    ///     resource TEXT PRIMARY KEY, token BIGINT NOT NULL);
    /// ```
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::raw_sql(SCHEMA).execute(&self.pool).await?;
        Ok(())
    }
}

super::sql::sql_lease_store!(PgLeaseStore, PgConnection, Postgres);
