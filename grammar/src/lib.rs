//! The one grammar of `#[staleguard::fenced(..)]` and `#[staleguard::idempotent(..)]` arguments,
//! used by `staleguard-macros` to expand and by `staleguard-rules` to know what a guarded handler
//! guarantees.

pub mod fenced;
pub mod idempotent;
