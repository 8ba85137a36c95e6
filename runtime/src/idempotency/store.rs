//! The store contract: each method is one atomic operation against the backing store (one
//! statement or script; a claim reads first and writes only for a new key or a takeover).

use super::key::RecordKey;
use super::record::{Attempt, ClaimRequest, Outcome, Record, Resolved, Transition};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// A failure of the backing store (connection lost, constraint the schema did not expect...).
#[derive(Clone)]
pub struct StoreError(Arc<dyn std::error::Error + Send + Sync>);

impl StoreError {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError(Arc::new(error))
    }

    pub fn msg(message: impl Into<String>) -> Self {
        #[derive(Debug)]
        struct Msg(String);
        impl fmt::Display for Msg {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl std::error::Error for Msg {}
        StoreError(Arc::new(Msg(message.into())))
    }
}

impl fmt::Debug for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::new(e)
    }
}

/// Where idempotency records live. Every transition is one atomic compare-and-set that reports
/// [`Transition::Fenced`] instead of writing when its condition does not hold; a claim that
/// finds a record it may not take returns it without writing. Times are decided by the store's
/// clock.
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Creates the record in PROCESSING, or takes it over, or returns it unchanged (see
    /// [`ClaimRequest`]).
    fn claim(
        &self,
        request: &ClaimRequest<'_>,
    ) -> impl Future<Output = Result<Record, StoreError>> + Send;

    /// PROCESSING → SUCCESS / FAILED / UNKNOWN, or release, on `(key, fence, owner,
    /// PROCESSING)`. Terminal records expire `retention_ms` from now. A release deletes a
    /// first claim's record (fence 1) and ends the lease of a taken-over one (fence > 1),
    /// keeping its record id and fence counter.
    fn finish(
        &self,
        attempt: &Attempt<'_>,
        outcome: Outcome<'_>,
        retention_ms: i64,
    ) -> impl Future<Output = Result<Transition, StoreError>> + Send;

    /// Extends the lease to `lease_ms` from now on `(key, fence, owner, PROCESSING)`.
    fn heartbeat(
        &self,
        attempt: &Attempt<'_>,
        lease_ms: i64,
    ) -> impl Future<Output = Result<Transition, StoreError>> + Send;

    /// Reads one record.
    fn get(
        &self,
        key: &RecordKey,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// Reserves and returns up to `limit` UNKNOWN records that no reconciler holds, longest
    /// untouched first: each is held for `reserve_ms` (its lease, unused in UNKNOWN), so that
    /// another reconciler's call skips it and the resolver is asked once. One atomic statement.
    fn unknown(
        &self,
        limit: u32,
        reserve_ms: i64,
    ) -> impl Future<Output = Result<Vec<Record>, StoreError>> + Send;

    /// UNKNOWN → SUCCESS / FAILED on `(key, fence, UNKNOWN)`; [`Resolved::Deferred`] keeps it
    /// UNKNOWN, moves it behind every other UNKNOWN record and ends its reservation.
    fn resolve(
        &self,
        key: &RecordKey,
        fence: i64,
        resolved: Resolved<'_>,
        retention_ms: i64,
    ) -> impl Future<Output = Result<Transition, StoreError>> + Send;

    /// Deletes SUCCESS and FAILED records past their retention; never PROCESSING or UNKNOWN.
    /// Returns how many were deleted.
    fn reap(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// A store whose records live in the same database as the handler's own data: the
/// one-transaction mode (`#[idempotent(tx = tx, ..)]`). The claim, the body's writes (through
/// the transaction handed to the body) and the completion commit together; a failure rolls all
/// of them back; a duplicate waits on the claimed row's lock (or gets "in progress" when the
/// record is held by a claim of the other mode).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold the claim in the body's transaction",
    label = "`tx = ..` (the one-transaction mode) needs a store in the database of the body's writes",
    note = "use a `PostgresStore` or a `SqliteStore` on that database, or drop `tx = ..`"
)]
pub trait LocalStore: IdempotencyStore {
    /// The transaction handed to the body.
    type Tx: Send + 'static;

    /// Opens a transaction and claims in it, as [`IdempotencyStore::claim`] does: the new
    /// record is visible to nobody until the commit, and a concurrent claim of the same key
    /// waits for it.
    fn claim_in_transaction(
        &self,
        request: &ClaimRequest<'_>,
    ) -> impl Future<Output = Result<(Record, Self::Tx), StoreError>> + Send;

    /// PROCESSING → SUCCESS on `(key, fence, owner, PROCESSING)` in `tx`, then commits `tx`.
    /// `Fenced` rolls back.
    fn complete_in_transaction(
        &self,
        tx: Self::Tx,
        attempt: &Attempt<'_>,
        response: &str,
        retention_ms: i64,
    ) -> impl Future<Output = Result<Transition, StoreError>> + Send;
}
