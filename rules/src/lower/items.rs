//! Lowering a file's items: fns, impls (with their self type and trait), traits' default
//! methods, modules, structs with their field types, consts holding SQL or short strings, type
//! aliases and `use` aliases; `#[fenced]` / `#[idempotent]` attributes read with the shared
//! grammar; test code skipped.

use super::types::{self, type_ref};
use super::{Seq, body, macros, pat_names, prefilter};
use crate::apis;
use crate::ir::{Body, FileIr, Sp};
use crate::kb::names;
use crate::name::Name;
use crate::parse::LineIndex;
use crate::sql;
use syn::{Attribute, FnArg, ImplItem, Item, Signature, TraitItem, UseTree};

/// Lowers a file's items: what each contributes to the crate facts (structs and their field
/// types, `use` aliases, consts holding SQL, trait impls, type aliases), the line range of each
/// (for item-level suppressions), and one [`Body`] per fn, method or trait default method.
pub(super) struct ItemLowerer<'a, 'b> {
    pub(super) lines: &'a LineIndex<'b>,
    pub(super) knowledge: &'a crate::Knowledge,
    pub(super) out: &'a mut FileIr,
    /// Item nesting (modules in modules, fns in fns), bounded at 64.
    pub(super) depth: u32,
}

impl ItemLowerer<'_, '_> {
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
        let head = first.start().line;
        let start = start.min(head);
        self.out
            .items
            .push((start as u32, head as u32, last.end().line as u32));
    }

    pub(super) fn item(&mut self, item: &Item, module: Option<&str>) {
        if self.depth > 64 {
            return;
        }
        self.depth += 1;
        match item {
            Item::Fn(f) if is_test(&f.attrs) => {}
            // `#[cfg(test)] mod tests;`: the module's own file is test code too.
            Item::Mod(m) if is_test(&m.attrs) && m.content.is_none() => {
                self.out.facts.mods.push((Name::display(&m.ident), true));
            }
            Item::Mod(m) if is_test(&m.attrs) => {}
            Item::Impl(imp) if is_test(&imp.attrs) => {}
            Item::Fn(f) => {
                self.item_range(
                    &f.attrs,
                    f.sig.fn_token.span,
                    f.block.brace_token.span.close(),
                );
                self.sql_builder(&f.sig.ident, &f.block);
                self.body(&f.attrs, &f.sig, &f.block, None, None, &[]);
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
                let bounds = types::generic_bounds(&imp.generics);
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
                                &bounds,
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
                        self.body(&f.attrs, &f.sig, block, Some(&name), Some(&name), &[]);
                    }
                }
            }
            Item::Mod(m) => {
                if let Some((brace, items)) = &m.content {
                    self.item_range(&m.attrs, m.mod_token.span, brace.span.close());
                    let name = Name::display(&m.ident);
                    self.out.facts.mods.push((name.clone(), false));
                    for it in items {
                        self.item(it, Some(&name));
                    }
                }
            }
            Item::Struct(s) => {
                self.item_range(&s.attrs, s.struct_token.span, s.struct_token.span);
                let bounds = types::generic_bounds(&s.generics);
                let mut fields = Vec::new();
                for (i, f) in s.fields.iter().enumerate() {
                    let name = field_name(f, i);
                    let mut ty = type_ref(&f.ty);
                    types::bind_generics(&mut ty, &bounds);
                    fields.push((name, ty));
                }
                if let Some(table) = diesel_table_name(&s.attrs)
                    .or_else(|| diesel_default_table(&s.attrs, &s.ident.to_string()))
                {
                    fields.push((Name::new(crate::ir::DIESEL_TABLE_FIELD), vec![table]));
                }
                if let Some(table) = sea_orm_table_name(&s.attrs) {
                    fields.push((Name::new(crate::ir::SEA_ORM_TABLE_FIELD), vec![table]));
                }
                self.out
                    .facts
                    .structs
                    .push((Name::display(&s.ident), fields));
            }
            // An enum is kept as a struct whose fields are its variants' (`Smtp.0` of a
            // one-field tuple variant, `Http.client` of a struct variant): what a variant's
            // pattern binds has that field's type. Fields of plain data (numbers, strings,
            // times: never a client worth typing) are left out, and so are the fields of tuple
            // variants of several; an enum left with none is not kept.
            Item::Enum(e) => {
                self.item_range(&e.attrs, e.enum_token.span, e.enum_token.span);
                let bounds = types::generic_bounds(&e.generics);
                let mut fields = Vec::new();
                for v in &e.variants {
                    let tuple = matches!(v.fields, syn::Fields::Unnamed(_));
                    if tuple && v.fields.len() != 1 {
                        continue;
                    }
                    // (A tuple variant here has one field: its index is 0.)
                    for f in v.fields.iter().filter(|f| !types::plain_data(&f.ty)) {
                        let field = field_name(f, 0);
                        let mut ty = type_ref(&f.ty);
                        types::bind_generics(&mut ty, &bounds);
                        fields.push((Name::new(&format!("{}.{field}", v.ident)), ty));
                    }
                }
                // An enum of plain data only (`Status { Open, Closed }`) holds no client: its
                // methods are resolved by name alone, as before enums were kept.
                if !fields.is_empty() {
                    self.out
                        .facts
                        .structs
                        .push((Name::display(&e.ident), fields));
                }
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

    /// A free fn that only builds SQL text (`fn fetch_jobs(schema: &str) -> String {
    /// format!("UPDATE {schema}.job SET ..") }`): its statement is known by the fn's name, like
    /// a const's, wherever the text it returns is used (`query(&dml::fetch_jobs(s))`, a field
    /// `fetch_jobs: dml::fetch_jobs(s)` read as `self.stmt.fetch_jobs`).
    fn sql_builder(&mut self, ident: &syn::Ident, block: &syn::Block) {
        let [syn::Stmt::Expr(e, None)] = block.stmts.as_slice() else {
            return;
        };
        let syn::Expr::Macro(m) = e else { return };
        let Some(name) = m.mac.path.segments.last() else {
            return;
        };
        if name.ident != "format" {
            return;
        }
        if let Some(info) = macros::first_literal(&m.mac.tokens).and_then(|t| sql::classify(&t)) {
            self.out.facts.sql_consts.push((Name::display(ident), info));
        }
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
        impl_bounds: &[(Name, Name)],
    ) {
        let ident = Name::display(&sig.ident);
        // Generic parameters of the fn and of its impl, as the traits they are bound by.
        let mut bounds = types::generic_bounds(&sig.generics);
        bounds.extend(
            impl_bounds
                .iter()
                .filter(|(p, _)| !bounds.iter().any(|(q, _)| q == p))
                .cloned()
                .collect::<Vec<_>>(),
        );

        let mut params = Vec::new();
        let mut mut_self = false;
        let arity = sig
            .inputs
            .each()
            .filter(|i| matches!(i, FnArg::Typed(_)))
            .count()
            .min(u8::MAX as usize) as u8;
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
                    let mut ty = type_ref(&pt.ty);
                    types::bind_generics(&mut ty, &bounds);
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
        let body::Lowered {
            mut events,
            discards,
            step_spans,
            items: nested,
        } = body::lower_block(self.lines, block);
        if prefilter::is_inert(&events, self.knowledge) {
            events = prefilter::keep_call_graph(events);
        } else if !discards.is_empty() || !step_spans.is_empty() {
            // (No rule fires in an inert body, so no fix edits it.)
            self.out.fix_anchors.push(crate::ir::FixAnchors {
                body: self.out.bodies.len() as u32,
                discards: discards.into_boxed_slice(),
                spans: step_spans.into_boxed_slice(),
            });
        }
        self.out.bodies.push(Body {
            ident,
            self_ty: self_ty.map(Name::new),
            trait_name: trait_name.map(Name::new),
            sp,
            fenced,
            mut_self,
            idempotent,
            idempotent_key: idempotent_key.map(Box::new),
            message_route: route_path(attrs).is_some_and(|p| names::is_message_route(&p)),
            routed: route_path(attrs).is_some(),
            arity,
            params: params
                .into_iter()
                .map(|(n, mut t): (Name, crate::ir::TypeRef)| {
                    t.shrink_to_fit();
                    (n, t)
                })
                .collect(),
            ret: ret.into_boxed_slice(),
            events: events.into_boxed_slice(),
        });
        // Nested items (fns declared inside the body, in any of its blocks: `if let Ok(e) = ..
        // { async fn load(..) {..} .. }`) are separate bodies.
        if nested > 0 {
            let mut found = NestedItems(Vec::new());
            syn::visit::Visit::visit_block(&mut found, block);
            for it in found.0 {
                self.item(it, None);
            }
        }
    }
}

