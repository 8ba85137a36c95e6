//! The one integration-test binary: fixtures, CLI, regressions and conventions.

mod cli;
mod fixtures;
mod schema;
mod snapshots;
mod support;
