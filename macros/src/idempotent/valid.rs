//! Validation: the parsed arguments plus the function become a [`Model`], or every problem found
//! becomes one combined error (missing `store`/`key`, not `async`, not returning `Result<T, E>`).

use proc_macro2::Span;
use staleguard_grammar::idempotent::{FailedPolicy, IdempotentArgs};
use std::time::Duration;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Expr, FnArg, GenericArgument, Ident, ItemFn, PathArguments, ReturnType, Type};

/// How the request is fingerprinted.
pub(crate) enum Fields {
    /// `fingerprint(a, b.c)`: exactly these expressions, which must be serializable.
    Explicit(Vec<Expr>),
    /// Every argument binding; the serializable ones are hashed.
    Bindings(Vec<Ident>),
}

/// Everything the expansion needs, validated.
pub(crate) struct Model {
    pub function: ItemFn,
    pub store: Expr,
    pub key: Expr,
    pub tenant: Option<Expr>,
    pub fields: Fields,
    pub name: String,
    pub lease: Option<Duration>,
    pub wait: Option<Duration>,
    pub retention: Option<Duration>,
    pub failed: Option<FailedPolicy>,
    pub claim: Option<Ident>,
    /// The one-transaction mode: the body's transaction.
    pub tx: Option<Ident>,
    /// `T` of `Result<T, E>`.
    pub ok: Type,
    pub err: Type,
    /// `Some(U)` when `T` is `Json<U>`: `U` is what gets stored.
    pub json_inner: Option<Type>,
}

pub(crate) fn check(
    args: syn::Result<IdempotentArgs>,
    function: syn::Result<ItemFn>,
) -> syn::Result<Model> {
    let mut errors = Errors::default();
    let args = errors.take(args);
    let function = match function {
        Ok(function) => function,
        Err(e) => {
            errors.push(syn::Error::new(
                e.span(),
                "`#[idempotent]` applies to an `async fn` (a handler or a method)",
            ));
            return Err(errors.finish().expect("an error was pushed"));
        }
    };
    if function.sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            function.sig.fn_token.span(),
            "`#[idempotent]` handlers must be `async fn`: the claim and the completion are store round trips",
        ));
    }
    let result_types = result_types(&function.sig.output);
    if result_types.is_none() {
        let span = match &function.sig.output {
            ReturnType::Type(_, ty) => ty.span(),
            ReturnType::Default => function.sig.ident.span(),
        };
        errors.push(syn::Error::new(
            span,
            "`#[idempotent]` handlers must return `Result<T, E>`: `T` is stored and replayed, `E` is classified as retryable, permanent or unknown",
        ));
    }
    let Some(args) = args else {
        return Err(errors.finish().expect("the grammar reported an error"));
    };
    let store = required(
        &mut errors,
        args.store.map(|a| a.value),
        "store = ..",
        "the `Idempotency<S>` that holds the records, e.g. `store = state.idempotency`",
    );
    let key = required(
        &mut errors,
        args.key.map(|a| a.value),
        "key = ..",
        "the request's idempotency key, e.g. `key = req.idempotency_key` or an `IdempotencyKeyHeader` argument",
    );
    if let Some(e) = errors.finish() {
        return Err(e);
    }
    let (ok, err) = result_types.expect("checked above");
    let fields = match args.fingerprint {
        Some(list) => Fields::Explicit(list.value),
        None => Fields::Bindings(bindings(&function)),
    };
    Ok(Model {
        name: args
            .name
            .map(|n| n.value.value())
            .unwrap_or_else(|| function.sig.ident.to_string()),
        json_inner: json_inner(&ok),
        function,
        store: store.expect("checked above"),
        key: key.expect("checked above"),
        tenant: args.tenant.map(|a| a.value),
        fields,
        lease: args.lease.map(|a| a.value),
        wait: args.wait.map(|a| a.value),
        retention: args.retention.map(|a| a.value),
        failed: args.failed.map(|a| a.value),
        claim: args.claim.map(|a| a.value),
        tx: args.tx.map(|a| a.value),
        ok,
        err,
    })
}

#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    fn take<T>(&mut self, r: syn::Result<T>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    fn finish(self) -> Option<syn::Error> {
        self.0
    }
}

fn required<T>(errors: &mut Errors, value: Option<T>, what: &str, hint: &str) -> Option<T> {
    if value.is_none() {
        errors.push(syn::Error::new(
            Span::call_site(),
            format!("`#[idempotent]` is missing `{what}`: {hint}"),
        ));
    }
    value
}

/// `T` and `E` of a `Result<T, E>` return type (any path ending in `Result`).
fn result_types(output: &ReturnType) -> Option<(Type, Type)> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let Type::Path(path) = &**ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return None;
    };
    let mut types = generics.args.iter().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    let pair = (types.next()?, types.next()?);
    types.next().is_none().then_some(pair)
}

/// `U` when `ty` is `Json<U>` (axum's JSON response): the handler returns `Json<U>`, `U` is
/// stored.
fn json_inner(ty: &Type) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Json" {
        return None;
    }
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return None;
    };
    match generics.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(inner)] => Some(inner.clone()),
        _ => None,
    }
}

/// Every identifier bound by the arguments' patterns (`req`, the `body` of `Json(body)`), in
/// order; `self` is not a request field.
fn bindings(function: &ItemFn) -> Vec<Ident> {
    struct Collect(Vec<Ident>);
    impl<'ast> Visit<'ast> for Collect {
        fn visit_pat_ident(&mut self, pat: &'ast syn::PatIdent) {
            self.0.push(pat.ident.clone());
            syn::visit::visit_pat_ident(self, pat);
        }
    }
    let mut collect = Collect(Vec::new());
    for input in &function.sig.inputs {
        if let FnArg::Typed(typed) = input {
            collect.visit_pat(&typed.pat);
        }
    }
    collect.0
}
