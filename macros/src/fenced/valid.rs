//! Validation of `#[fenced]` against the function it is on: an `async fn`, bindings that do not
//! shadow parameters (the body only sees state read under the guard), and a `Result` return when
//! the expansion may have to return an error (a lease can be held, a transaction can fail).

use staleguard_grammar::fenced::{FencedArgs, Guard};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

/// A validated `#[fenced]` function: its arguments and the item they apply to.
pub(crate) struct Fenced {
    pub args: FencedArgs,
    pub function: ItemFn,
}

/// Collects every error; returns the model when there is none.
pub(crate) fn validate(args: FencedArgs, function: ItemFn) -> syn::Result<Fenced> {
    let mut errors: Vec<syn::Error> = Vec::new();
    if let Err(err) = signature(&function) {
        errors.push(err);
    }

    let params: Vec<&syn::Ident> = function
        .sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) => Some(&pat.ident),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    for binding in args.bindings() {
        if params.iter().any(|param| **param == binding.ident) {
            errors.push(syn::Error::new(
                binding.ident.span(),
                format!(
                    "`{}` is also a parameter of this function; the body must only see what is \
                     read under the guard, so give the binding another name",
                    binding.ident
                ),
            ));
        }
    }

    let needs_result = if args.begin.is_some() {
        Some("`begin = ..` commits when the body returns `Ok` and rolls back on `Err`")
    } else if matches!(args.guard, Guard::Lease(_)) {
        Some("the lease can be held by another owner or the store can fail")
    } else {
        None
    };
    if let Some(why) = needs_result
        && !returns_result(&function.sig.output)
    {
        let span = match &function.sig.output {
            ReturnType::Type(_, ty) => ty.span(),
            ReturnType::Default => function.sig.ident.span(),
        };
        errors.push(syn::Error::new(
            span,
            format!(
                "this `#[fenced]` function must return a `Result` whose error converts from \
                 `staleguard::Error`: {why}"
            ),
        ));
    }

    let mut errors = errors.into_iter();
    match errors.next() {
        None => Ok(Fenced { args, function }),
        Some(mut first) => {
            for err in errors {
                first.combine(err);
            }
            Err(first)
        }
    }
}

/// Checks what the function itself must be, whatever the arguments.
pub(crate) fn signature(function: &ItemFn) -> syn::Result<()> {
    if function.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            function.sig.fn_token.span,
            "`#[fenced]` needs an `async fn`: the guard is held across the re-read, the body \
             and the commit, which await",
        ));
    }
    Ok(())
}

/// `Result<..>`, `io::Result<..>`, `anyhow::Result<..>`, `AppResult<..>`: a path type whose
/// last segment ends with `Result`.
fn returns_result(output: &ReturnType) -> bool {
    match output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(path) => path
                .path
                .segments
                .last()
                .is_some_and(|segment| segment.ident.to_string().ends_with("Result")),
            _ => false,
        },
        ReturnType::Default => false,
    }
}
