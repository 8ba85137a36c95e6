//! How a handler's error tells the state machine what it means: retry, store, or reconcile.

/// What a body error means for the idempotency record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Nothing happened that a retry could duplicate (validation before any effect, a refused
    /// connection): the record is released so the next request runs the body again.
    Retryable,
    /// A definite failure (card declined): stored as `FAILED`; duplicates get it replayed or run
    /// again according to the handler's `failed` policy.
    Permanent,
    /// The outcome is not known (a remote call timed out): the record becomes `UNKNOWN`,
    /// duplicates are told "in progress", and the reconciler resolves it.
    Unknown,
}

/// Implemented by the error type of an `#[idempotent]` handler.
///
/// ```
/// use staleguard::idempotency::{Classify, FailureKind};
///
/// enum PayError { Declined, GatewayTimeout, BadRequest }
///
/// impl Classify for PayError {
///     fn classify(&self) -> FailureKind {
///         match self {
///             PayError::Declined => FailureKind::Permanent,
///             PayError::GatewayTimeout => FailureKind::Unknown,
///             PayError::BadRequest => FailureKind::Retryable,
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say whether an error is retryable, permanent or unknown",
    label = "the error type of an `#[idempotent]` handler",
    note = "implement `staleguard::idempotency::Classify` for `{Self}`"
)]
pub trait Classify {
    fn classify(&self) -> FailureKind;
}
