//! Compile tests of `#[idempotent]` (trybuild): each failing case is named after the mistake it
//! checks and its `.stderr` pins the message and the token it points at; the passing cases cover
//! every argument, methods, and axum handlers with extractors (with the `axum` feature).

#[test]
fn idempotent_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/idempotent/fail/*.rs");
    cases.pass("tests/ui/idempotent/pass/*.rs");
    if cfg!(feature = "axum") {
        cases.pass("tests/ui/idempotent/pass_axum/*.rs");
    }
}
