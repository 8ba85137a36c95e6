//! Arguments of `#[idempotent(..)]` (placeholder until the idempotent macro lands).
