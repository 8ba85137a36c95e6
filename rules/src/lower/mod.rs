//! Lowering: a parsed `syn::File` into a [`FileIr`] (item facts plus one effect trace per fn).
//!
//! Lowering never fails: any syntax it does not model is skipped (its nested calls are still
//! visited where cheap), and nesting deeper than [`crate::parse::MAX_DEPTH`] is left opaque.

mod body;
mod macros;
mod types;

use crate::ir::{Body, FileIr, Sp};
use crate::parse::LineIndex;
use crate::sql;
use syn::{Attribute, FnArg, ImplItem, Item, Pat, Signature, TraitItem, UseTree};

pub use types::type_ref;

/// Lowers a parsed file.
pub fn lower_file(file: &syn::File, lines: &LineIndex<'_>) -> FileIr {
    let mut out = FileIr::default();
    let mut cx = ItemCx {
        lines,
        out: &mut out,
        depth: 0,
    };
    for item in &file.items {
        cx.item(item, None);
    }
    out
}

struct ItemCx<'a, 'b> {
    lines: &'a LineIndex<'b>,
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
                    .and_then(|(p, _)| p.segments.last())
                    .map(|s| s.ident.to_string());
                if let (Some(t), Some(ty)) = (&trait_name, &self_ty) {
                    self.out.facts.trait_impls.push((t.clone(), ty.clone()));
                }
                for it in &imp.items {
                    match it {
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
                let name = t.ident.to_string();
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
                    let name = m.ident.to_string();
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
                        .map(|i| i.to_string())
                        .unwrap_or_else(|| i.to_string());
                    fields.push((name, type_ref(&f.ty)));
                }
                self.out.facts.structs.push((s.ident.to_string(), fields));
            }
            Item::Const(c) => self.konst(&c.ident, &c.expr),
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
            }) => s.value(),
            syn::Expr::Macro(m) if m.mac.path.is_ident("concat") => {
                macros::concat_literals(&m.mac.tokens)
            }
            _ => return,
        };
        if let Some(info) = sql::classify(&text) {
            self.out.facts.sql_consts.push((ident.to_string(), info));
        } else if text.len() <= 96 {
            self.out.facts.str_consts.push((ident.to_string(), text));
        }
    }

    fn use_tree(&mut self, tree: &UseTree, prefix: &mut Vec<String>) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    if let Some(last) = prefix.last() {
                        self.out.facts.uses.push((last.clone(), prefix.join("::")));
                    }
                } else {
                    let mut full = prefix.join("::");
                    if !full.is_empty() {
                        full.push_str("::");
                    }
                    full.push_str(&name);
                    self.out.facts.uses.push((name, full));
                }
            }
            UseTree::Rename(r) => {
                let mut full = prefix.join("::");
                if !full.is_empty() {
                    full.push_str("::");
                }
                full.push_str(&r.ident.to_string());
                self.out.facts.uses.push((r.rename.to_string(), full));
            }
            UseTree::Glob(_) => {}
            UseTree::Group(g) => {
                for t in &g.items {
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
        let ident = sig.ident.to_string();
        let name = match self_ty {
            Some(t) => format!("{t}::{ident}"),
            None => ident.clone(),
        };
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(_) => {
                    if let Some(t) = self_ty {
                        params.push(("self".to_string(), vec![t.to_string()]));
                    }
                }
                FnArg::Typed(pt) => {
                    let ty = type_ref(&pt.ty);
                    let mut names = Vec::new();
                    pat_names(&pt.pat, &mut names);
                    for n in names {
                        params.push((n, ty.clone()));
                    }
                }
            }
        }
        let ret = match &sig.output {
            syn::ReturnType::Default => Vec::new(),
            syn::ReturnType::Type(_, t) => type_ref(t),
        };
        let (fenced, idempotent) = guard_attrs(attrs);
        let sp: Sp = self.lines.sp(sig.ident.span(), sig.ident.span());
        let events = body::lower_block(self.lines, block, &params);
        self.out.bodies.push(Body {
            name,
            ident,
            self_ty: self_ty.map(str::to_string),
            trait_name: trait_name.map(str::to_string),
            sp,
            is_async: sig.asyncness.is_some(),
            fenced,
            idempotent,
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

/// `#[fenced(..)]` / `#[idempotent(..)]` (any path ending so) whose arguments parse with the
/// shared grammar.
fn guard_attrs(attrs: &[Attribute]) -> (bool, bool) {
    let mut fenced = false;
    let mut idempotent = false;
    for a in attrs {
        let Some(last) = a.path().segments.last() else {
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
            && staleguard_grammar::idempotent::parse(tokens).is_ok()
        {
            idempotent = true;
        }
    }
    (fenced, idempotent)
}

/// Names bound by a pattern.
pub(crate) fn pat_names(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(p) => {
            out.push(p.ident.to_string());
            if let Some((_, sub)) = &p.subpat {
                pat_names(sub, out);
            }
        }
        Pat::Reference(r) => pat_names(&r.pat, out),
        Pat::Type(t) => pat_names(&t.pat, out),
        Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_names(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_names(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| pat_names(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| pat_names(p, out)),
        Pat::Or(o) => {
            if let Some(p) = o.cases.first() {
                pat_names(p, out)
            }
        }
        Pat::Paren(p) => pat_names(&p.pat, out),
        _ => {}
    }
}
