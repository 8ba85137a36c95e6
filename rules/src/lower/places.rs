//! Places and literals read by an expression: dotted places (`order.status`, `self.db`), the
//! places an expression reads, its short string literals and a struct literal's fields.

use super::Seq;
use super::macros;
use crate::apis;
use crate::ir::StructLit;
use crate::name::Name;
use syn::{Block, Expr, Member, Stmt};

/// One segment of a place: an identifier, or a tuple field's index.
#[derive(Clone, Copy)]
pub(super) enum Seg<'e> {
    Ident(&'e syn::Ident),
    Index(u32),
}

impl std::fmt::Display for Seg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seg::Ident(i) => std::fmt::Display::fmt(i, f),
            Seg::Index(n) => std::fmt::Display::fmt(n, f),
        }
    }
}

/// Visits, in order, the segments of the place `e` is (`a`, `self.db`, `job.payload.id`; `*x`
/// and `&x` see through) and says whether it is one. Nothing is visited when it is not. The one
/// walk behind [`place_parts`], [`place_head`] and [`PlaceText`].
pub(super) fn place_segments<'e, F: FnMut(Seg<'e>)>(e: &'e Expr, visit: &mut F) -> bool {
    match e {
        Expr::Path(p) if p.qself.is_none() => {
            p.path
                .segments
                .iter()
                .for_each(|s| visit(Seg::Ident(&s.ident)));
            true
        }
        Expr::Field(f) => {
            if !place_segments(&f.base, visit) {
                return false;
            }
            visit(match &f.member {
                Member::Named(i) => Seg::Ident(i),
                Member::Unnamed(i) => Seg::Index(i.index),
            });
            true
        }
        Expr::Unary(u) => place_segments(&u.expr, visit),
        Expr::Reference(r) => place_segments(&r.expr, visit),
        Expr::Paren(p) => place_segments(&p.expr, visit),
        Expr::Group(g) => place_segments(&g.expr, visit),
        _ => false,
    }
}

/// The place `e` is, as its parts.
pub(super) fn place_parts(e: &Expr) -> Option<Vec<Name>> {
    let mut parts = Vec::new();
    place_segments(e, &mut |s| {
        parts.push(match s {
            Seg::Ident(i) => Name::display(i),
            Seg::Index(n) => Name::display(&n),
        })
    })
    .then_some(parts)
}

/// The first identifier and the number of segments of the place `e` is, without building it.
pub(super) fn place_head(e: &Expr) -> Option<(&syn::Ident, usize)> {
    let (mut first, mut n) = (None, 0);
    let is_place = place_segments(e, &mut |s| {
        if let (0, Seg::Ident(i)) = (n, s) {
            first = Some(i);
        }
        n += 1;
    });
    first.filter(|_| is_place).map(|i| (i, n))
}

/// Writes a place as its parts joined with `.`, as `Name::join(&place_parts(e), ".")` would.
pub(super) struct PlaceText<'a>(&'a Expr);
impl std::fmt::Display for PlaceText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut result = Ok(());
        let mut sep = "";
        place_segments(self.0, &mut |s| {
            if result.is_ok() {
                result = f
                    .write_str(sep)
                    .and_then(|()| std::fmt::Display::fmt(&s, f));
                sep = ".";
            }
        });
        result
    }
}

pub(super) fn member(m: &Member) -> Name {
    match m {
        Member::Named(i) => Name::display(i),
        Member::Unnamed(i) => Name::display(&i.index),
    }
}

pub(super) fn place(e: &Expr) -> Option<Name> {
    match e {
        Expr::Index(i) => place(&i.expr),
        Expr::MethodCall(m) => place(&m.receiver),
        _ => place_parts(e).map(|p| Name::join(&p, ".")),
    }
}

