//! `staleguard`: the runtime behind `#[staleguard::fenced]` and `#[staleguard::idempotent]`.

pub mod fence;
pub mod idempotency;
pub mod lease;

pub use fence::{Error, StoreError};
pub use lease::FencingToken;
pub use staleguard_macros::{fenced, idempotent};
