//! `#[fenced]`: parse the arguments (the shared grammar) → validate them against the function →
//! expand into lease/lock → re-read → verify → body → commit → release. On any error the original
//! item is emitted unchanged next to the `compile_error!`s, so the IDE keeps working.

mod expand;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = staleguard_grammar::fenced::parse(args);
    let function = syn::parse2::<syn::ItemFn>(item.clone()).map_err(|err| {
        syn::Error::new(
            err.span(),
            "`#[fenced]` applies to an `async fn` (a free function or a method)",
        )
    });
    let result = match (args, function) {
        (Ok(args), Ok(function)) => valid::validate(args, function).map(expand::expand),
        (Err(mut err), Ok(function)) => {
            if let Err(more) = valid::signature(&function) {
                err.combine(more);
            }
            Err(err)
        }
        (Ok(_), Err(err)) => Err(err),
        (Err(mut err), Err(more)) => {
            err.combine(more);
            Err(err)
        }
    };
    match result {
        Ok(expanded) => expanded,
        Err(err) => {
            let errors = err.into_compile_error();
            quote! { #item #errors }
        }
    }
}
