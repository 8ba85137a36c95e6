//! Fenced writes: the storage remembers the largest fencing token it has accepted per resource
//! and rejects a write that carries a smaller one, so a past lease holder cannot come back.
//!
//! - [`FenceCheck`]: one conditional statement run in the caller's transaction, before its
//!   writes; checked by rows affected; a smaller token fails with [`FenceError::Fenced`]. The
//!   SQLite and PostgreSQL connections implement it (schema from the stores' `migrate()`).
//! - [`require_row`]: turns "my conditional update matched no row" into a typed [`Stale`].
//! - [`FencedCell`]: an in-memory value with the same rule, for the memory store and tests.
//! - [`Commit`]: how `#[fenced(begin = .., tx = ..)]` commits the transaction after the body.

#![warn(missing_docs)]

mod cell;
mod error;

use std::future::Future;

use crate::lease::FencingToken;

pub use cell::FencedCell;

/// Test-only (feature `mutation-testing`): a switch that turns every fence check into a no-op
/// (`FenceCheck` implementations accept any token, `FencedCell` any write), to show that the
/// tests of the stories fail without it. Never enable the feature in a build you deploy.
#[cfg(feature = "mutation-testing")]
#[doc(hidden)]
pub mod __mutation {
    use std::sync::atomic::{AtomicBool, Ordering};

    static OFF: AtomicBool = AtomicBool::new(false);

    /// Switches the fence checks off in this process, for good.
    pub fn disable_fence_checks() {
        OFF.store(true, Ordering::SeqCst);
    }

    pub(crate) fn off() -> bool {
        OFF.load(Ordering::SeqCst)
    }
}

/// Whether the fence checks were switched off (only ever with feature `mutation-testing`).
pub(crate) fn checks_off() -> bool {
    #[cfg(feature = "mutation-testing")]
    {
        __mutation::off()
    }
    #[cfg(not(feature = "mutation-testing"))]
    {
        false
    }
}
pub use error::{Error, FenceError, Fenced, Held, LeaseError, Lost, Stale, StoreError};

/// Runs the fencing check for `resource` with `token` inside the implementor's transaction.
///
/// The check is a single conditional statement (an upsert on `staleguard_fences` whose update
/// only applies when the stored token is not larger), checked by its rows affected. Run it as
/// the first statement of the transaction that does the write: it then holds the fence row until
/// commit, so a newer holder waits for this transaction and re-reads after it.
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), staleguard::Error> {
/// use std::time::Duration;
/// use staleguard::fence::{FenceCheck, FenceError};
/// use staleguard::lease::{LeaseStore, SqliteLeaseStore};
///
/// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.map_err(staleguard::StoreError::from)?;
/// let store = SqliteLeaseStore::new(pool.clone());
/// store.migrate().await?;
/// let old = store.acquire("job:7", "worker-a", Duration::from_millis(1)).await?;
/// # tokio::time::sleep(Duration::from_millis(5)).await;
/// let new = store.acquire("job:7", "worker-b", Duration::from_secs(30)).await?;
///
/// let mut tx = pool.begin().await.map_err(staleguard::StoreError::from)?;
/// tx.check_fence("job:7", new.token()).await?; // accepted: the newest holder
/// tx.commit().await.map_err(staleguard::StoreError::from)?;
///
/// let mut tx = pool.begin().await.map_err(staleguard::StoreError::from)?;
/// let late = tx.check_fence("job:7", old.token()).await; // the paused worker comes back
/// assert!(matches!(late, Err(FenceError::Fenced(_))));
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "sqlite"))]
/// # fn main() {}
/// ```
pub trait FenceCheck {
    /// Accepts `token` for `resource` if no larger token was accepted before; otherwise fails
    /// with [`FenceError::Fenced`] and changes nothing.
    fn check_fence<'a>(
        &'a mut self,
        resource: &'a str,
        token: FencingToken,
    ) -> impl Future<Output = Result<(), FenceError>> + Send + 'a;
}

/// A transaction `#[fenced(begin = .., tx = ..)]` commits after the body returned `Ok`.
/// Dropping it without committing must roll it back (as sqlx transactions do).
pub trait Commit {
    /// What a failed commit returns; the handler's error must convert from it.
    type Error;

    /// Commits the transaction.
    fn commit(self) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Checks the rows affected by a conditional write (`UPDATE .. WHERE id = $1 AND attempt = $2`):
/// no row means the state no longer has the expected identity, a typed [`Stale`].
///
/// ```
/// use staleguard::fence::require_row;
///
/// assert!(require_row(1, || "order 7 awaiting attempt 3".into()).is_ok());
/// let stale = require_row(0, || "order 7 awaiting attempt 3".into()).unwrap_err();
/// assert_eq!(stale.expected, "order 7 awaiting attempt 3");
/// ```
pub fn require_row(rows_affected: u64, expected: impl FnOnce() -> String) -> Result<(), Stale> {
    if rows_affected == 0 {
        Err(Stale {
            expected: expected(),
        })
    } else {
        Ok(())
    }
}
