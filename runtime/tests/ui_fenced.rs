//! Compile tests of `#[fenced]` (trybuild): each failing case is named after the mistake it
//! checks and its `.stderr` pins the message and the user's token it points at; the passing
//! cases cover methods, generics with `where` clauses and `impl Trait` returns.

#[test]
fn fenced_compile_errors_and_accepted_shapes() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fenced/fail/*.rs");
    cases.pass("tests/ui/fenced/pass/*.rs");
}
