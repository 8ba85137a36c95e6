//! `SqliteLeaseStore` and the SQLite fenced-write check: leases and accepted fencing tokens in two
//! tables, each operation one conditional statement, clocked by SQLite's `unixepoch('subsec')`.

use std::time::Duration;

use sqlx::sqlite::{Sqlite, SqliteConnection, SqlitePool};
use sqlx::{Row, Transaction};

use super::{FencingToken, Lease, LeaseError, LeaseStore, ttl_ms};
use crate::fence::{Commit, FenceCheck, FenceError, Fenced, Held, Lost, StoreError};

const SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS staleguard_leases (
    resource      TEXT    PRIMARY KEY NOT NULL,
    owner         TEXT    NOT NULL,
    token         INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS staleguard_fences (
    resource TEXT    PRIMARY KEY NOT NULL,
    token    INTEGER NOT NULL
);";

const ACQUIRE: &str = "\
INSERT INTO staleguard_leases (resource, owner, token, expires_at_ms)
VALUES (?1, ?2, 1, CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?3)
ON CONFLICT (resource) DO UPDATE SET
    owner = excluded.owner,
    token = staleguard_leases.token + 1,
    expires_at_ms = excluded.expires_at_ms
WHERE staleguard_leases.expires_at_ms <= CAST(unixepoch('subsec') * 1000 AS INTEGER)
   OR staleguard_leases.owner = excluded.owner
RETURNING token, expires_at_ms";

const RENEW: &str = "\
UPDATE staleguard_leases
SET expires_at_ms = CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?3
WHERE resource = ?1 AND token = ?2
  AND expires_at_ms > CAST(unixepoch('subsec') * 1000 AS INTEGER)
RETURNING expires_at_ms";

const RELEASE: &str = "\
UPDATE staleguard_leases SET expires_at_ms = 0 WHERE resource = ?1 AND token = ?2";

const FENCE: &str = "\
INSERT INTO staleguard_fences (resource, token) VALUES (?1, ?2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE staleguard_fences.token <= excluded.token";

const FENCE_CURRENT: &str = "SELECT token FROM staleguard_fences WHERE resource = ?1";

/// Leases in SQLite (the embedded default; bundled, no system library). Clones share the pool.
///
/// Call [`SqliteLeaseStore::migrate`] once to create `staleguard_leases` and
/// `staleguard_fences`. Expiry is decided by SQLite's clock (the host's), so every process
/// sharing the database file agrees on it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), staleguard::Error> {
/// use std::time::Duration;
/// use staleguard::lease::{LeaseStore, SqliteLeaseStore};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.map_err(staleguard::StoreError::from)?;
/// let store = SqliteLeaseStore::new(pool);
/// store.migrate().await?;
/// let lease = store.acquire("order:42", "worker-1", Duration::from_secs(30)).await?;
/// let lease = store.renew(&lease, Duration::from_secs(30)).await?;
/// store.release(&lease).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteLeaseStore {
    pool: SqlitePool,
}

impl SqliteLeaseStore {
    /// A store using `pool` (run [`Self::migrate`] once).
    pub fn new(pool: SqlitePool) -> Self {
        SqliteLeaseStore { pool }
    }

    /// The store's pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Creates the tables the leases and the fence check need (idempotent):
    ///
    /// ```sql
    /// CREATE TABLE IF NOT EXISTS staleguard_leases (
    ///     resource TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL,
    ///     token INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL);
    /// CREATE TABLE IF NOT EXISTS staleguard_fences (
    ///     resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL);
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

impl LeaseStore for SqliteLeaseStore {
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

impl FenceCheck for SqliteConnection {
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

impl Commit for Transaction<'_, Sqlite> {
    type Error = sqlx::Error;

    fn commit(self) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        Transaction::commit(self)
    }
}
