//! Arguments of `#[fenced(..)]` (placeholder until the fenced macro lands: accepts anything).

use proc_macro2::TokenStream;

/// The parsed arguments of `#[fenced(..)]`.
#[derive(Debug, Clone)]
pub struct FencedArgs {}

/// Parses the tokens inside `#[fenced(..)]`. The macro and the analyzer both call this.
pub fn parse(_args: TokenStream) -> syn::Result<FencedArgs> {
    Ok(FencedArgs {})
}
