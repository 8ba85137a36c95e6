//! Lowering: a parsed `syn::File` into a [`FileIr`] (item facts plus one effect trace per fn).
//!
//! Lowering never fails: any syntax it does not model is skipped (its nested calls are still
//! visited where cheap), and nesting deeper than [`crate::parse::MAX_DEPTH`] is left opaque.

use crate::name::Name;
mod body;
mod macros;
mod types;

use crate::ir::{Body, FileIr, Sp};
use crate::parse::LineIndex;
use crate::sql;
use syn::{Attribute, FnArg, ImplItem, Item, Pat, Signature, TraitItem, UseTree};

pub use types::type_ref;

/// Allocation-free walks of a `syn::punctuated::Punctuated`. Its own `iter`, `first` and `last`
/// (and `for x in &list`) box a trait object on every call, and lowering walks a path or an
/// argument list at nearly every expression: those boxes were the largest share of its
/// temporary allocations. These go through `pairs`, which allocates nothing.
pub(crate) trait Seq<T> {
    fn each<'a>(&'a self) -> impl DoubleEndedIterator<Item = &'a T> + ExactSizeIterator
    where
        T: 'a;
    fn first_item(&self) -> Option<&T> {
        self.each().next()
    }
    fn last_item(&self) -> Option<&T> {
        self.each().next_back()
    }
}

impl<T, P> Seq<T> for syn::punctuated::Punctuated<T, P> {
    fn each<'a>(&'a self) -> impl DoubleEndedIterator<Item = &'a T> + ExactSizeIterator
    where
        T: 'a,
    {
        self.pairs().map(syn::punctuated::Pair::into_value)
    }
}

/// Parses `text` as a file and lowers it item by item: each item is lowered and dropped right
/// after it is parsed, so no more than one item's tree is ever alive beside the file's token
/// buffer (the CLI's `-j 2` peak on the five bench repos fell from 79-86 MB to 69-71 MB).
/// Accepts exactly what `syn::parse_file` accepts (byte order mark, shebang line) and fails with
/// the same error; a failure discards what was lowered.
pub fn parse_and_lower(
    text: &str,
    lines: &LineIndex<'_>,
    knowledge: &crate::Knowledge,
) -> syn::Result<FileIr> {
    use syn::parse::Parser;
    let content = strip_file_prefix(text);
    let parser = |input: syn::parse::ParseStream<'_>| {
        let mut out = FileIr::default();
        let mut cx = ItemCx {
            lines,
            knowledge,
            out: &mut out,
            depth: 0,
        };
        input.call(Attribute::parse_inner)?;
        while !input.is_empty() {
            let item: Item = input.parse()?;
            cx.item(&item, None);
        }
        // Imports sorted by alias (stably: a later import of the same name stays later), so the
        // crate facts can search them without building a table.
        out.facts.uses.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    };
    parser.parse_str(content)
}

/// What `syn::parse_file` strips before parsing: a byte order mark, then a shebang line (`#!`
/// not followed, after whitespace and non-doc comments, by `[`, which would open an inner
/// attribute).
/// The shebang's newline is kept so line numbers stay true.
fn strip_file_prefix(text: &str) -> &str {
    let content = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = content.strip_prefix("#!") else {
        return content;
    };
    if skip_trivia(rest).starts_with('[') {
        return content;
    }
    match content.find('\n') {
        Some(i) => &content[i..],
        None => "",
    }
}

/// `text` after leading whitespace and non-doc comments, as syn decides whether `#!` opens a
/// shebang: doc comments (`///`, `//!`, `/**`, `/*!`) are tokens and stop the skip, and so does an
/// unterminated block comment; left-to-right and right-to-left marks count as whitespace.
fn skip_trivia(mut text: &str) -> &str {
    'skip: while let Some(&byte) = text.as_bytes().first() {
        if byte == b'/' {
            let doc_line = text.starts_with("///") && !text.starts_with("////");
            let doc_block = text.starts_with("/**") && !text.starts_with("/***");
            if text.starts_with("//") && !doc_line && !text.starts_with("//!") {
                match text.find('\n') {
                    Some(i) => {
                        text = &text[i + 1..];
                        continue;
                    }
                    None => return "",
                }
            } else if text.starts_with("/**/") {
                text = &text[4..];
                continue;
            } else if text.starts_with("/*") && !doc_block && !text.starts_with("/*!") {
                let bytes = text.as_bytes();
                let (mut depth, mut i) = (0usize, 0);
                while i + 1 < bytes.len() {
                    match (bytes[i], bytes[i + 1]) {
                        (b'/', b'*') => {
                            depth += 1;
                            i += 1;
                        }
                        (b'*', b'/') => {
                            depth -= 1;
                            if depth == 0 {
                                text = &text[i + 2..];
                                continue 'skip;
                            }
                            i += 1;
                        }
                        _ => {}
                    }
                    i += 1;
                }
                return text;
            }
        }
        let Some(ch) = text.chars().next() else {
            break;
        };
        if ch.is_whitespace() || ch == '\u{200e}' || ch == '\u{200f}' {
            text = &text[ch.len_utf8()..];
            continue;
        }
        return text;
    }
    text
}

