//! The first and last tokens of paths, patterns and expressions, found without building a
//! token stream.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, Member, Pat};

pub(super) fn first_span(p: &syn::Path) -> Span {
    p.segments
        .first()
        .map(|s| s.ident.span())
        .unwrap_or_else(Span::call_site)
}

pub(super) fn first_pat_span(p: &Pat) -> Span {
    match p {
        Pat::Ident(i) => i.ident.span(),
        Pat::Guard(g) => first_pat_span(&g.pat),
        Pat::Path(p) => first_span(&p.path),
        Pat::TupleStruct(t) => first_span(&t.path),
        Pat::Struct(s) => first_span(&s.path),
        Pat::Wild(w) => w.underscore_token.span,
        _ => p.span(),
    }
}

/// The left-most token of an expression, without building a token stream.
pub(super) fn start_span(e: &Expr) -> Span {
    match e {
        Expr::Path(p) => first_span(&p.path),
        Expr::Call(c) => start_span(&c.func),
        Expr::MethodCall(m) => start_span(&m.receiver),
        Expr::Field(f) => start_span(&f.base),
        Expr::Await(a) => start_span(&a.base),
        Expr::Try(t) => start_span(&t.expr),
        Expr::Macro(m) => first_span(&m.mac.path),
        Expr::Lit(l) => l.lit.span(),
        Expr::Reference(r) => r.and_token.span,
        Expr::Unary(u) => start_span(&u.expr),
        Expr::Paren(p) => p.paren_token.span.open(),
        Expr::Binary(b) => start_span(&b.left),
        Expr::Index(i) => start_span(&i.expr),
        Expr::Cast(c) => start_span(&c.expr),
        Expr::Struct(s) => first_span(&s.path),
        Expr::Async(a) => a.async_token.span,
        Expr::Closure(c) => c.inputs_begin.span,
        Expr::Block(b) => b.block.brace_token.span.open(),
        _ => Span::call_site(),
    }
}

/// The right-most token of an expression, without building a token stream.
pub(super) fn end_span(e: &Expr) -> Span {
    match e {
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.span())
            .unwrap_or_else(Span::call_site),
        Expr::Call(c) => c.paren_token.span.close(),
        Expr::MethodCall(m) => m.paren_token.span.close(),
        Expr::Field(f) => match &f.member {
            Member::Named(i) => i.span(),
            Member::Unnamed(i) => i.span,
        },
        Expr::Await(a) => a.await_token.span,
        Expr::Try(t) => t.question_token.span,
        Expr::Macro(m) => m.mac.bang_token.span,
        Expr::Lit(l) => l.lit.span(),
        Expr::Reference(r) => end_span(&r.expr),
        Expr::Unary(u) => end_span(&u.expr),
        Expr::Paren(p) => p.paren_token.span.close(),
        Expr::Binary(b) => end_span(&b.right),
        Expr::Index(i) => i.bracket_token.span.close(),
        Expr::Let(l) => end_span(&l.expr),
        Expr::Block(b) => b.block.brace_token.span.close(),
        Expr::Struct(s) => s.brace_token.span.close(),
        _ => start_span(e),
    }
}
