//! `#[staleguard::fenced]` and `#[staleguard::idempotent]`: thin entry points; parsing lives in
//! `staleguard-grammar`, validation and expansion in their own modules.

mod fenced;
mod idempotent;

use proc_macro::TokenStream;

/// Placeholder: documented in full once the fenced expansion lands.
#[proc_macro_attribute]
pub fn fenced(args: TokenStream, item: TokenStream) -> TokenStream {
    fenced::expand(args.into(), item.into()).into()
}

/// Placeholder: documented in full once the idempotent expansion lands.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    idempotent::expand(args.into(), item.into()).into()
}