/// Dotted places read by an expression (`order.status`, `tx`, `self.db`).
pub(super) fn paths(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if depth > 48 || out.len() > 64 {
        return;
    }
    if !matches!(e, Expr::Unary(_) | Expr::Reference(_))
        && let Some((first, len)) = place_head(e)
    {
        // A local (`order`), a field of one (`order.id`, `self.db`), or a lowercase module
        // path; `Status::Pending` is a value, not a place. The text starts with the head.
        let s = if len == 1 {
            Name::display(first)
        } else {
            Name::display(&PlaceText(e))
        };
        let lower_head = || {
            s.chars()
                .next()
                .is_some_and(|c| c.is_lowercase() || c == '_')
        };
        // A module imported under a capitalised alias (`use schema::events::dsl as Events;`,
        // then `Events::events`): the path ends in a lowercase item, not a variant.
        // (The item's name is read from the place text already built, not allocated again.)
        let aliased_module = || {
            matches!(e, Expr::Path(p) if p.qself.is_none()
            && p.path.segments.len() == 2
            && p.path.segments.last_item().is_some_and(|seg| seg.arguments.is_none()))
                && s.rsplit('.')
                    .next()
                    .is_some_and(|item| item.starts_with(|c: char| c.is_lowercase()))
        };
        if (len == 1 || lower_head() || aliased_module()) && !out.contains(&s) {
            out.push(s);
        }
        return;
    }
    let d = depth + 1;
    match e {
        Expr::MethodCall(m) => {
            paths(&m.receiver, out, d);
            m.args.each().for_each(|a| paths(a, out, d));
        }
        Expr::Call(c) => c.args.each().for_each(|a| paths(a, out, d)),
        Expr::Await(a) => paths(&a.base, out, d),
        Expr::Try(t) => paths(&t.expr, out, d),
        Expr::Binary(b) => {
            paths(&b.left, out, d);
            paths(&b.right, out, d);
        }
        Expr::Unary(u) => paths(&u.expr, out, d),
        Expr::Reference(r) => paths(&r.expr, out, d),
        Expr::Paren(p) => paths(&p.expr, out, d),
        Expr::Group(g) => paths(&g.expr, out, d),
        Expr::Cast(c) => paths(&c.expr, out, d),
        Expr::Field(f) => paths(&f.base, out, d),
        Expr::Index(i) => {
            paths(&i.expr, out, d);
            paths(&i.index, out, d);
        }
        Expr::Let(l) => paths(&l.expr, out, d),
        Expr::Tuple(t) => t.elems.each().for_each(|a| paths(a, out, d)),
        Expr::Array(t) => t.elems.each().for_each(|a| paths(a, out, d)),
        Expr::Struct(s) => s.fields.each().for_each(|f| paths(&f.expr, out, d)),
        Expr::Closure(c) => paths(&c.body, out, d),
        Expr::Block(b) => block_paths(&b.block, out, d),
        Expr::Async(b) => block_paths(&b.block, out, d),
        Expr::If(i) => {
            paths(&i.cond, out, d);
            block_paths(&i.then_branch, out, d);
            if let Some((_, e)) = &i.else_branch {
                paths(e, out, d);
            }
        }
        Expr::Match(m) => {
            paths(&m.expr, out, d);
            for arm in &m.arms {
                paths(&arm.body, out, d);
            }
        }
        Expr::Macro(m) => {
            macros::token_paths(&m.mac.tokens, out);
            // Inline format arguments: `format!("hold:{seat_id}")`.
            if let Some(lit) = macros::first_literal_text(&m.mac.tokens) {
                macros::inline_args(&lit, out);
            }
        }
        Expr::Range(r) => {
            if let Some(x) = &r.start {
                paths(x, out, d);
            }
            if let Some(x) = &r.end {
                paths(x, out, d);
            }
        }
        _ => {}
    }
}

pub(super) fn block_paths(b: &Block, out: &mut Vec<Name>, depth: u32) {
    for s in &b.stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(i) = &l.init {
                    paths(&i.expr, out, depth);
                }
            }
            Stmt::Expr(e, _) => paths(e, out, depth),
            Stmt::Macro(m) => macros::token_paths(&m.mac.tokens, out),
            Stmt::Item(_) => {}
        }
    }
}

/// Name literals in an expression (and the literal of `format!`-like macros).
pub(super) fn strings(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if depth > 32 || out.len() > 16 {
        return;
    }
    let d = depth + 1;
    match e {
        Expr::Lit(l) => {
            if let syn::Lit::Str(s) = &l.lit {
                out.push(Name::from(s.value()));
            }
        }
        Expr::Macro(m) => {
            let name = super::last_segment(&m.mac.path);
            if (macros::is_format_like(&name) || name == "concat")
                && let Some(s) = macros::first_literal(&m.mac.tokens)
            {
                // A row lock added by an argument (`{}` filled with `"FOR UPDATE"` when asked).
                if s.contains("SELECT") && macros::has_row_lock_argument(&m.mac.tokens) {
                    out.push(Name::from(format!("{s} FOR UPDATE")));
                } else {
                    out.push(s);
                }
            }
        }
        Expr::MethodCall(m) => {
            strings(&m.receiver, out, d);
            m.args.each().for_each(|a| strings(a, out, d));
        }
        Expr::Call(c) => c.args.each().for_each(|a| strings(a, out, d)),
        Expr::Reference(r) => strings(&r.expr, out, d),
        Expr::Paren(p) => strings(&p.expr, out, d),
        Expr::Group(g) => strings(&g.expr, out, d),
        Expr::Await(a) => strings(&a.base, out, d),
        Expr::Try(t) => strings(&t.expr, out, d),
        Expr::Binary(b) => {
            strings(&b.left, out, d);
            strings(&b.right, out, d);
        }
        Expr::Array(a) => a.elems.each().for_each(|x| strings(x, out, d)),
        Expr::Tuple(a) => a.elems.each().for_each(|x| strings(x, out, d)),
        _ => {}
    }
}

pub(super) fn struct_lit(e: &Expr) -> Option<StructLit> {
    let mut lit = inner_struct_lit(e)?;
    lit.whole = whole_struct_lit(e);
    Some(lit)
}

/// Is `e` itself a struct literal, behind references and parentheses at most?
fn whole_struct_lit(e: &Expr) -> bool {
    match e {
        Expr::Struct(_) => true,
        Expr::Reference(r) => whole_struct_lit(&r.expr),
        Expr::Paren(p) => whole_struct_lit(&p.expr),
        _ => false,
    }
}

