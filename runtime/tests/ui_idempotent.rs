//! Compile-fail and pass cases of `#[idempotent]` (trybuild), named after what they check.

#[test]
fn idempotent_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/idempotent/fail/*.rs");
    cases.pass("tests/ui/idempotent/pass/*.rs");
    if cfg!(feature = "axum") {
        cases.pass("tests/ui/idempotent/pass_axum/*.rs");
    }
}
