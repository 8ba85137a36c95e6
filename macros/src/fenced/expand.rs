//! Expansion of a validated `#[fenced]` function into: acquire the lease (or lock) → open the
//! transaction → check the fence → re-read → verify → body → commit → release.
//!
//! The body runs in its own `async` block, so `return` and `?` in it end the body (with the value
//! the caller gets) and the commit and the release still run after it. Internal names are
//! `mixed_site` so the body cannot see them; user expressions keep their spans so type errors
//! point at them.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use staleguard_grammar::fenced::Guard;
use syn::Ident;
use syn::spanned::Spanned;

use super::valid::Fenced;

fn internal(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

pub(crate) fn expand(model: Fenced) -> TokenStream {
    let Fenced { args, function } = model;
    let syn::ItemFn {
        attrs,
        vis,
        sig,
        block,
        ..
    } = function;

    let guard = internal("__sg_guard");
    let resource = internal("__sg_resource");
    let owner = internal("__sg_owner");
    let token = internal("__sg_token");
    let out = internal("__sg_out");
    let body = internal("__sg_body");
    let verified = internal("__sg_verified");
    let value = internal("__sg_value");
    let err = internal("__sg_err");

    let ok = quote!(::core::result::Result::Ok);
    let error = quote!(::core::result::Result::Err);
    let from = quote!(::core::convert::From::from);

    let (acquire, release) = match &args.guard {
        Guard::Lease(lease) => {
            let store = &lease.store;
            let resource_expr = &lease.resource;
            let ttl = &lease.ttl;
            let owner_expr = match &lease.owner {
                Some(owner_expr) => quote_spanned! {owner_expr.span()=>
                    ::core::convert::Into::<::std::string::String>::into(#owner_expr)
                },
                None => quote!(::staleguard::lease::unique_owner()),
            };
            let acquire = quote_spanned! {store.span()=>
                let #resource: ::std::string::String = ::core::convert::Into::into(#resource_expr);
                let #owner: ::std::string::String = #owner_expr;
                let #guard = match ::staleguard::lease::LeaseGuard::acquire(
                    ::core::clone::Clone::clone(&(#store)),
                    &#resource,
                    &#owner,
                    #ttl,
                )
                .await
                {
                    #ok(#guard) => #guard,
                    #error(#err) => return #error(#from(::staleguard::Error::from(#err))),
                };
                let #token: ::staleguard::FencingToken = #guard.token();
            };
            let release = quote!(#guard.release_after_work().await;);
            (acquire, release)
        }
        Guard::Lock(lock) => {
            let acquire = quote_spanned! {lock.span()=>
                let #guard = ::staleguard::lease::Lock::lock(&(#lock)).await;
            };
            (acquire, quote!(::core::mem::drop(#guard);))
        }
    };

    let stale = &args.stale;
    let return_stale = quote_spanned! {stale.span()=> return #stale; };

    let open = match (&args.begin, &args.tx) {
        (Some(begin), Some(tx)) => {
            let tx = &tx.ident;
            let fence = match &args.guard {
                Guard::Lease(lease) => {
                    let store = &lease.store;
                    quote_spanned! {store.span()=>
                        match ::staleguard::fence::FenceCheck::check_fence(&mut *#tx, &#resource, #token).await {
                            #ok(()) => {}
                            #error(::staleguard::fence::FenceError::Fenced(_)) => { #return_stale }
                            #error(#err) => return #error(#from(::staleguard::Error::from(#err))),
                        }
                    }
                }
                Guard::Lock(_) => TokenStream::new(),
            };
            quote_spanned! {begin.span()=>
                #[allow(unused_mut)]
                let mut #tx = match (#begin).await {
                    #ok(#tx) => #tx,
                    #error(#err) => return #error(#from(#err)),
                };
                #fence
            }
        }
        _ => TokenStream::new(),
    };

    let state = &args.state.ident;
    let state_mut = &args.state.mutability;
    let reread = &args.reread;
    let verify = &args.verify;
    let check = quote_spanned! {verify.span()=>
        let #verified: bool = #verify;
    };

    let bind_token = match &args.token {
        Some(binding) => {
            let name = &binding.ident;
            quote!(let #name: ::staleguard::FencingToken = #token;)
        }
        None => TokenStream::new(),
    };

    let finish = match (&args.begin, &args.tx) {
        (Some(begin), Some(tx)) => {
            let tx = &tx.ident;
            quote_spanned! {begin.span()=>
                match #body {
                    #ok(#value) => match ::staleguard::fence::Commit::commit(#tx).await {
                        #ok(()) => #ok(#value),
                        #error(#err) => #error(#from(#err)),
                    },
                    #error(#err) => #error(#err),
                }
            }
        }
        _ => quote!(#body),
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            #acquire
            #[allow(unreachable_code, clippy::needless_return, clippy::let_and_return)]
            let #out = async {
                #open
                let #state_mut #state = #reread;
                #check
                if !#verified {
                    #return_stale
                }
                #bind_token
                #[allow(clippy::redundant_async_block)]
                let #body = async #block.await;
                #finish
            }
            .await;
            #release
            #out
        }
    }
}
