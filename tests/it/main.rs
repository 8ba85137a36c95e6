//! The one integration-test binary: fixtures, CLI, regressions and conventions.

mod cli;
mod cli_rules;
mod fixtures;
mod schema;
mod snapshots;
mod support;
