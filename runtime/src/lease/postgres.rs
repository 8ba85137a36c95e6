//! `PgLeaseStore` and the PostgreSQL fenced-write check: leases and accepted fencing tokens in two
//! tables (in the connection's `search_path`), each operation one conditional statement, clocked
//! by the server's `clock_timestamp()`.

use std::time::Duration;

use sqlx::postgres::{PgConnection, PgPool, Postgres};
use sqlx::{Row, Transaction};

use super::{FencingToken, Lease, LeaseError, LeaseStore, ttl_ms};
use crate::fence::{Commit, FenceCheck, FenceError, Fenced, Held, Lost, StoreError};

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
INSERT INTO staleguard_leases AS l (resource, owner, token, expires_at_ms)
VALUES ($1, $2, 1, (extract(epoch from clock_timestamp()) * 1000)::bigint + $3)
ON CONFLICT (resource) DO UPDATE SET
    owner = excluded.owner,
    token = l.token + 1,
    expires_at_ms = excluded.expires_at_ms
WHERE l.expires_at_ms <= (extract(epoch from clock_timestamp()) * 1000)::bigint
   OR l.owner = excluded.owner
RETURNING token, expires_at_ms";

const RENEW: &str = "\
UPDATE staleguard_leases
SET expires_at_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint + $3
WHERE resource = $1 AND token = $2
  AND expires_at_ms > (extract(epoch from clock_timestamp()) * 1000)::bigint
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

fn token_param(token: FencingToken) -> i64 {
    i64::try_from(token.get()).unwrap_or(i64::MAX)
}

fn token_from(value: i64) -> FencingToken {
    FencingToken::new(u64::try_from(value).unwrap_or_default())
}

fn lost(lease: &Lease) -> LeaseError {
    LeaseError::Lost(Lost {
        resource: lease.resource().to_string(),
        token: lease.token(),
    })
}

impl LeaseStore for PgLeaseStore {
    async fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease, LeaseError> {
        let row = sqlx::query(ACQUIRE)
            .bind(resource)
            .bind(owner)
            .bind(ttl_ms(ttl))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Err(LeaseError::Held(Held {
                resource: resource.to_string(),
            }));
        };
        let token: i64 = row.try_get(0)?;
        let expires_at_ms: i64 = row.try_get(1)?;
        Ok(Lease::new(
            resource,
            owner,
            token_from(token),
            expires_at_ms,
        ))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        let row = sqlx::query(RENEW)
            .bind(lease.resource())
            .bind(token_param(lease.token()))
            .bind(ttl_ms(ttl))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Err(lost(lease));
        };
        let expires_at_ms: i64 = row.try_get(0)?;
        Ok(Lease::new(
            lease.resource(),
            lease.owner(),
            lease.token(),
            expires_at_ms,
        ))
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        let done = sqlx::query(RELEASE)
            .bind(lease.resource())
            .bind(token_param(lease.token()))
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(lost(lease));
        }
        Ok(())
    }
}

impl FenceCheck for PgConnection {
    async fn check_fence(&mut self, resource: &str, token: FencingToken) -> Result<(), FenceError> {
        let done = sqlx::query(FENCE)
            .bind(resource)
            .bind(token_param(token))
            .execute(&mut *self)
            .await?;
        if done.rows_affected() > 0 {
            return Ok(());
        }
        let current: Option<i64> = sqlx::query_scalar(FENCE_CURRENT)
            .bind(resource)
            .fetch_optional(&mut *self)
            .await?;
        Err(FenceError::Fenced(Fenced {
            resource: resource.to_string(),
            token,
            current: current.map(token_from),
        }))
    }
}

impl Commit for Transaction<'_, Postgres> {
    type Error = sqlx::Error;

    fn commit(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        Transaction::commit(self)
    }
}