fn inner_struct_lit(e: &Expr) -> Option<StructLit> {
    match e {
        Expr::Struct(s) => Some(StructLit {
            ty: super::last_segment(&s.path),
            module: s
                .path
                .segments
                .len()
                .checked_sub(2)
                .and_then(|i| s.path.segments.iter().nth(i))
                .map(|seg| Name::display(&seg.ident)),
            fields: s.fields.each().map(|f| member(&f.member)).collect(),
            values: s.fields.each().map(|f| value_text(&f.expr, true)).collect(),
            whole: false,
        }),
        Expr::Call(c) => c.args.each().find_map(inner_struct_lit),
        Expr::MethodCall(m) => {
            inner_struct_lit(&m.receiver).or_else(|| m.args.each().find_map(inner_struct_lit))
        }
        Expr::Reference(r) => inner_struct_lit(&r.expr),
        Expr::Paren(p) => inner_struct_lit(&p.expr),
        Expr::Await(a) => inner_struct_lit(&a.base),
        Expr::Try(t) => inner_struct_lit(&t.expr),
        _ => None,
    }
}

/// The value of an expression when it is a constant: a short string literal, an enum variant or
/// a const (`Status::Paid`, `PROCESSING`, `job_state::RUNNING`), seen through `&`, parentheses,
/// casts, conversions (`.to_string()`, `.into()`, `.as_str()`) and one-argument wrappers
/// (`Set(..)`, `Some(..)`, `Value::from(..)`). Booleans and numbers count only with `scalars`
/// (an assignment's value; as an argument they are too common to keep).
pub(super) fn value_text(e: &Expr, scalars: bool) -> Option<Name> {
    match e {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => {
                let v = s.value();
                (v.len() <= 48).then(|| Name::from(v))
            }
            syn::Lit::Bool(b) if scalars => Some(Name::new(if b.value { "true" } else { "false" })),
            syn::Lit::Int(i) if scalars => Some(Name::new(i.base10_digits())),
            _ => None,
        },
        // `Set(None)`: a column cleared, as SQL's `NULL` is.
        Expr::Path(p) if scalars && p.qself.is_none() && p.path.is_ident("None") => {
            Some(Name::new("null"))
        }
        Expr::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last_item()?;
            let text = last.ident.to_string();
            let constant = text.chars().next().is_some_and(char::is_uppercase)
                && (p.path.segments.len() > 1 || text.chars().all(|c| !c.is_lowercase()));
            constant.then(|| Name::join(&super::segments(&p.path).collect::<Vec<_>>(), "::"))
        }
        Expr::Reference(r) => value_text(&r.expr, scalars),
        Expr::Paren(p) => value_text(&p.expr, scalars),
        Expr::Group(g) => value_text(&g.expr, scalars),
        Expr::Cast(c) => value_text(&c.expr, scalars),
        Expr::MethodCall(m)
            if m.args.is_empty()
                && apis::VALUE_PASSTHROUGH_STEPS.contains(&Name::display(&m.method).as_str()) =>
        {
            value_text(&m.receiver, scalars)
        }
        // `Utc::now()`, `Local::now()`, `OffsetDateTime::now_utc()`: the current time, as SQL's
        // `now()` is.
        Expr::Call(c)
            if scalars
                && c.args.is_empty()
                && matches!(&*c.func, Expr::Path(f)
                    if f.path.segments.len() >= 2
                        && f.path.segments.last_item().is_some_and(|s| s.ident == "now" || s.ident == "now_utc")) =>
        {
            Some(Name::new(crate::ir::NOW_VALUE))
        }
        Expr::Call(c) if c.args.len() == 1 => {
            let Expr::Path(f) = &*c.func else {
                return None;
            };
            // sea-query's `Expr::value(false)` / `Expr::val(..)`: a column's new value (in
            // `col_expr(Column::Occupied, ..)`), so booleans and numbers count.
            let mut segs = f.path.segments.iter().map(|s| &s.ident);
            if let (Some(ty), Some(func), None) = (segs.next(), segs.next(), segs.next())
                && ty == "Expr"
                && (func == "value" || func == "val")
            {
                return c.args.first_item().and_then(|a| value_text(a, true));
            }
            let wrapper = f.path.segments.last_item().is_some_and(|s| {
                s.ident
                    .to_string()
                    .chars()
                    .next()
                    .is_some_and(char::is_uppercase)
                    || apis::VALUE_WRAPPER_FNS.iter().any(|w| s.ident == w)
            });
            wrapper
                .then(|| c.args.first_item())
                .flatten()
                .and_then(|a| value_text(a, scalars))
        }
        _ => None,
    }
}

/// The constant value of each element of an array argument (`&[&"running", &id]`), when one of
/// them is a constant.
pub(super) fn array_items(e: &Expr) -> Vec<Option<Name>> {
    match e {
        Expr::Reference(r) => array_items(&r.expr),
        Expr::Array(a) => {
            let items: Vec<Option<Name>> = a.elems.each().map(|x| value_text(x, true)).collect();
            if items.iter().any(Option::is_some) {
                items
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}
