//! `staleguard`: the runtime behind `#[staleguard::fenced]` and `#[staleguard::idempotent]`.

pub mod idempotency;

pub use staleguard_macros::{fenced, idempotent};