/// The items a block declares in it or in any block inside it (not inside those items: each is
/// lowered with its own).
struct NestedItems<'a>(Vec<&'a Item>);

impl<'a> syn::visit::Visit<'a> for NestedItems<'a> {
    fn visit_item(&mut self, item: &'a Item) {
        self.0.push(item);
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
        apis::TEST_ATTRIBUTES.iter().any(|t| last.ident == t)
    })
}

/// The table diesel gives a model that derives `Identifiable` and names none: its struct name
/// in snake case, plural (`CrateOwnerInvitation` is `crate_owner_invitations`'s).
fn diesel_default_table(attrs: &[Attribute], ident: &str) -> Option<Name> {
    let identifiable = attrs.iter().any(|a| {
        a.path().is_ident("derive")
            && matches!(&a.meta, syn::Meta::List(l)
                if l.tokens.clone().into_iter().any(|t| matches!(&t,
                    proc_macro2::TokenTree::Ident(i) if i == "Identifiable")))
    });
    if !identifiable {
        return None;
    }
    Some(Name::display(&format_args!(
        "{}s",
        crate::kb::db::column_name(ident)
    )))
}

/// The table of a diesel model: `#[diesel(table_name = crate::schema::invites)]` (its last
/// segment) or the older `#[table_name = "invites"]`.
fn diesel_table_name(attrs: &[Attribute]) -> Option<Name> {
    attrs.iter().find_map(|a| {
        let last = a.path().segments.last_item()?;
        match &a.meta {
            syn::Meta::List(l) if last.ident == "diesel" => {
                use proc_macro2::TokenTree::{Ident, Punct};
                let tokens: Vec<proc_macro2::TokenTree> = l.tokens.clone().into_iter().collect();
                let at = tokens.windows(2).position(|w| {
                    matches!(&w[0], Ident(i) if i == "table_name")
                        && matches!(&w[1], Punct(p) if p.as_char() == '=')
                })?;
                // The path's last segment, up to the next argument.
                tokens[at + 2..]
                    .iter()
                    .take_while(|t| !matches!(t, Punct(p) if p.as_char() == ','))
                    .filter_map(|t| match t {
                        Ident(i) => Some(Name::from(i.to_string())),
                        _ => None,
                    })
                    .last()
            }
            syn::Meta::NameValue(nv) if last.ident == "table_name" => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(Name::from(s.value())),
                _ => None,
            },
            _ => None,
        }
    })
}

