//! `staleguard`: the runtime behind `#[staleguard::fenced]` and `#[staleguard::idempotent]`.
