//! What a test compares with: the constants and patterns of a condition, a guard or a match
//! arm (see [`crate::ir::Test`]), and whether it holds on an absent, false or zero value.

use super::body::MAX_STR;
use super::{Seq, last_segment};
use crate::apis;
use crate::ir::Comparison;
use crate::name::Name;
use syn::{BinOp, Expr, Lit, Pat, UnOp};

/// The most constants kept per test or pattern.
const MAX_VALUES: usize = 8;

/// The constants `e` compares with or matches (see [`crate::ir::Test::values`]).
pub(super) fn values(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if out.len() >= MAX_VALUES || depth > 24 {
        return;
    }
    let d = depth + 1;
    match e {
        Expr::Lit(l) => lit(&l.lit, out),
        Expr::Path(p) => path(&p.path, out),
        Expr::Call(c) => {
            // A constructor (`Some(..)`, `Status::Held(..)`) is a value; a fn called in the test
            // (`cache::get_value(..)`) is not.
            let called_fn = matches!(&*c.func, Expr::Path(p)
            if p.path.segments.last_item().is_some_and(|s| {
                !s.ident.to_string().starts_with(|ch: char| ch.is_ascii_uppercase())
            }));
            if !called_fn {
                values(&c.func, out, d);
            }
            c.args.each().for_each(|a| values(a, out, d));
        }
        Expr::MethodCall(m) => {
            values(&m.receiver, out, d);
            m.args.each().for_each(|a| values(a, out, d));
            // `res.is_err()` / `res.is_ok()` test which variant the result is. So do a local's
            // `found.is_some()` / `found.is_none()`, and `rows.is_empty()` asks, like `None`,
            // whether anything was found; a field's (`user.verified_at.is_some()`) is a test of
            // a value the row holds, and keeps no variant.
            if m.args.is_empty() {
                let local = matches!(&*m.receiver, Expr::Path(p) if p.path.get_ident().is_some());
                let variant = match m.method.to_string().as_str() {
                    "is_err" => Some("Err"),
                    "is_ok" => Some("Ok"),
                    "is_some" if local => Some("Some"),
                    "is_none" | "is_empty" if local => Some("None"),
                    _ => None,
                };
                out.extend(variant.map(Name::new));
            }
        }
        Expr::Binary(b) => {
            values(&b.left, out, d);
            values(&b.right, out, d);
        }
        Expr::Unary(u) => values(&u.expr, out, d),
        Expr::Paren(p) => values(&p.expr, out, d),
        Expr::Group(g) => values(&g.expr, out, d),
        Expr::Reference(r) => values(&r.expr, out, d),
        Expr::Await(a) => values(&a.base, out, d),
        Expr::Try(t) => values(&t.expr, out, d),
        Expr::Field(f) => values(&f.base, out, d),
        Expr::Cast(c) => values(&c.expr, out, d),
        Expr::Tuple(t) => t.elems.each().for_each(|x| values(x, out, d)),
        Expr::Let(l) => {
            values(&l.expr, out, d);
            pattern(&l.pat, out, d);
        }
        Expr::Macro(m) => {
            if matches!(
                last_segment(&m.mac.path).as_str(),
                "matches" | "assert_matches"
            ) && let Ok((x, p)) = m.mac.parse_body_with(matched)
            {
                values(&x, out, d);
                pattern(&p, out, d);
            }
        }
        _ => {}
    }
}

/// `matches!(expr, pattern ..)`'s expression and pattern (a guard after them is left).
fn matched(input: syn::parse::ParseStream<'_>) -> syn::Result<(Expr, Pat)> {
    let e: Expr = input.parse()?;
    input.parse::<syn::Token![,]>()?;
    let p = Pat::parse_multi_with_leading_vert(input)?;
    let _: proc_macro2::TokenStream = input.parse()?;
    Ok((e, p))
}

