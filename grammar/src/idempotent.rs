//! Arguments of `#[idempotent(..)]`, shared by the macro (to expand) and the analyzer (to know
//! that a handler is guarded, and how).
//!
//! ```text
//! #[idempotent(
//!     store = state.idempotency,        // required: an `Idempotency<S>` (or & / Arc of one)
//!     key = req.idempotency_key,        // required: the caller's key (or the header extractor)
//!     tenant = auth.tenant_id,          // optional: scopes the key
//!     fingerprint(req.amount, req.to),  // optional: default = every serializable argument
//!     name = "charge",                  // optional: key scope, default = the function's name
//!     lease = "30s", wait = "2s", retention = "24h",
//!     failed = replay,                  // or `retry`: what a duplicate of a FAILED call gets
//!     claim = claim,                    // optional: binds the claim (fence, record id) in the body
//!     tx = tx,                          // optional: one transaction for the claim, the body's
//!                                       // writes and the completion (records in the same database)
//! )]
//! ```
//!
//! Parsing collects every error it can find (each on the user's tokens) instead of stopping at
//! the first.

use proc_macro2::{Span, TokenStream, TokenTree};
use std::time::Duration;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitStr, Token};

/// Every argument `#[idempotent]` accepts, in the order the docs list them.
pub const ACCEPTED: &[&str] = &[
    "store",
    "key",
    "tenant",
    "fingerprint",
    "name",
    "lease",
    "wait",
    "retention",
    "failed",
    "claim",
    "tx",
];

/// One argument's value with the span of its name (for "duplicate" and "missing" errors).
#[derive(Debug, Clone)]
pub struct Arg<T> {
    pub span: Span,
    pub value: T,
}

/// What a duplicate of a FAILED call gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedPolicy {
    Replay,
    Retry,
}

/// The parsed arguments of `#[idempotent(..)]`. Presence of required arguments is checked by
/// the macro's validation step, so the analyzer can still read an incomplete attribute.
#[derive(Debug, Clone, Default)]
pub struct IdempotentArgs {
    pub store: Option<Arg<Expr>>,
    pub key: Option<Arg<Expr>>,
    pub tenant: Option<Arg<Expr>>,
    pub fingerprint: Option<Arg<Vec<Expr>>>,
    pub name: Option<Arg<LitStr>>,
    pub lease: Option<Arg<Duration>>,
    pub wait: Option<Arg<Duration>>,
    pub retention: Option<Arg<Duration>>,
    pub failed: Option<Arg<FailedPolicy>>,
    pub claim: Option<Arg<Ident>>,
    /// The one-transaction mode: the name the body's transaction is bound to.
    pub tx: Option<Arg<Ident>>,
}

/// Parses the tokens inside `#[idempotent(..)]`. The macro and the analyzer both call this.
/// All errors are combined into one `syn::Error`.
pub fn parse(args: TokenStream) -> syn::Result<IdempotentArgs> {
    let mut parsed = IdempotentArgs::default();
    let mut errors: Vec<syn::Error> = Vec::new();
    let parser = |input: ParseStream<'_>| -> syn::Result<()> {
        while !input.is_empty() {
            if let Err(e) = parse_one(input, &mut parsed) {
                errors.push(e);
                skip_to_comma(input)?;
            }
            if input.is_empty() {
                break;
            }
            if let Err(e) = input.parse::<Token![,]>() {
                errors.push(e);
                skip_to_comma(input)?;
                let _ = input.parse::<Option<Token![,]>>();
            }
        }
        Ok(())
    };
    parser.parse2(args)?;
    match errors.into_iter().reduce(|mut all, e| {
        all.combine(e);
        all
    }) {
        Some(error) => Err(error),
        None => Ok(parsed),
    }
}

fn skip_to_comma(input: ParseStream<'_>) -> syn::Result<()> {
    while !input.is_empty() && !input.peek(Token![,]) {
        input.parse::<TokenTree>()?;
    }
    Ok(())
}

fn set<T>(slot: &mut Option<Arg<T>>, name: &Ident, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(syn::Error::new(
            name.span(),
            format!("duplicate argument `{name}`"),
        ));
    }
    *slot = Some(Arg {
        span: name.span(),
        value,
    });
    Ok(())
}

