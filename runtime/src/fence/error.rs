//! The typed outcomes of leases and fenced writes: `Held`, `Lost`, `Fenced`, `Stale`, and the
//! store failures behind them, plus the crate-wide [`Error`] that gathers them.

use std::fmt;

use crate::lease::FencingToken;

/// The store failed (I/O, SQL, pool): nothing is known about the operation's outcome.
#[derive(Debug)]
pub struct StoreError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl StoreError {
    /// Wraps any error as a store failure.
    pub fn new(err: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        StoreError(err.into())
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lease or fence store failed: {}", self.0)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        StoreError::new(err)
    }
}

/// Another owner holds an unexpired lease on the resource. Not stale: retry later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The resource whose lease is held.
    pub resource: String,
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lease on `{}` is held by another owner", self.resource)
    }
}

/// The lease expired or was taken over: its holder must stop acting on the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// The resource of the lost lease.
    pub resource: String,
    /// The lost lease's token.
    pub token: FencingToken,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lease on `{}` with token {} expired or was taken over",
            self.resource, self.token
        )
    }
}

/// A write carried a fencing token smaller than one the storage already accepted: it comes from
/// a past holder of the lease and was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    /// The resource written to.
    pub resource: String,
    /// The token the rejected write carried.
    pub token: FencingToken,
    /// The largest token the storage has accepted, when known.
    pub current: Option<FencingToken>,
}

impl fmt::Display for Fenced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write to `{}` with fencing token {} rejected",
            self.resource, self.token
        )?;
        if let Some(current) = self.current {
            write!(f, ": token {current} was already accepted")?;
        }
        Ok(())
    }
}

/// A conditional write matched no row: the persisted state no longer has the identity the
/// operation expected (it was cancelled, re-reserved, superseded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// What the write expected, for logs (`order 7 awaiting payment attempt 3`).
    pub expected: String,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stale: expected {}, the persisted state moved on",
            self.expected
        )
    }
}

impl std::error::Error for Held {}
impl std::error::Error for Lost {}
impl std::error::Error for Fenced {}
impl std::error::Error for Stale {}

/// Why a [`LeaseStore`](crate::lease::LeaseStore) call failed.
#[derive(Debug)]
pub enum LeaseError {
    /// Another owner holds an unexpired lease.
    Held(Held),
    /// The lease expired or was taken over.
    Lost(Lost),
    /// The store failed.
    Store(StoreError),
}

/// Why a fenced write check failed.
#[derive(Debug)]
pub enum FenceError {
    /// A larger token was already accepted: this write comes from a past holder.
    Fenced(Fenced),
    /// The store failed.
    Store(StoreError),
}

/// Every failure of the runtime in one type, for handlers whose error implements
/// `From<staleguard::Error>`.
#[derive(Debug)]
pub enum Error {
    /// Another owner holds an unexpired lease: retry later.
    Held(Held),
    /// The lease expired or was taken over.
    Lost(Lost),
    /// A write was rejected: a larger fencing token was already accepted.
    Fenced(Fenced),
    /// A conditional write matched no row: the state moved on.
    Stale(Stale),
    /// The store failed.
    Store(StoreError),
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Held(e) => e.fmt(f),
            LeaseError::Lost(e) => e.fmt(f),
            LeaseError::Store(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for FenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FenceError::Fenced(e) => e.fmt(f),
            FenceError::Store(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Held(e) => e.fmt(f),
            Error::Lost(e) => e.fmt(f),
            Error::Fenced(e) => e.fmt(f),
            Error::Stale(e) => e.fmt(f),
            Error::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LeaseError {}
impl std::error::Error for FenceError {}
impl std::error::Error for Error {}

impl From<StoreError> for LeaseError {
    fn from(err: StoreError) -> Self {
        LeaseError::Store(err)
    }
}

impl From<StoreError> for FenceError {
    fn from(err: StoreError) -> Self {
        FenceError::Store(err)
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl From<sqlx::Error> for LeaseError {
    fn from(err: sqlx::Error) -> Self {
        LeaseError::Store(err.into())
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl From<sqlx::Error> for FenceError {
    fn from(err: sqlx::Error) -> Self {
        FenceError::Store(err.into())
    }
}

impl From<LeaseError> for Error {
    fn from(err: LeaseError) -> Self {
        match err {
            LeaseError::Held(e) => Error::Held(e),
            LeaseError::Lost(e) => Error::Lost(e),
            LeaseError::Store(e) => Error::Store(e),
        }
    }
}

impl From<FenceError> for Error {
    fn from(err: FenceError) -> Self {
        match err {
            FenceError::Fenced(e) => Error::Fenced(e),
            FenceError::Store(e) => Error::Store(e),
        }
    }
}

impl From<Fenced> for Error {
    fn from(err: Fenced) -> Self {
        Error::Fenced(err)
    }
}

impl From<Stale> for Error {
    fn from(err: Stale) -> Self {
        Error::Stale(err)
    }
}

impl From<StoreError> for Error {
    fn from(err: StoreError) -> Self {
        Error::Store(err)
    }
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        StoreError::new(err)
    }
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for LeaseError {
    fn from(err: redis::RedisError) -> Self {
        LeaseError::Store(err.into())
    }
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for FenceError {
    fn from(err: redis::RedisError) -> Self {
        FenceError::Store(err.into())
    }
}
