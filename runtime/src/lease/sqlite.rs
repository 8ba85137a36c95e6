//! `SqliteLeaseStore` and the SQLite fenced-write check: leases and accepted fencing tokens in two
//! tables, each operation one conditional statement, clocked by SQLite's `unixepoch('subsec')`.
//! A granted token is registered in `staleguard_fences` by a trigger in the same statement, so a
//! newer holder fences an older one as soon as it acquires, before it writes.

use sqlx::sqlite::{Sqlite, SqliteConnection, SqlitePool};

use crate::fence::StoreError;

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
);
CREATE TRIGGER IF NOT EXISTS staleguard_leases_issue_insert
AFTER INSERT ON staleguard_leases
BEGIN
    INSERT INTO staleguard_fences (resource, token) VALUES (new.resource, new.token)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token
    WHERE staleguard_fences.token < excluded.token;
END;
CREATE TRIGGER IF NOT EXISTS staleguard_leases_issue_update
AFTER UPDATE OF token ON staleguard_leases
BEGIN
    INSERT INTO staleguard_fences (resource, token) VALUES (new.resource, new.token)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token
    WHERE staleguard_fences.token < excluded.token;
END;";

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
    /// -- and two triggers on staleguard_leases (after insert, after update of token) that
    /// -- raise staleguard_fences.token to every token granted
    /// ```
    ///
    /// Run it again after upgrading from a version without the triggers.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::raw_sql(SCHEMA).execute(&self.pool).await?;
        Ok(())
    }
}

super::sql::sql_lease_store!(SqliteLeaseStore, SqliteConnection, Sqlite);
