//! End-to-end tests of the `cargo-staleguard` binary (placeholder until the CLI lands).