/// The constants a pattern names: variant and const paths (`Err`, `None`,
/// `DatabaseErrorKind::UniqueViolation`) and literals.
pub(super) fn pattern(p: &Pat, out: &mut Vec<Name>, depth: u32) {
    if out.len() >= MAX_VALUES || depth > 24 {
        return;
    }
    let d = depth + 1;
    match p {
        Pat::Ident(i) => {
            if i.ident
                .to_string()
                .starts_with(|c: char| c.is_ascii_uppercase())
            {
                out.push(Name::display(&i.ident));
            }
            if let Some((_, sub)) = &i.subpat {
                pattern(sub, out, d);
            }
        }
        Pat::Path(x) => path(&x.path, out),
        Pat::TupleStruct(t) => {
            path(&t.path, out);
            t.elems.each().for_each(|x| pattern(x, out, d));
        }
        Pat::Struct(s) => {
            path(&s.path, out);
            s.fields.each().for_each(|f| pattern(&f.pat, out, d));
        }
        Pat::Lit(l) => lit(&l.lit, out),
        Pat::Or(o) => o.cases.each().for_each(|x| pattern(x, out, d)),
        Pat::Tuple(t) => t.elems.each().for_each(|x| pattern(x, out, d)),
        Pat::Slice(s) => s.elems.each().for_each(|x| pattern(x, out, d)),
        Pat::Reference(r) => pattern(&r.pat, out, d),
        Pat::Paren(x) => pattern(&x.pat, out, d),
        Pat::Type(t) => pattern(&t.pat, out, d),
        Pat::Guard(g) => pattern(&g.pat, out, d),
        _ => {}
    }
}

fn lit(l: &Lit, out: &mut Vec<Name>) {
    match l {
        Lit::Str(s) => {
            let v = s.value();
            if v.len() <= MAX_STR {
                out.push(Name::from(v.as_str()));
            }
        }
        Lit::Int(i) => out.push(Name::from(i.base10_digits())),
        Lit::Bool(b) => out.push(Name::from(if b.value { "true" } else { "false" })),
        _ => {}
    }
}

/// A path's last segment when it names a constant: a path of two or more segments
/// (`UNIQUE_VIOLATION` of `tokio_postgres::error::SqlState::UNIQUE_VIOLATION`) or a capitalised
/// single one (`None`, `UNIQUE_VIOLATION`); a lowercase local is not a constant.
fn path(p: &syn::Path, out: &mut Vec<Name>) {
    let Some(last) = p.segments.last_item() else {
        return;
    };
    if p.segments.len() >= 2
        || last
            .ident
            .to_string()
            .starts_with(|c: char| c.is_ascii_uppercase())
    {
        out.push(Name::display(&last.ident));
    }
}

/// Whether `e` holds when what it tests is absent, false or zero (see
/// [`crate::ir::Test::negated`]).
pub(super) fn negated(e: &Expr) -> bool {
    match e {
        Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => !negated(&u.expr),
        Expr::Paren(p) => negated(&p.expr),
        Expr::Group(g) => negated(&g.expr),
        Expr::MethodCall(m) => matches!(m.method.to_string().as_str(), "is_none" | "is_empty"),
        Expr::Binary(b) => {
            let zero = |x: &Expr| is_int(x, "0") || is_false(x);
            match b.op {
                BinOp::Eq(_) => zero(&b.left) || zero(&b.right),
                BinOp::Le(_) => zero(&b.right),
                BinOp::Lt(_) => is_int(&b.right, "1"),
                // `!= 1` of a count that is 0 or 1 (`rows_affected() != 1`).
                BinOp::Ne(_) => is_int(&b.right, "1"),
                _ => false,
            }
        }
        _ => false,
    }
}

/// The comparison `e` is at its top (see [`crate::ir::Comparison`]).
pub(super) fn comparison(e: &Expr) -> Comparison {
    match e {
        Expr::Paren(p) => comparison(&p.expr),
        Expr::Group(g) => comparison(&g.expr),
        Expr::Binary(b) if matches!(b.op, BinOp::Eq(_)) => Comparison::Equal,
        Expr::Binary(b) if matches!(b.op, BinOp::Ne(_)) => Comparison::NotEqual,
        Expr::Binary(b)
            if matches!(
                b.op,
                BinOp::Lt(_) | BinOp::Le(_) | BinOp::Gt(_) | BinOp::Ge(_)
            ) =>
        {
            Comparison::Ordering
        }
        Expr::Let(_) => Comparison::Equal,
        _ => Comparison::Other,
    }
}

