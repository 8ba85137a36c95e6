//! Arguments of `#[idempotent(..)]` (placeholder until the idempotent macro lands: accepts anything).

use proc_macro2::TokenStream;

/// The parsed arguments of `#[idempotent(..)]`.
#[derive(Debug, Clone)]
pub struct IdempotentArgs {}

/// Parses the tokens inside `#[idempotent(..)]`. The macro and the analyzer both call this.
pub fn parse(_args: TokenStream) -> syn::Result<IdempotentArgs> {
    Ok(IdempotentArgs {})
}
