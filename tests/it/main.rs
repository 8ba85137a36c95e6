//! The one integration-test binary: fixtures, CLI, regressions and conventions.
