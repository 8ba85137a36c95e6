//! Expansion: the handler's body is wrapped in claim → (replay | run body) → complete.
//!
//! ```text
//! async fn charge(..) -> Result<T, E> {
//!     let response = response_codec::<T>();     // `T: Serialize + DeserializeOwned`, on `T`
//!     let error = error_codec::<E>();           // `E: Classify + ..`, on `E`: checked once
//!     let engine = <store>;                      // cloned, so no borrow is held
//!     let call = key + tenant + fingerprint;     // evaluated before the body moves anything
//!     let guard = match begin(engine, call, ..) { // the claim (a read for a replay)
//!         Continue(guard) => guard,
//!         Break(result) => return result,        // replay, in progress, mismatch, missing key
//!     };
//!     let claim = guard.handle();                // when `claim = claim` is given
//!     let result = (async || -> Result<T, E> { <the original body> })().await;
//!     guard.finish_with(result, ..).await        // compare-and-set on (key, fence, owner)
//! }
//! ```
//!
//! With `tx = tx` (the one-transaction mode), `begin_local` claims inside a new transaction and
//! hands it over: `let (guard, mut tx) = ..;` the body writes through `tx`, and
//! `guard.finish_with(tx, result, ..)` writes the outcome in it and commits (an error rolls
//! everything back).

use super::valid::{Fields, Model};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use std::time::Duration;
use syn::spanned::Spanned;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn expand(model: &Model) -> TokenStream {
    let rt = quote!(::staleguard::idempotency);
    let private = quote!(#rt::__private);
    let Model {
        ok,
        err,
        store,
        key,
        name,
        ..
    } = model;
    let stored = model.json_inner.as_ref().unwrap_or(ok);

    let fingerprint = match &model.fields {
        Fields::Explicit(exprs) => {
            let adds = exprs.iter().map(|e| {
                let label = quote!(#e).to_string();
                quote_spanned!(e.span()=> #private::add_field(&mut __sg_fp, #label, &(#e));)
            });
            quote!(#(#adds)*)
        }
        Fields::Bindings(idents) => {
            let adds = idents.iter().map(|i| {
                let label = i.to_string();
                quote!((&#private::Part(#label, &#i)).add_to(&mut __sg_fp);)
            });
            quote! {
                #[allow(unused_imports)]
                use #private::{ViaSerialize as _, ViaSkip as _};
                #(#adds)*
            }
        }
    };
    let tenant = model.tenant.as_ref().map(|t| {
        quote_spanned!(t.span()=> __sg_call.tenant = ::core::option::Option::Some(#private::IdempotencyKey::from_source(&(#t))?);)
    });
    let duration = |field: &str, value: Option<Duration>| {
        value.map(|d| {
            let field = syn::Ident::new(field, proc_macro2::Span::call_site());
            let ms = millis(d);
            quote!(__sg_call.#field = ::core::option::Option::Some(#private::Duration::from_millis(#ms));)
        })
    };
    let lease = duration("lease", model.lease);
    let wait = duration("wait", model.wait);
    let retention = duration("retention", model.retention);
    let failed = model.failed.map(|f| {
        let policy = match f {
            staleguard_grammar::idempotent::FailedPolicy::Replay => quote!(Replay),
            staleguard_grammar::idempotent::FailedPolicy::Retry => quote!(Retry),
        };
        quote!(__sg_call.failed = ::core::option::Option::Some(#rt::FailedPolicy::#policy);)
    });
    let claim = model
        .claim
        .as_ref()
        .map(|c| quote!(let #c = __sg_guard.handle();));
    let (wrap, unwrap) = match &model.json_inner {
        Some(_) => (
            quote!(.map(<#ok as ::core::convert::From<#stored>>::from)),
            quote!(.map(|__sg_json: #ok| __sg_json.0)),
        ),
        None => (quote!(), quote!()),
    };
    // The handler's trait requirements are checked here, once, on the user's own `T` and `E`;
    // everything after uses the codecs and has no bounds left to fail.
    let response_codec = quote_spanned!(stored.span()=> #private::response_codec::<#stored>());
    let error_codec = quote_spanned!(err.span()=> #private::error_codec::<#err>());
    let engine = quote_spanned!(store.span()=> #private::engine(&(#store)));
    let key_source = quote_spanned!(key.span()=> #private::IdempotencyKey::from_source(&(#key))?);
    let body = &model.function.block;

    let run = match &model.tx {
        None => quote! {
            let __sg_guard = match #private::begin(&__sg_engine, __sg_call, &__sg_response, &__sg_error).await {
                ::core::ops::ControlFlow::Continue(__sg_guard) => __sg_guard,
                ::core::ops::ControlFlow::Break(__sg_result) => return __sg_result #wrap,
            };
            #claim
            let __sg_result: ::core::result::Result<#ok, #err> =
                (async || -> ::core::result::Result<#ok, #err> #body)().await;
            __sg_guard.finish_with(__sg_result #unwrap, &__sg_response, &__sg_error).await #wrap
        },
        Some(tx) => quote! {
            #[allow(unused_mut)]
            let (__sg_guard, mut #tx) = match #private::begin_local(&__sg_engine, __sg_call, &__sg_response, &__sg_error).await {
                ::core::ops::ControlFlow::Continue(__sg_claimed) => __sg_claimed,
                ::core::ops::ControlFlow::Break(__sg_result) => return __sg_result #wrap,
            };
            #claim
            let __sg_result: ::core::result::Result<#ok, #err> =
                (async || -> ::core::result::Result<#ok, #err> #body)().await;
            __sg_guard.finish_with(#tx, __sg_result #unwrap, &__sg_response, &__sg_error).await #wrap
        },
    };
    let block = quote! {{
        let __sg_response = #response_codec;
        let __sg_error = #error_codec;
        let __sg_engine = #engine;
        let __sg_call = (|| -> ::core::result::Result<#rt::Call, #rt::IdempotencyError> {
            let __sg_key = #key_source;
            let mut __sg_fp = #rt::Fingerprinter::new();
            { #fingerprint }
            let mut __sg_call = #rt::Call::new(#name, __sg_key, __sg_fp.finish()?);
            #tenant
            #lease
            #wait
            #retention
            #failed
            ::core::result::Result::Ok(__sg_call)
        })();
        #run
    }};
    let mut function = model.function.clone();
    match syn::parse2(block) {
        Ok(block) => {
            *function.block = block;
            quote!(#function)
        }
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#function #e)
        }
    }
}
