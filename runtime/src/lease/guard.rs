//! `LeaseGuard`: a held lease plus its store, released after the guarded work; and the unique
//! owner names `#[fenced]` uses when none is given.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::FencingToken;
use super::{Lease, LeaseError, LeaseStore};

/// A lease held for the duration of some work, released with [`LeaseGuard::release`].
///
/// Dropping the guard without releasing it (the future was cancelled, the task panicked) leaves
/// the lease to expire at its ttl; the fencing token still keeps the abandoned holder's late
/// writes out.
///
/// ```
/// use std::time::Duration;
/// use staleguard::lease::{LeaseGuard, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), staleguard::Error> {
/// let store = MemoryLeaseStore::new();
/// let guard = LeaseGuard::acquire(store.clone(), "order:1", "me", Duration::from_secs(5)).await?;
/// let token = guard.token(); // pass it to every write made under the lease
/// # let _ = token;
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a lease guard should be released after the work it guards"]
pub struct LeaseGuard<S: LeaseStore> {
    store: S,
    lease: Lease,
}

impl<S: LeaseStore> LeaseGuard<S> {
    /// Acquires the lease on `resource` for `owner` from `store`.
    pub async fn acquire(
        store: S,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Self, LeaseError> {
        let lease = store.acquire(resource, owner, ttl).await?;
        Ok(LeaseGuard { store, lease })
    }

    /// The held lease.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The lease's fencing token.
    pub fn token(&self) -> FencingToken {
        self.lease.token()
    }

    /// Releases the lease. Fails with [`LeaseError::Lost`] when it had already expired and been
    /// taken over (the work done under it was fenced, if its writes carried the token).
    pub async fn release(self) -> Result<(), LeaseError> {
        self.store.release(&self.lease).await
    }

    /// Releases the lease after the guarded work is done; a failure is logged (`tracing`, at
    /// debug level) instead of returned, because the work's outcome no longer depends on it: a
    /// lease that expired mid-work was already taken over, and the fence kept its writes out.
    pub async fn release_after_work(self) {
        let resource = self.lease.resource().to_string();
        if let Err(err) = self.release().await {
            tracing::debug!(%resource, %err, "staleguard: lease not released after the work");
        }
    }
}

/// A process-wide unique lease owner name: `<pid>-<start nanos>-<counter>`.
pub fn unique_owner() -> String {
    static START: OnceLock<u128> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = START.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{start:x}-{n}", std::process::id())
}
