//! `#[staleguard::fenced]` and `#[staleguard::idempotent]`: thin entry points; parsing lives in
//! `staleguard-grammar`, validation and expansion in their own modules.