fn parse_one(input: ParseStream<'_>, args: &mut IdempotentArgs) -> syn::Result<()> {
    let name = input.call(Ident::parse_any)?;
    let label = name.to_string();
    if !ACCEPTED.contains(&label.as_str()) {
        let list = ACCEPTED
            .iter()
            .map(|a| format!("`{a}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(syn::Error::new(
            name.span(),
            format!("unknown argument `{label}`; expected one of {list}"),
        ));
    }
    if label == "fingerprint" {
        if !input.peek(syn::token::Paren) {
            return Err(syn::Error::new(
                name.span(),
                "expected `fingerprint(field, ..)` listing the request fields to hash",
            ));
        }
        let content;
        syn::parenthesized!(content in input);
        let fields = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
        if fields.is_empty() {
            return Err(syn::Error::new(
                name.span(),
                "`fingerprint()` lists no fields; omit it to hash every serializable argument",
            ));
        }
        return set(&mut args.fingerprint, &name, fields.into_iter().collect());
    }
    if !input.peek(Token![=]) {
        return Err(syn::Error::new(
            name.span(),
            format!("expected `{label} = ..`"),
        ));
    }
    input.parse::<Token![=]>()?;
    match label.as_str() {
        "store" => set(&mut args.store, &name, input.parse()?),
        "key" => set(&mut args.key, &name, input.parse()?),
        "tenant" => set(&mut args.tenant, &name, input.parse()?),
        "name" => {
            let lit: LitStr = input.parse()?;
            if lit.value().is_empty() || !lit.value().chars().all(|c| matches!(c, '!'..='~')) {
                return Err(syn::Error::new(
                    lit.span(),
                    "`name` must be non-empty visible ASCII (it scopes the keys in the store)",
                ));
            }
            set(&mut args.name, &name, lit)
        }
        "lease" | "wait" | "retention" => {
            let lit: LitStr = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    format!("expected a duration string like `{label} = \"30s\"`"),
                )
            })?;
            let value = parse_duration(&lit.value()).ok_or_else(|| {
                syn::Error::new(
                    lit.span(),
                    format!(
                        "invalid duration {:?}: expected a whole number followed by `ms`, `s`, `m`, `h` or `d`, like \"30s\"",
                        lit.value()
                    ),
                )
            })?;
            if value.is_zero() && label != "wait" {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("`{label}` must be longer than zero"),
                ));
            }
            let slot = match label.as_str() {
                "lease" => &mut args.lease,
                "wait" => &mut args.wait,
                _ => &mut args.retention,
            };
            set(slot, &name, value)
        }
        "failed" => {
            let (text, span) = if input.peek(Lit) {
                let lit: LitStr = input.parse()?;
                (lit.value(), lit.span())
            } else {
                let ident = input.call(Ident::parse_any)?;
                (ident.to_string(), ident.span())
            };
            let policy = match text.as_str() {
                "replay" => FailedPolicy::Replay,
                "retry" => FailedPolicy::Retry,
                other => {
                    return Err(syn::Error::new(
                        span,
                        format!("unknown failure policy `{other}`; expected `replay` or `retry`"),
                    ));
                }
            };
            set(&mut args.failed, &name, policy)
        }
        "claim" => {
            let ident: Ident = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected an identifier to bind the claim to: `claim = claim`",
                )
            })?;
            set(&mut args.claim, &name, ident)
        }
        "tx" => {
            let ident: Ident = input.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected an identifier to bind the transaction to: `tx = tx`",
                )
            })?;
            set(&mut args.tx, &name, ident)
        }
        _ => unreachable!("every accepted argument is handled"),
    }
}

/// `"500ms"`, `"30s"`, `"5m"`, `"24h"`, `"7d"`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms).map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn parses_every_argument() {
        let args = parse(quote!(
            store = state.idem,
            key = req.key,
            tenant = auth.tenant,
            fingerprint(req.amount, req.to),
            name = "charge",
            lease = "10s",
            wait = "250ms",
            retention = "7d",
            failed = retry,
            claim = c,
            tx = t
        ))
        .unwrap();
        assert!(args.store.is_some() && args.key.is_some() && args.tenant.is_some());
        assert_eq!(args.fingerprint.unwrap().value.len(), 2);
        assert_eq!(args.name.unwrap().value.value(), "charge");
        assert_eq!(args.lease.unwrap().value, Duration::from_secs(10));
        assert_eq!(args.wait.unwrap().value, Duration::from_millis(250));
        assert_eq!(
            args.retention.unwrap().value,
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(args.failed.unwrap().value, FailedPolicy::Retry);
        assert_eq!(args.claim.unwrap().value, "c");
        assert_eq!(args.tx.unwrap().value, "t");
    }

    #[test]
    fn collects_every_error() {
        let err = parse(quote!(
            kye = a,
            lease = "3x",
            key = a,
            key = b,
            failed = maybe
        ))
        .unwrap_err();
        let messages: Vec<String> = err.into_iter().map(|e| e.to_string()).collect();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(messages[0].starts_with("unknown argument `kye`; expected one of `store`, `key`"));
        assert!(messages[1].starts_with("invalid duration \"3x\""));
        assert_eq!(messages[2], "duplicate argument `key`");
        assert!(messages[3].starts_with("unknown failure policy `maybe`"));
    }

    #[test]
    fn empty_attribute_parses_to_nothing() {
        let args = parse(TokenStream::new()).unwrap();
        assert!(args.key.is_none() && args.store.is_none());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("s"), None);
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("1.5s"), None);
    }
}
