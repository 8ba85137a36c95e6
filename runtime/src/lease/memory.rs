//! `MemoryLeaseStore`: leases in a process-local map, clocked by `tokio::time::Instant` so tests
//! can pause and advance time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{FencingToken, Lease, LeaseError, LeaseStore, ttl_ms};
use crate::fence::{Held, Lost};

#[derive(Debug)]
struct Entry {
    owner: String,
    token: u64,
    expires_at_ms: i64,
}

/// Leases kept in memory; clones share the same leases.
///
/// Its clock is tokio's: under `tokio::time::pause`, leases expire when the test advances time.
/// It only coordinates tasks of one process.
///
/// ```
/// use std::time::Duration;
/// use staleguard::lease::{LeaseStore, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = MemoryLeaseStore::new();
/// let a = store.acquire("job", "a", Duration::from_secs(10)).await.unwrap();
/// tokio::time::advance(Duration::from_secs(11)).await;
/// let b = store.acquire("job", "b", Duration::from_secs(10)).await.unwrap();
/// assert_eq!(b.token().get(), a.token().get() + 1);
/// assert!(store.renew(&a, Duration::from_secs(10)).await.is_err()); // A lost it
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryLeaseStore {
    epoch: Instant,
    leases: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Default for MemoryLeaseStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryLeaseStore {
    /// An empty store; its clock starts now.
    pub fn new() -> Self {
        MemoryLeaseStore {
            epoch: Instant::now(),
            leases: Arc::default(),
        }
    }

    /// The store's clock: milliseconds since it was created.
    fn now_ms(&self) -> i64 {
        i64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(i64::MAX / 4)
    }

    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, Entry>, i64) -> R) -> R {
        let now = self.now_ms();
        let mut leases = self.leases.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut leases, now)
    }

    fn acquire_now(&self, resource: &str, owner: &str, ttl: Duration) -> Result<Lease, LeaseError> {
        self.with(|leases, now| {
            let entry = leases.entry(resource.to_string()).or_insert(Entry {
                owner: String::new(),
                token: 0,
                expires_at_ms: i64::MIN,
            });
            if entry.expires_at_ms > now && entry.owner != owner {
                return Err(LeaseError::Held(Held {
                    resource: resource.to_string(),
                }));
            }
            entry.owner = owner.to_string();
            entry.token += 1;
            entry.expires_at_ms = now.saturating_add(ttl_ms(ttl));
            Ok(Lease::new(
                resource,
                owner,
                FencingToken::new(entry.token),
                entry.expires_at_ms,
            ))
        })
    }

    /// The largest token granted for `resource`, if any (release keeps it).
    pub fn issued(&self, resource: &str) -> Option<FencingToken> {
        self.with(|leases, _| {
            leases
                .get(resource)
                .filter(|entry| entry.token > 0)
                .map(|entry| FencingToken::new(entry.token))
        })
    }

    fn lost(lease: &Lease) -> LeaseError {
        LeaseError::Lost(Lost {
            resource: lease.resource().to_string(),
            token: lease.token(),
        })
    }

    fn renew_now(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        self.with(|leases, now| match leases.get_mut(lease.resource()) {
            Some(entry) if entry.token == lease.token().get() && entry.expires_at_ms > now => {
                entry.expires_at_ms = now.saturating_add(ttl_ms(ttl));
                let mut renewed = lease.clone();
                renewed.expires_at_ms = entry.expires_at_ms;
                Ok(renewed)
            }
            _ => Err(Self::lost(lease)),
        })
    }

    fn release_now(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.with(|leases, _| match leases.get_mut(lease.resource()) {
            Some(entry) if entry.token == lease.token().get() => {
                entry.expires_at_ms = i64::MIN;
                Ok(())
            }
            _ => Err(Self::lost(lease)),
        })
    }
}

impl LeaseStore for MemoryLeaseStore {
    async fn acquire(
        &self,
        resource: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Lease, LeaseError> {
        self.acquire_now(resource, owner, ttl)
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, LeaseError> {
        self.renew_now(lease, ttl)
    }

    async fn release(&self, lease: &Lease) -> Result<(), LeaseError> {
        self.release_now(lease)
    }
}
