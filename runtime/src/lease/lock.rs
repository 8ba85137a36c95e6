//! `Lock`: the in-process locks `#[fenced(lock = ..)]` accepts (no expiry, no fencing token).

use std::future::Future;
use std::sync::Arc;

/// An in-process lock whose guard is held while a `#[fenced(lock = ..)]` handler runs.
///
/// Implemented for `tokio::sync::Mutex<T>` (the guard borrows the mutex) and
/// `Arc<tokio::sync::Mutex<T>>` (an owned guard, so a `&mut self` method can lock a field).
/// A lock only serialises this process; across processes use a lease and its fencing token.
///
/// ```
/// use std::sync::Arc;
/// use staleguard::lease::Lock;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let lock = Arc::new(tokio::sync::Mutex::new(()));
/// let guard = Lock::lock(&lock).await;
/// assert!(lock.try_lock().is_err());
/// drop(guard);
/// # }
/// ```
pub trait Lock {
    /// Held while the handler runs; dropping it unlocks.
    type Guard<'a>
    where
        Self: 'a;

    /// Waits for the lock.
    fn lock(&self) -> impl Future<Output = Self::Guard<'_>> + Send;
}

impl<T: Send> Lock for tokio::sync::Mutex<T> {
    type Guard<'a>
        = tokio::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn lock(&self) -> impl Future<Output = Self::Guard<'_>> + Send {
        tokio::sync::Mutex::lock(self)
    }
}

impl<T: Send + Sync> Lock for Arc<tokio::sync::Mutex<T>> {
    type Guard<'a>
        = tokio::sync::OwnedMutexGuard<T>
    where
        T: 'a;

    fn lock(&self) -> impl Future<Output = Self::Guard<'_>> + Send {
        tokio::sync::Mutex::lock_owned(Arc::clone(self))
    }
}
