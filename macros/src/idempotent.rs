//! `#[idempotent]`: arguments are parsed by the shared grammar (`staleguard_grammar::idempotent`,
//! the same code the analyzer runs), checked against the function in [`valid`], and expanded in
//! [`expand`]. Every error is reported at once, on the user's tokens, next to the original item
//! so the IDE keeps working.

mod expand;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = staleguard_grammar::idempotent::parse(args);
    let function = syn::parse2::<syn::ItemFn>(item.clone());
    match valid::check(parsed, function) {
        Ok(model) => expand::expand(&model),
        Err(error) => {
            let errors = error.to_compile_error();
            quote!(#item #errors)
        }
    }
}
