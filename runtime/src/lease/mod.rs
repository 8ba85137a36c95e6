//! Leases with fencing tokens: "the lock decides who may enter now; the token decides whether a
//! past holder may come back".
//!
//! A [`LeaseStore`] hands each new holder of a resource a strictly larger [`FencingToken`] and an
//! expiry measured by the store's own clock. A lease whose ttl passed can be acquired by another
//! owner, with a larger token; writes carry the token and the storage rejects smaller ones (see
//! [`crate::fence`]). Stores: [`MemoryLeaseStore`] (tokio's clock, so `tokio::time::pause`
//! applies), `SqliteLeaseStore` (feature `sqlite`, default), `PgLeaseStore` (feature
//! `postgres`), both clocked by the database, and `RedisLeaseStore` (feature `redis`), clocked
//! by the Redis server, its tokens from `INCR`.

#![warn(missing_docs)]

mod guard;
mod lock;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use crate::fence::LeaseError;
pub use guard::{LeaseGuard, unique_owner};
pub use lock::Lock;
pub use memory::MemoryLeaseStore;
#[cfg(feature = "postgres")]
pub use postgres::PgLeaseStore;
#[cfg(feature = "redis")]
pub use redis::RedisLeaseStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteLeaseStore;

/// A fencing token: strictly larger for each new holder of a resource's lease.
///
/// ```
/// use staleguard::FencingToken;
///
/// let (old_holder, new_holder) = (FencingToken::new(41), FencingToken::new(42));
/// assert!(old_holder < new_holder); // storage that accepted 42 rejects 41
/// assert_eq!(new_holder.to_string(), "42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// A token with the given value (for stores and tests).
    pub const fn new(value: u64) -> Self {
        FencingToken(value)
    }

    /// The token's value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A granted lease: who holds which resource, with which token, until when (store clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    resource: String,
    owner: String,
    token: FencingToken,
    expires_at_ms: i64,
}

impl Lease {
    /// Builds a lease record (for store implementations).
    pub fn new(
        resource: impl Into<String>,
        owner: impl Into<String>,
        token: FencingToken,
        expires_at_ms: i64,
    ) -> Self {
        Lease {
            resource: resource.into(),
            owner: owner.into(),
            token,
            expires_at_ms,
        }
    }

    /// The leased resource's key.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Who holds the lease.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token to pass with every write made under this lease.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// When the lease expires, in milliseconds on the store's clock (Unix time for the SQL
    /// stores, time since the store was created for the memory store).
    pub fn expires_at_ms(&self) -> i64 {
        self.expires_at_ms
    }
}

/// A store of leases with fencing tokens.
///
/// Contract, checked by the tests against every store:
/// - `acquire` grants the lease when it is free, expired or already held by the same `owner`,
///   with a token strictly larger than every token granted before for that resource, and an
///   expiry of `ttl` after the store's current time; otherwise it fails with
///   [`LeaseError::Held`];
/// - `renew` extends an unexpired lease that still has its token, else [`LeaseError::Lost`];
/// - `release` frees the lease if it still has its token, else [`LeaseError::Lost`]; the token
///   counter is kept, so the next holder still gets a larger token.
///
/// ```
/// use std::time::Duration;
/// use staleguard::lease::{LeaseError, LeaseStore, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), LeaseError> {
/// let store = MemoryLeaseStore::new();
/// let a = store.acquire("seat:12", "worker-a", Duration::from_secs(5)).await?;
/// assert!(matches!(
///     store.acquire("seat:12", "worker-b", Duration::from_secs(5)).await,
///     Err(LeaseError::Held(_))
/// ));
/// store.release(&a).await?;
/// let b = store.acquire("seat:12", "worker-b", Duration::from_secs(5)).await?;
/// assert!(b.token() > a.token());
/// # Ok(())
/// # }
/// ```
pub trait LeaseStore: Send + Sync {
    /// Acquires the lease on `resource` for `owner` for `ttl`.
    fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send;

    /// Extends `lease` to `ttl` from now if it is still unexpired and current.
    fn renew(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send;

    /// Releases `lease` if it is still current.
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

impl<S: LeaseStore + ?Sized> LeaseStore for &S {
    fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send {
        (**self).acquire(resource, owner, ttl)
    }

    fn renew(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send {
        (**self).renew(lease, ttl)
    }

    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), LeaseError>> + Send {
        (**self).release(lease)
    }
}

impl<S: LeaseStore + ?Sized> LeaseStore for Arc<S> {
    fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send {
        (**self).acquire(resource, owner, ttl)
    }

    fn renew(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> impl Future<Output = Result<Lease, LeaseError>> + Send {
        (**self).renew(lease, ttl)
    }

    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), LeaseError>> + Send {
        (**self).release(lease)
    }
}

/// Milliseconds of a ttl, saturating.
pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 4)
}