struct ItemCx<'a, 'b> {
    lines: &'a LineIndex<'b>,
    knowledge: &'a crate::Knowledge,
    out: &'a mut FileIr,
    depth: u32,
}

impl ItemCx<'_, '_> {
    fn item_range(
        &mut self,
        attrs: &[Attribute],
        first: proc_macro2::Span,
        last: proc_macro2::Span,
    ) {
        let start = attrs
            .first()
            .map(|a| a.pound_token.span.start().line)
            .unwrap_or(first.start().line);
        let start = start.min(first.start().line);
        self.out.items.push((start as u32, last.end().line as u32));
    }

    fn item(&mut self, item: &Item, module: Option<&str>) {
        if self.depth > 64 {
            return;
        }
        self.depth += 1;
        match item {
            Item::Fn(f) if is_test(&f.attrs) => {}
            Item::Mod(m) if is_test(&m.attrs) => {}
            Item::Impl(imp) if is_test(&imp.attrs) => {}
            Item::Fn(f) => {
                self.item_range(
                    &f.attrs,
                    f.sig.fn_token.span,
                    f.block.brace_token.span.close(),
                );
                self.body(&f.attrs, &f.sig, &f.block, None, None);
            }
            Item::Impl(imp) => {
                self.item_range(
                    &imp.attrs,
                    imp.impl_token.span,
                    imp.brace_token.span.close(),
                );
                let self_ty = types::type_name(&imp.self_ty);
                let trait_name = imp
                    .trait_
                    .as_ref()
                    .and_then(|(p, _)| p.segments.last_item())
                    .map(|s| Name::display(&s.ident));
                if let (Some(t), Some(ty)) = (&trait_name, &self_ty) {
                    self.out.facts.trait_impls.push((t.clone(), ty.clone()));
                }
                for it in &imp.items {
                    match it {
                        ImplItem::Fn(f) if is_test(&f.attrs) => {}
                        ImplItem::Fn(f) => {
                            self.item_range(
                                &f.attrs,
                                f.sig.fn_token.span,
                                f.block.brace_token.span.close(),
                            );
                            self.body(
                                &f.attrs,
                                &f.sig,
                                &f.block,
                                self_ty.as_deref(),
                                trait_name.as_deref(),
                            );
                        }
                        ImplItem::Const(c) => self.konst(&c.ident, &c.expr),
                        _ => {}
                    }
                }
            }
            Item::Trait(t) => {
                self.item_range(&t.attrs, t.trait_token.span, t.brace_token.span.close());
                let name = Name::display(&t.ident);
                for it in &t.items {
                    if let TraitItem::Fn(f) = it
                        && let Some(block) = &f.default
                    {
                        self.body(&f.attrs, &f.sig, block, Some(&name), Some(&name));
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((brace, items)) = &m.content {
                    self.item_range(&m.attrs, m.mod_token.span, brace.span.close());
                    let name = Name::display(&m.ident);
                    for it in items {
                        self.item(it, Some(&name));
                    }
                }
            }
            Item::Struct(s) => {
                self.item_range(&s.attrs, s.struct_token.span, s.struct_token.span);
                let mut fields = Vec::new();
                for (i, f) in s.fields.iter().enumerate() {
                    let name = f
                        .ident
                        .as_ref()
                        .map(|i| Name::display(i))
                        .unwrap_or_else(|| Name::display(&i));
                    fields.push((name, type_ref(&f.ty)));
                }
                self.out
                    .facts
                    .structs
                    .push((Name::display(&s.ident), fields));
            }
            Item::Const(c) => self.konst(&c.ident, &c.expr),
            Item::Type(t) => self
                .out
                .facts
                .aliases
                .push((Name::display(&t.ident), type_ref(&t.ty))),
            Item::Static(s) => self.konst(&s.ident, &s.expr),
            Item::Use(u) => {
                let mut prefix = Vec::new();
                self.use_tree(&u.tree, &mut prefix);
            }
            _ => {}
        }
        let _ = module;
        self.depth -= 1;
    }

    fn konst(&mut self, ident: &syn::Ident, expr: &syn::Expr) {
        let mut e = expr;
        while let syn::Expr::Reference(r) = e {
            e = &r.expr;
        }
        let text = match e {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Name::from(s.value()),
            syn::Expr::Macro(m) if m.mac.path.is_ident("concat") => {
                macros::concat_literals(&m.mac.tokens)
            }
            _ => return,
        };
        if let Some(info) = sql::classify(&text) {
            self.out.facts.sql_consts.push((Name::display(ident), info));
        } else if text.len() <= 96 {
            self.out.facts.str_consts.push((Name::display(ident), text));
        }
    }

    fn use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<Name>) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(Name::display(&p.ident));
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let name = Name::display(&n.ident);
                if name == "self" {
                    if let Some(last) = prefix.last() {
                        self.out
                            .facts
                            .uses
                            .push((last.clone(), Name::join(prefix, "::")));
                    }
                } else {
                    prefix.push(name.clone());
                    let full = Name::join(prefix, "::");
                    prefix.pop();
                    self.out.facts.uses.push((name, full));
                }
            }
            UseTree::Rename(r) => {
                prefix.push(Name::display(&r.ident));
                let full = Name::join(prefix, "::");
                prefix.pop();
                self.out.facts.uses.push((Name::display(&r.rename), full));
            }
            UseTree::Glob(_) => {}
            UseTree::Group(g) => {
                for t in g.items.each() {
                    self.use_tree(t, prefix);
                }
            }
        }
    }

    fn body(
        &mut self,
        attrs: &[Attribute],
        sig: &Signature,
        block: &syn::Block,
        self_ty: Option<&str>,
        trait_name: Option<&str>,
    ) {
        let ident = Name::display(&sig.ident);

        let mut params = Vec::new();
        let mut mut_self = false;
        for input in sig.inputs.each() {
            match input {
                FnArg::Receiver(r) => {
                    mut_self = r.mutability.is_some()
                        || matches!(r.kind, syn::ReceiverKind::Reference(_, _, Some(_)));
                    if let Some(t) = self_ty {
                        params.push((Name::new("self"), vec![Name::new(t)]));
                    }
                }
                FnArg::Typed(pt) => {
                    let ty = type_ref(&pt.ty);
                    let mut names = Vec::new();
                    pat_names(&pt.pat, &mut names);
                    // The last name takes the type; only the others need a copy.
                    let last = names.pop();
                    for n in names {
                        params.push((n, ty.clone()));
                    }
                    if let Some(n) = last {
                        params.push((n, ty));
                    }
                }
            }
        }
        let ret = match &sig.output {
            syn::ReturnType::Default => Vec::new(),
            syn::ReturnType::Type(_, t) => type_ref(t),
        };
        let (fenced, idempotent, idempotent_key) = guard_attrs(attrs);
        let sp: Sp = self.lines.sp(sig.ident.span(), sig.ident.span());
        let mut events = body::lower_block(self.lines, block, &params);
        if is_inert(&events, self.knowledge) {
            events = keep_call_graph(events);
        }
        self.out.bodies.push(Body {
            ident,
            self_ty: self_ty.map(Name::new),
            trait_name: trait_name.map(Name::new),
            sp,
            is_async: sig.asyncness.is_some(),
            fenced,
            mut_self,
            idempotent,
            idempotent_key,
            params,
            ret,
            events,
        });
        // Nested items (fns declared inside the body) are separate bodies.
        for stmt in &block.stmts {
            if let syn::Stmt::Item(it) = stmt {
                self.item(it, None);
            }
        }
    }
}

