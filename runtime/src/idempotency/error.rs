//! The errors an idempotent call can end with besides the handler's own, and their HTTP status
//! codes (the Idempotency-Key draft: 400 missing, 409 in progress, 422 key reused).

use super::store::StoreError;
use std::fmt;
use std::time::Duration;

/// Why an idempotent call did not run its body or could not record its outcome. The handler's
/// error type must implement `From<IdempotencyError>`.
#[derive(Debug, Clone)]
pub enum IdempotencyError {
    /// The request carries no key (HTTP 400).
    MissingKey,
    /// The key (or tenant) is empty, too long or has characters outside visible ASCII (HTTP 400).
    InvalidKey { reason: String },
    /// Another request with this key is running, or its outcome is UNKNOWN and waits for the
    /// reconciler (HTTP 409 with `Retry-After`).
    InProgress { retry_after: Duration },
    /// The key was used before with a different payload (HTTP 422).
    Mismatch,
    /// This owner's lease was taken over while the body ran: its outcome was not recorded and
    /// the new owner's record was left untouched (HTTP 409).
    Fenced,
    /// The store failed (HTTP 503).
    Store(StoreError),
    /// A response or error could not be encoded for storage or decoded for replay (HTTP 500).
    Codec { reason: String },
}

impl IdempotencyError {
    /// The HTTP status code the Idempotency-Key draft gives this error.
    pub fn status(&self) -> u16 {
        match self {
            IdempotencyError::MissingKey | IdempotencyError::InvalidKey { .. } => 400,
            IdempotencyError::InProgress { .. } | IdempotencyError::Fenced => 409,
            IdempotencyError::Mismatch => 422,
            IdempotencyError::Store(_) => 503,
            IdempotencyError::Codec { .. } => 500,
        }
    }

    /// Whole seconds the client should wait before retrying, for `Retry-After` (at least 1).
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            IdempotencyError::InProgress { retry_after } => {
                Some(retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0))
                    .map(|s| s.max(1))
            }
            _ => None,
        }
    }
}

impl fmt::Display for IdempotencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdempotencyError::MissingKey => f.write_str("missing idempotency key"),
            IdempotencyError::InvalidKey { reason } => {
                write!(f, "invalid idempotency key: {reason}")
            }
            IdempotencyError::InProgress { retry_after } => write!(
                f,
                "a request with this idempotency key is still in progress; retry in {} ms",
                retry_after.as_millis()
            ),
            IdempotencyError::Mismatch => {
                f.write_str("idempotency key reused with a different request payload")
            }
            IdempotencyError::Fenced => f.write_str(
                "the lease on this idempotency key was taken over; the outcome was not recorded",
            ),
            IdempotencyError::Store(e) => write!(f, "idempotency store failed: {e}"),
            IdempotencyError::Codec { reason } => {
                write!(
                    f,
                    "idempotent response could not be stored or replayed: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for IdempotencyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IdempotencyError::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for IdempotencyError {
    fn from(e: StoreError) -> Self {
        IdempotencyError::Store(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_draft() {
        assert_eq!(IdempotencyError::MissingKey.status(), 400);
        assert_eq!(IdempotencyError::Mismatch.status(), 422);
        let busy = IdempotencyError::InProgress {
            retry_after: Duration::from_millis(1500),
        };
        assert_eq!(busy.status(), 409);
        assert_eq!(busy.retry_after_secs(), Some(2));
        let soon = IdempotencyError::InProgress {
            retry_after: Duration::ZERO,
        };
        assert_eq!(soon.retry_after_secs(), Some(1));
    }
}
