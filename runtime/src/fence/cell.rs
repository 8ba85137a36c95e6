//! `FencedCell`: an in-memory value that only accepts writes carrying a fencing token at least
//! as large as the largest one it has accepted.

use std::sync::Mutex;

use super::Fenced;
use crate::lease::FencingToken;

/// An in-memory value guarded by fencing tokens: the memory counterpart of a row written after
/// [`FenceCheck`](super::FenceCheck).
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
    inner: Mutex<(T, Option<FencingToken>)>,
}

impl<T> FencedCell<T> {
    /// A cell for `resource` holding `value`, with no token accepted yet.
    pub fn new(resource: impl Into<String>, value: T) -> Self {
        FencedCell {
            resource: resource.into(),
            inner: Mutex::new((value, None)),
        }
    }

    /// Replaces the value if `token` is not smaller than the largest accepted token.
    pub fn write(&self, token: FencingToken, value: T) -> Result<(), Fenced> {
        self.update(token, |slot| *slot = value)
    }

    /// Runs `f` on the value if `token` is not smaller than the largest accepted token; the
    /// check and the change happen under one lock.
    pub fn update<R>(&self, token: FencingToken, f: impl FnOnce(&mut T) -> R) -> Result<R, Fenced> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(current) = inner.1
            && token < current
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
