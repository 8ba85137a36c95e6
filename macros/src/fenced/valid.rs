//! Validation of `#[fenced]` against the function it is on: an `async fn`, bindings that do not
//! shadow parameters (the body only sees state read under the guard), and a `Result` return when
//! the expansion may have to return an error (a lease can be held, a transaction can fail).

use staleguard_grammar::fenced::{FencedArgs, Guard};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{FnArg, ItemFn, PatIdent, ReturnType, Type};

/// Every name a parameter pattern binds (`id`, and `seat`, `customer` in
/// `Path((seat, customer)): Path<(i64, i64)>`).
struct ParamNames<'ast>(Vec<&'ast syn::Ident>);

impl<'ast> Visit<'ast> for ParamNames<'ast> {
    fn visit_pat_ident(&mut self, pat: &'ast PatIdent) {
        self.0.push(&pat.ident);
        syn::visit::visit_pat_ident(self, pat);
    }
}

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

    let mut params = ParamNames(Vec::new());
    for input in &function.sig.inputs {
        if let FnArg::Typed(typed) = input {
            params.visit_pat(&typed.pat);
        }
    }
    let params = params.0;
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

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn check(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> Vec<String> {
        let args = staleguard_grammar::fenced::parse(args).unwrap();
        let function: ItemFn = syn::parse2(item).unwrap();
        match validate(args, function) {
            Ok(_) => Vec::new(),
            Err(err) => err.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    fn lock_args() -> proc_macro2::TokenStream {
        quote! {
            lock = self.lock, state = order, reread = self.load(id).await,
            verify = order.attempt == attempt, stale = Ok(false)
        }
    }

    #[test]
    fn a_binding_may_not_shadow_a_name_inside_a_parameter_pattern() {
        let errors = check(
            lock_args(),
            quote! {
                async fn paid(&self, Path((order, attempt)): Path<(i64, i64)>) -> Result<bool, E> {
                    Ok(true)
                }
            },
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("`order` is also a parameter"),
            "{errors:?}"
        );
    }

    #[test]
    fn every_problem_with_the_function_is_reported() {
        let errors = check(
            quote! {
                lease = self.leases, resource = "r", ttl = T, begin = self.db.begin(), tx = tx,
                state = order, reread = load(&mut tx).await?, verify = true, stale = false
            },
            quote! {
                fn paid(&self, order: i64) -> bool { true }
            },
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("needs an `async fn`"));
        assert!(errors[1].contains("`order` is also a parameter"));
        assert!(errors[2].contains("must return a `Result`"));
    }

    #[test]
    fn result_aliases_count_as_results() {
        for output in [
            quote!(-> Result<bool, E>),
            quote!(-> anyhow::Result<bool>),
            quote!(-> std::io::Result<()>),
        ] {
            let item = quote! { async fn paid(&self, id: i64, attempt: i64) #output { todo!() } };
            let function: ItemFn = syn::parse2(item).unwrap();
            assert!(returns_result(&function.sig.output));
        }
        let function: ItemFn =
            syn::parse2(quote! { async fn f() -> Option<bool> { None } }).unwrap();
        assert!(!returns_result(&function.sig.output));
    }
}
