//! Shared application state: the SQLite pool, the payment gateway client, the per-seat lock map,
//! the staleguard lease store and idempotency engine (for the macro forms), and the schema.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::SqlitePoolOptions;
use staleguard::idempotency::{Idempotency, SqliteStore};
use staleguard::lease::SqliteLeaseStore;
use tokio::sync::Mutex;

use crate::gateway::PaymentGateway;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    customer TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    payment_attempt_id TEXT,
    attempt_expires_at TEXT,
    charge_id TEXT,
    payout_fence INTEGER
);
CREATE TABLE IF NOT EXISTS voucher_tokens (
    token TEXT PRIMARY KEY,
    customer TEXT NOT NULL,
    amount_cents INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS voucher_redemptions (
    token TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until TEXT NOT NULL,
    credit_id TEXT
);
CREATE TABLE IF NOT EXISTS refund_requests (
    idempotency_key TEXT PRIMARY KEY,
    order_id INTEGER NOT NULL,
    state TEXT NOT NULL,
    refund_id TEXT,
    owner TEXT,
    lease_until TEXT
);
CREATE TABLE IF NOT EXISTS seats (
    id INTEGER PRIMARY KEY,
    status TEXT NOT NULL DEFAULT 'free',
    holder TEXT,
    reservation_id INTEGER
);
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seat_id INTEGER NOT NULL,
    holder TEXT NOT NULL
);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
INSERT OR IGNORE INTO seats (id) SELECT i FROM n;
";

/// Per-key async locks: one mutex per seat, created on first use.
pub type KeyedLocks = Arc<Mutex<HashMap<i64, Arc<Mutex<()>>>>>;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: SqlitePool,
    pub gateway: PaymentGateway,
    pub seat_locks: KeyedLocks,
    /// How long a seat hold lasts before its release timer fires.
    pub hold_ttl: Duration,
    /// Leases and fencing tokens for `#[staleguard::fenced]` handlers (same database as the
    /// data, so the fence check runs in the handler's transaction).
    pub leases: SqliteLeaseStore,
    /// Idempotency records for `#[staleguard::idempotent]` handlers.
    pub idempotency: Idempotency<SqliteStore>,
}

impl AppState {
    /// Opens the database, creates the schema and builds the state.
    pub async fn connect(db_url: &str, psp_url: &str) -> Result<Self, sqlx::Error> {
        // An in-memory SQLite database exists per connection: keep one connection, and keep it
        // open (an idle pool would otherwise close it and lose the database).
        let db = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect(db_url)
            .await?;
        sqlx::raw_sql(SCHEMA).execute(&db).await?;
        let leases = SqliteLeaseStore::new(db.clone());
        leases.migrate().await.map_err(store_error)?;
        let records = SqliteStore::new(db.clone(), "idempotency_records").map_err(store_error)?;
        records.migrate().await.map_err(store_error)?;
        Ok(AppState {
            db,
            gateway: PaymentGateway::new(psp_url),
            seat_locks: KeyedLocks::default(),
            hold_ttl: Duration::from_secs(600),
            leases,
            idempotency: Idempotency::new(records),
        })
    }
}

/// The runtime's store errors wrap the driver's; `connect` reports them as the driver does.
fn store_error(err: impl std::error::Error + Send + Sync + 'static) -> sqlx::Error {
    sqlx::Error::Configuration(Box::new(err))
}
