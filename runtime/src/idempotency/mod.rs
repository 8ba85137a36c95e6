//! The idempotency state machine behind `#[staleguard::idempotent]`, its stores, the reconciler
//! and the reaper.
//!
//! A request is identified by a [`RecordKey`] (handler name, optional tenant, the caller's key)
//! and described by a [`Fingerprint`] of its payload. The first request atomically *claims* the
//! key: one store statement creates the record in `PROCESSING` with an owner token, a fencing
//! counter (`fence`) and a lease whose expiry is computed by the store's own clock. A key that
//! is already taken is answered from the record as read (the SQL stores read before they
//! insert; the insert reports a key taken in between without writing), so a replay or an "in
//! progress" answer writes nothing; only a record that may be taken over goes on to the
//! compare-and-set:
//!
//! ```text
//!            claim (one atomic statement)
//!                      |
//!                      v
//!   +----------- PROCESSING (owner, fence, lease) <-------------+
//!   |   body ok     |   body error       |   body timed out      |  lease expired:
//!   v               v                    v                       |  takeover by CAS,
//! SUCCESS         FAILED (permanent)   UNKNOWN                   |  fence + 1
//!   |               |   retryable: record released              |
//!   |               |                    | reconciler (resolver)  |
//!   |               |                    +--> SUCCESS | FAILED    |
//!   +-------+-------+                                             |
//!           | retention elapsed: reaped (never PROCESSING/UNKNOWN) |
//! ```
//!
//! Every transition out of `PROCESSING` is a compare-and-set on `(key, fence, owner, PROCESSING)`:
//! an owner whose lease was taken over gets [`Transition::Fenced`] and changes nothing. See
//! `docs/macros.md` (the `#[idempotent]` part) for the HTTP mapping and the exact guarantees.

mod codec;
mod engine;
mod error;
mod failure;
mod fingerprint;
mod key;
mod local;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod reaper;
mod reconciler;
mod record;
#[cfg(feature = "redis")]
mod redis;
mod replayed;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod token;

#[doc(hidden)]
pub mod __private;
#[cfg(feature = "axum")]
pub mod axum;

pub use engine::{
    AsIdempotency, Begun, Call, ClaimHandle, Config, ErrorCodec, FailedPolicy, Guard, Idempotency,
    ResponseCodec,
};
pub use error::IdempotencyError;
pub use failure::{Classify, FailureKind};
pub use fingerprint::{Fingerprint, Fingerprinter};
pub use key::{IdempotencyKey, KeySource, MAX_KEY_LEN, RecordKey};
pub use local::{BegunLocal, LocalGuard};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use reaper::Reaper;
pub use reconciler::{Reconciler, Resolution, UnknownRecord};
pub use record::{Attempt, ClaimRequest, Outcome, Record, Resolved, State, Transition};
#[cfg(feature = "redis")]
pub use redis::RedisStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use store::{IdempotencyStore, LocalStore, StoreError};