/// The table of a sea-orm entity's model: `#[sea_orm(table_name = "kv_store")]`.
fn sea_orm_table_name(attrs: &[Attribute]) -> Option<Name> {
    attrs.iter().find_map(|a| {
        let syn::Meta::List(l) = &a.meta else {
            return None;
        };
        if a.path().segments.last_item()?.ident != "sea_orm" {
            return None;
        }
        use proc_macro2::TokenTree::{Ident, Literal, Punct};
        let tokens: Vec<proc_macro2::TokenTree> = l.tokens.clone().into_iter().collect();
        tokens.windows(3).find_map(|w| match w {
            [Ident(i), Punct(p), Literal(lit)] if i == "table_name" && p.as_char() == '=' => {
                let text = lit.to_string();
                let name = text.trim_matches('"');
                (!name.is_empty() && name.len() + 2 == text.len()).then(|| Name::from(name))
            }
            _ => None,
        })
    })
}

/// The path of a route attribute (`#[post("/webhooks/stripe")]`, `#[route("/ipn", method =
/// "POST")]`), quotes included.
fn route_path(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        let last = a.path().segments.last_item()?;
        if !apis::ROUTE_ATTRIBUTES.iter().any(|r| last.ident == r) {
            return None;
        }
        let syn::Meta::List(l) = &a.meta else {
            return None;
        };
        l.tokens.clone().into_iter().find_map(|t| match t {
            proc_macro2::TokenTree::Literal(lit) => {
                let text = lit.to_string();
                text.starts_with("\"/").then_some(text)
            }
            _ => None,
        })
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
            let segs: Vec<Name> = super::segments(&p.path).collect();
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

/// A field's name: its identifier, or its index in a tuple struct or variant.
fn field_name(f: &syn::Field, index: usize) -> Name {
    f.ident
        .as_ref()
        .map_or_else(|| Name::display(&index), |i| Name::display(i))
}