/// Test code: `#[test]`, `#[tokio::test]`, `#[sqlx::test]` (any path ending in `test`),
/// `#[rstest]`, `#[test_case(..)]`, and items under `#[cfg(test)]`. It runs alone against
/// throw-away state, so its reads and writes race with nothing.
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        let Some(last) = a.path().segments.last_item() else {
            return false;
        };
        if last.ident == "cfg" {
            return matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test");
        }
        last.ident == "test" || last.ident == "rstest" || last.ident == "test_case"
    })
}

/// `#[fenced(..)]` / `#[idempotent(..)]` (any path ending so) whose arguments parse with the
/// shared grammar, and the idempotent attribute's `key` when it is a place.
fn guard_attrs(attrs: &[Attribute]) -> (bool, bool, Option<Name>) {
    let mut fenced = false;
    let mut idempotent = false;
    let mut key = None;
    for a in attrs {
        let Some(last) = a.path().segments.last_item() else {
            continue;
        };
        let tokens = match &a.meta {
            syn::Meta::List(l) => l.tokens.clone(),
            syn::Meta::Path(_) => proc_macro2::TokenStream::new(),
            syn::Meta::NameValue(_) => continue,
        };
        if last.ident == "fenced" && staleguard_grammar::fenced::parse(tokens.clone()).is_ok() {
            fenced = true;
        } else if last.ident == "idempotent"
            && let Ok(args) = staleguard_grammar::idempotent::parse(tokens)
        {
            idempotent = true;
            key = args.key.and_then(|k| place_of(&k.value));
        }
    }
    (fenced, idempotent, key)
}

