//! `FencedCell`: an in-memory value that only accepts writes carrying a fencing token at least
//! as large as the largest one it has accepted, or, made with [`FencedCell::with_leases`], the
//! largest one its lease store has granted.

use std::sync::Mutex;

use super::Fenced;
use crate::lease::{FencingToken, MemoryLeaseStore};

/// An in-memory value guarded by fencing tokens: the memory counterpart of a row written after
/// [`FenceCheck`](super::FenceCheck).
///
/// Made with [`FencedCell::with_leases`], a write is refused as soon as a newer holder has
/// *acquired* the lease, so a read-modify-write of a holder whose lease expired is never
/// accepted (no lost update). Made with [`FencedCell::new`], the cell only knows the tokens
/// written to it: a newer holder that has acquired but not yet written does not fence an older
/// one, so use that form only for whole-value replacements.
///
/// ```
/// use std::time::Duration;
/// use staleguard::fence::FencedCell;
/// use staleguard::lease::{LeaseStore, MemoryLeaseStore};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = MemoryLeaseStore::new();
/// let cell = FencedCell::new("report:1", String::from("empty"));
/// let a = store.acquire("report:1", "a", Duration::from_secs(10)).await.unwrap();
/// tokio::time::advance(Duration::from_secs(11)).await; // A pauses past its expiry
/// let b = store.acquire("report:1", "b", Duration::from_secs(10)).await.unwrap();
/// cell.write(b.token(), String::from("from b")).unwrap();
/// assert!(cell.write(a.token(), String::from("from a")).is_err()); // fenced out
/// assert_eq!(cell.get(), "from b");
/// # }
/// ```
#[derive(Debug)]
pub struct FencedCell<T> {
    resource: String,
    leases: Option<MemoryLeaseStore>,
    inner: Mutex<(T, Option<FencingToken>)>,
}

impl<T> FencedCell<T> {
    /// A cell for `resource` holding `value`, with no token accepted yet.
    pub fn new(resource: impl Into<String>, value: T) -> Self {
        FencedCell {
            resource: resource.into(),
            leases: None,
            inner: Mutex::new((value, None)),
        }
    }

    /// A cell for `resource` holding `value` that also refuses every token older than the
    /// newest one `leases` has granted for `resource`, written or not.
    ///
    /// ```
    /// use std::time::Duration;
    /// use staleguard::fence::FencedCell;
    /// use staleguard::lease::{LeaseStore, MemoryLeaseStore};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let store = MemoryLeaseStore::new();
    /// let counter = FencedCell::with_leases(&store, "counter", 0);
    /// let a = store.acquire("counter", "a", Duration::from_secs(10)).await.unwrap();
    /// let seen_by_a = counter.get();
    /// tokio::time::advance(Duration::from_secs(11)).await; // A pauses past its expiry
    /// let b = store.acquire("counter", "b", Duration::from_secs(10)).await.unwrap();
    /// let seen_by_b = counter.get();
    /// // A comes back before B has written: refused all the same.
    /// assert!(counter.write(a.token(), seen_by_a + 1).is_err());
    /// counter.write(b.token(), seen_by_b + 1).unwrap();
    /// assert_eq!(counter.get(), 1);
    /// # }
    /// ```
    pub fn with_leases(leases: &MemoryLeaseStore, resource: impl Into<String>, value: T) -> Self {
        FencedCell {
            leases: Some(leases.clone()),
            ..FencedCell::new(resource, value)
        }
    }

    /// Replaces the value if `token` is not smaller than the largest accepted token.
    pub fn write(&self, token: FencingToken, value: T) -> Result<(), Fenced> {
        self.update(token, |slot| *slot = value)
    }

    /// Runs `f` on the value if `token` is not smaller than the largest accepted token (or,
    /// with [`FencedCell::with_leases`], granted); the check and the change happen under one lock.
    pub fn update<R>(&self, token: FencingToken, f: impl FnOnce(&mut T) -> R) -> Result<R, Fenced> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let granted = self.leases.as_ref().and_then(|l| l.issued(&self.resource));
        if let Some(current) = inner.1.max(granted)
            && token < current
            && !super::checks_off()
        {
            return Err(Fenced {
                resource: self.resource.clone(),
                token,
                current: Some(current),
            });
        }
        inner.1 = Some(token);
        Ok(f(&mut inner.0))
    }

    /// The largest token accepted so far.
    pub fn accepted(&self) -> Option<FencingToken> {
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .1
    }
}

impl<T: Clone> FencedCell<T> {
    /// A copy of the current value.
    pub fn get(&self) -> T {
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .0
            .clone()
    }
}
