//! The one integration-test binary: fixtures, CLI, regressions and conventions.

#[path = "../../rules/tests/support/cases.rs"]
mod cases;
mod cli;
mod cli_rules;
mod formats;
mod readme;
mod schema;
mod snapshots;
mod support;