/// `a.b.c` (through `&`, `*`, parentheses and `.clone()`-like method calls) as a dotted path.
fn place_of(e: &syn::Expr) -> Option<Name> {
    match e {
        syn::Expr::Path(p) if p.qself.is_none() => {
            let segs: Vec<Name> = p
                .path
                .segments
                .iter()
                .map(|s| Name::display(&s.ident))
                .collect();
            Some(segs.join("::").into())
        }
        syn::Expr::Field(f) => {
            let base = place_of(&f.base)?;
            let member = match &f.member {
                syn::Member::Named(i) => i.to_string(),
                syn::Member::Unnamed(i) => i.index.to_string(),
            };
            Some(format!("{base}.{member}").into())
        }
        syn::Expr::Reference(r) => place_of(&r.expr),
        syn::Expr::Unary(u) => place_of(&u.expr),
        syn::Expr::Paren(p) => place_of(&p.expr),
        syn::Expr::MethodCall(m) if m.args.is_empty() => place_of(&m.receiver),
        _ => None,
    }
}

/// Names bound by a pattern.
pub(crate) fn pat_names(pat: &Pat, out: &mut Vec<Name>) {
    match pat {
        Pat::Ident(p) => {
            out.push(Name::display(&p.ident));
            if let Some((_, sub)) = &p.subpat {
                pat_names(sub, out);
            }
        }
        Pat::Reference(r) => pat_names(&r.pat, out),
        Pat::Type(t) => pat_names(&t.pat, out),
        Pat::Tuple(t) => t.elems.each().for_each(|p| pat_names(p, out)),
        Pat::TupleStruct(t) => t.elems.each().for_each(|p| pat_names(p, out)),
        Pat::Struct(s) => s.fields.each().for_each(|f| pat_names(&f.pat, out)),
        Pat::Slice(s) => s.elems.each().for_each(|p| pat_names(p, out)),
        Pat::Or(o) => {
            if let Some(p) = o.cases.first_item() {
                pat_names(p, out)
            }
        }
        Pat::Paren(p) => pat_names(&p.pat, out),
        _ => {}
    }
}

/// Step names that can carry an effect some rule or summary looks at (locks, transactions,
/// queries, spawns, sleeps, schedules, redis and broker commands, remote sends).
const EFFECT_STEPS: &[&str] = &[
    "lock",
    "lock_owned",
    "write",
    "read",
    "write_owned",
    "read_owned",
    "blocking_lock",
    "try_lock",
    "begin",
    "begin_with",
    "transaction",
    "transaction_with",
    "build_transaction",
    "commit",
    "rollback",
    "execute",
    "fetch",
    "fetch_one",
    "fetch_optional",
    "fetch_all",
    "query",
    "query_one",
    "query_opt",
    "query_as",
    "query_scalar",
    "batch_execute",
    "exec",
    "one",
    "all",
    "first",
    "load",
    "get_result",
    "get_results",
    "prepare",
    "spawn",
    "spawn_local",
    "spawn_blocking",
    "sleep",
    "sleep_until",
    "insert_at",
    "schedule",
    "schedule_in",
    "schedule_at",
    "enqueue_in",
    "enqueue_at",
    "push_delayed",
    "set_nx",
    "del",
    "get_del",
    "getdel",
    "set_ex",
    "query_async",
    "invoke_async",
    "publish",
    "basic_publish",
    "send",
    "send_request",
    "request",
    "cmd",
    "update",
    "insert",
    "delete",
    "save",
    "update_many",
    "delete_many",
    "find_by_id",
    "find",
    "transaction_async",
    "run",
    "tick",
    "get",
    "set",
    "exists",
    "incr",
    "expire",
    "unlink",
    "hset",
    "hget",
];