/// The string literals a pattern matches (`"paid" | "settled"`).
pub(super) fn pattern_strs(p: &Pat, out: &mut Vec<Name>) {
    match p {
        Pat::Lit(l) => {
            if let Lit::Str(s) = &l.lit {
                out.push(Name::from(s.value()));
            }
        }
        Pat::Or(o) => o.cases.each().for_each(|x| pattern_strs(x, out)),
        Pat::Reference(r) => pattern_strs(&r.pat, out),
        Pat::Paren(x) => pattern_strs(&x.pat, out),
        Pat::Guard(g) => pattern_strs(&g.pat, out),
        _ => {}
    }
}

fn is_int(e: &Expr, digits: &str) -> bool {
    matches!(e, Expr::Lit(l) if matches!(&l.lit, Lit::Int(i) if i.base10_digits() == digits))
}

fn is_false(e: &Expr) -> bool {
    matches!(e, Expr::Lit(l) if matches!(&l.lit, Lit::Bool(b) if !b.value))
}

/// Whether a branch body ends in a failure (see [`crate::ir::Region::Branch`]): its value, or
/// a `return` or diverging macro in it.
pub(super) fn fails(e: &Expr) -> bool {
    match e {
        Expr::Block(b) => block_fails(&b.block),
        Expr::Return(r) => r.expr.as_deref().is_some_and(failure),
        Expr::Try(t) => failure(&t.expr),
        Expr::If(i) => {
            block_fails(&i.then_branch) && i.else_branch.as_ref().is_some_and(|(_, e)| fails(e))
        }
        e => failure(e),
    }
}

pub(super) fn block_fails(b: &syn::Block) -> bool {
    let n = b.stmts.len();
    b.stmts.iter().enumerate().any(|(i, s)| match s {
        syn::Stmt::Expr(e, semi) => match e {
            Expr::Return(_) | Expr::Macro(_) | Expr::Try(_) => fails(e),
            Expr::If(_) | Expr::Block(_) => fails(e),
            _ => semi.is_none() && i + 1 == n && fails(e),
        },
        syn::Stmt::Macro(m) => is_failing_macro(&m.mac),
        _ => false,
    })
}

/// Whether a branch body leaves the function answering nothing (see
/// [`crate::ir::Region::Branch`]): a `return` of `None`, `false`, `Ok(None)` or `Ok(false)`.
/// Only a `return`: a branch's value (`let left = if single { .. None } else { Some(1) }`)
/// may be a local's, not the answer.
pub(super) fn answers_nothing(e: &Expr) -> bool {
    match e {
        Expr::Block(b) => block_answers_nothing(&b.block),
        Expr::Return(r) => r.expr.as_deref().is_some_and(nothing),
        _ => false,
    }
}

pub(super) fn block_answers_nothing(b: &syn::Block) -> bool {
    b.stmts
        .iter()
        .any(|s| matches!(s, syn::Stmt::Expr(e @ Expr::Return(_), _) if answers_nothing(e)))
}

/// `None`, `false`, `Ok(None)`, `Ok(false)`.
fn nothing(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.path.is_ident("None"),
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Ok"))
                && c.args.len() == 1
                && c.args
                    .first()
                    .is_some_and(|a| matches!(a, Expr::Path(_)) && nothing(a) || is_false(a))
        }
        Expr::Paren(p) => nothing(&p.expr),
        e => is_false(e),
    }
}

/// A value that says something failed: `Err(..)`, a failing macro, an HTTP error status
/// (also inside `Ok(..)` or a tuple).
fn failure(e: &Expr) -> bool {
    match e {
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if last_segment(&p.path) == "Err")
                || callee_is_error_status(&c.func)
                || c.args.each().any(failure)
        }
        Expr::MethodCall(m) => failure(&m.receiver),
        Expr::Macro(m) => is_failing_macro(&m.mac),
        Expr::Path(p) => apis::ERROR_STATUSES.contains(&last_segment(&p.path).as_str()),
        Expr::Tuple(t) => t.elems.each().any(failure),
        Expr::Paren(p) => failure(&p.expr),
        Expr::Try(t) => failure(&t.expr),
        Expr::Reference(r) => failure(&r.expr),
        Expr::Block(b) => block_fails(&b.block),
        _ => false,
    }
}

/// `HttpResponse::Conflict()`, `ApiResponse::internal_error(msg)`: a builder named by its
/// status.
fn callee_is_error_status(f: &Expr) -> bool {
    matches!(f, Expr::Path(p) if {
        let last = last_segment(&p.path);
        apis::ERROR_STATUSES.contains(&last.as_str())
            || apis::ERROR_STATUS_BUILDERS.contains(&last.as_str())
    })
}

