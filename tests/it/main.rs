//! The one integration-test binary: fixtures, CLI, regressions and conventions.

mod cargo;
#[path = "../../rules/tests/support/cases.rs"]
mod cases;
mod cli;
mod cli_rules;
mod conventions;
mod diff;
mod editors;
mod fixes;
mod formats;
mod readme;
mod schema;
mod snapshots;
mod support;