/// A body with no `.await`, no SQL and no effect-carrying call: sync library code. No rule can
/// fire inside it; only its call edges matter (for summaries).
fn is_inert(events: &[crate::ir::Event], k: &crate::Knowledge) -> bool {
    events.iter().all(|e| match &e.kind {
        crate::ir::Ev::Call(c) => c.steps.iter().all(|s| {
            !s.awaited
                && !EFFECT_STEPS.contains(&s.name.trim_end_matches('!'))
                && !k.lists_ident(&s.name)
                && s.args.iter().all(|a| a.sql().is_none())
        }),
        crate::ir::Ev::Bind(b) => b.sql().is_none(),
        _ => true,
    })
}

/// Keeps only what summaries and receiver resolution use: calls (without argument details) and
/// `let` bindings, with event indices remapped; and the tests of the receiver's own state
/// (`if self.stage != from`), which tell a caller that the method re-checks under its guard.
fn keep_call_graph(events: Vec<crate::ir::Event>) -> Vec<crate::ir::Event> {
    use crate::ir::Ev;
    let mut map = vec![u32::MAX; events.len()];
    let mut out = Vec::new();
    for (i, e) in events.into_iter().enumerate() {
        match e.kind {
            Ev::Call(mut c) => {
                for s in c.steps.iter_mut() {
                    s.args = Default::default();
                }
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: Ev::Call(c),
                });
            }
            Ev::Bind(mut b) => {
                b.calls = b
                    .calls
                    .iter()
                    .filter_map(|&c| map.get(c as usize).copied().filter(|&m| m != u32::MAX))
                    .collect();
                // Only the declared type still matters (receiver classes).
                b.extra = b.extra.and_then(|x| {
                    x.ty.map(|ty| {
                        Box::new(crate::ir::BindExtra {
                            ty: Some(ty),
                            ..Default::default()
                        })
                    })
                });
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: Ev::Bind(b),
                });
            }
            Ev::Cond(mut t) if t.deps.iter().any(|d| d == "self" || d.starts_with("self.")) => {
                t.calls = t
                    .calls
                    .iter()
                    .filter_map(|&c| map.get(c as usize).copied().filter(|&m| m != u32::MAX))
                    .collect();
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: Ev::Cond(t),
                });
            }
            _ => {}
        }
    }
    out.shrink_to_fit();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(text: &str) -> syn::Result<FileIr> {
        let lines = LineIndex::new(text);
        parse_and_lower(text, &lines, &crate::Knowledge::default())
    }

    #[test]
    fn file_prefixes_are_stripped_as_syn_does() {
        assert_eq!(strip_file_prefix("\u{feff}fn a() {}"), "fn a() {}");
        assert_eq!(
            strip_file_prefix("#!/usr/bin/env run\nfn a() {}"),
            "\nfn a() {}"
        );
        assert_eq!(strip_file_prefix("#!/bin/x"), "");
        // `#!` opening an inner attribute, even after comments, is not a shebang.
        assert_eq!(strip_file_prefix("#![allow(x)]"), "#![allow(x)]");
        let commented = "#! /* a /* nested */ one */ // and a line\n [allow(x)] fn a() {}";
        assert_eq!(strip_file_prefix(commented), commented);
        for text in [
            "\u{feff}#!/bin/x\nfn a() { b(); }",
            "#![allow(x)]\nfn a() { b(); }",
            commented,
        ] {
            let ir = lowered(text).expect("parses");
            assert_eq!(ir.bodies.len(), 1, "{text:?}");
            assert!(syn::parse_file(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn a_file_parses_exactly_when_syn_parse_file_accepts_it() {
        for text in [
            "#! /// a doc comment is a token\n[allow(x)] fn a() {}",
            "#! //! so is an inner one\n[allow(x)] fn a() {}",
            "#! /**/ [allow(x)] fn a() {}",
            "#! /** doc */ [allow(x)] fn a() {}",
            "#! /* unterminated [allow(x)] fn a() {}",
            "#!\u{200e}[allow(x)] fn a() {}",
            "#!\u{a0}[allow(x)] fn a() {}",
            "#!/bin/x\nfn a() {}",
            "fn a() {}\nfn b( {}",
            "fn a() {} }",
            "#![x] fn a() {} #![y]",
            "struct S",
            "",
            "// only a comment",
        ] {
            let ours = lowered(text)
                .map(|ir| ir.bodies.len())
                .map_err(|e| e.to_string());
            let syns = syn::parse_file(text)
                .map(|f| f.items.iter().filter(|i| matches!(i, Item::Fn(_))).count())
                .map_err(|e| e.to_string());
            assert_eq!(ours, syns, "{text:?}");
        }
    }
}