fn is_failing_macro(m: &syn::Macro) -> bool {
    apis::FAILING_MACROS.contains(&last_segment(&m.path).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(src: &str) -> (Vec<String>, bool) {
        let e: Expr = syn::parse_str(src).expect("an expression");
        let mut out = Vec::new();
        values(&e, &mut out, 0);
        (out.iter().map(|n| n.to_string()).collect(), negated(&e))
    }

    #[test]
    fn a_test_keeps_the_constants_it_compares_with() {
        assert_eq!(
            of(r#"code.as_deref() == Some("23505")"#),
            (vec!["Some".to_string(), "23505".to_string()], false)
        );
        assert_eq!(
            of("e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)").0,
            ["Some", "UNIQUE_VIOLATION"]
        );
        assert_eq!(
            of("matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))").0,
            ["Some", "UniqueConstraintViolation"]
        );
        assert_eq!(
            of("let Err(DbErr::RecordNotInserted) = res").0,
            ["Err", "RecordNotInserted"]
        );
        assert!(
            of("order.status == status").0.is_empty(),
            "locals are not constants"
        );
    }

    #[test]
    fn a_test_of_absence_is_negated_and_a_double_negation_is_not() {
        for src in [
            "r.rows_affected() == 0",
            "!fresh",
            "x.is_none()",
            "n < 1",
            "0 == n",
            "ok == false",
        ] {
            assert!(of(src).1, "{src}");
        }
        for src in [
            "r.rows_affected() > 0",
            "fresh",
            "!x.is_none()",
            "n == 1",
            "x.is_some()",
        ] {
            assert!(!of(src).1, "{src}");
        }
        assert!(of("!store.claim(id).await?").1);
    }

    #[test]
    fn a_test_says_which_comparison_it_is_at_its_top() {
        let cmp = |src: &str| comparison(&syn::parse_str::<Expr>(src).expect("an expression"));
        assert_eq!(cmp(r#"status == "paid""#), Comparison::Equal);
        assert_eq!(cmp(r#"(row.status != "paid")"#), Comparison::NotEqual);
        assert_eq!(cmp("let Status::Open = status"), Comparison::Equal);
        assert_eq!(cmp("(owners.len() <= 1)"), Comparison::Ordering);
        assert_eq!(cmp("count >= limit"), Comparison::Ordering);
        for other in [
            r#"status != "paid" && flag"#,
            "!done",
            "x.is_none()",
            r#"matches!(s, "a")"#,
        ] {
            assert_eq!(cmp(other), Comparison::Other, "{other}");
        }
    }

    #[test]
    fn a_branch_fails_on_an_error_value_a_failing_macro_or_an_error_status() {
        let fails_src = |src: &str| fails(&syn::parse_str::<Expr>(src).expect("an expression"));
        for src in [
            "Err(ApiError::Conflict)",
            "{ log(); return Err(e.into()); }",
            "{ anyhow::bail!(\"duplicate\") }",
            "Ok(StatusCode::CONFLICT)",
            "Ok((StatusCode::CONFLICT, body))",
            "HttpResponse::InternalServerError().finish()",
            "ApiResponse::internal_error(format!(\"failed: {e}\"))",
            "{ return Err(x)?; }",
        ] {
            assert!(fails_src(src), "{src}");
        }
        for src in [
            "Ok(())",
            "{ return Ok(StatusCode::OK); }",
            "continue",
            "Ok(code)",
            "{ tx.rollback(); }",
            "ApiResponse::ok(\"added\")",
        ] {
            assert!(!fails_src(src), "{src}");
        }
    }

    #[test]
    fn a_branch_answers_nothing_with_none_or_false() {
        let nothing_src =
            |src: &str| answers_nothing(&syn::parse_str::<Expr>(src).expect("an expression"));
        for src in [
            "{ cleanup().await?; return Ok(None); }",
            "return None",
            "{ return false; }",
            "{ tx.commit().await?; return Ok(false); }",
        ] {
            assert!(nothing_src(src), "{src}");
        }
        for src in [
            "{ return Ok(Some(code)); }",
            "{ return Ok(VerifyResult::Ok); }",
            "{ delete().await?; None }",
            "Ok(None)",
            "{ false }",
        ] {
            assert!(!nothing_src(src), "{src}");
        }
    }
}
