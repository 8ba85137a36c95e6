//! Expansion of `#[idempotent]` (placeholder: passes the item through unchanged).

use proc_macro2::TokenStream;

pub(crate) fn expand(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
