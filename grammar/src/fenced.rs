//! Arguments of `#[fenced(..)]`: the model of a fenced handler (guard, transaction, re-read,
//! verify, stale value, fencing token) and its parser, shared by the macro and the analyzer.
//!
//! The grammar is a flat, comma-separated list of `key = value` pairs in any order:
//!
//! ```text
//! #[fenced(
//!     lease = <expr>, resource = <expr>, ttl = <expr>, [owner = <expr>,]   // a lease with a token
//!     | lock = <expr>,                                                     // or an in-process lock
//!     [begin = <expr>, tx = <ident>,]      // a transaction opened under the guard, committed after
//!     state = [mut] <ident>,               // the name the body sees the fresh state under
//!     reread = <expr>,                     // reads the persisted state under the guard
//!     verify = <expr>,                     // `bool`: the operation's identity still matches
//!     stale = <expr>,                      // what the handler returns when it is stale
//!     [token = <ident>,]                   // the lease's fencing token, for the body's writes
//! )]
//! ```
//!
//! [`parse`] collects every problem it can find and returns them as one combined
//! [`syn::Error`], each on the user's tokens.

use proc_macro2::{Span, TokenStream};
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, Token};

/// Every argument `#[fenced]` accepts, in the order the documentation lists them.
pub const ACCEPTED: &[&str] = &[
    "lease", "resource", "ttl", "owner", "lock", "begin", "tx", "state", "reread", "verify",
    "stale", "token",
];

/// The parsed arguments of `#[fenced(..)]`.
///
/// The analyzer uses [`FencedArgs::guard`] (what is locked), [`FencedArgs::reread`] (the read done
/// under it), [`FencedArgs::verify`] (the identity check) and the bindings the body sees
/// ([`FencedArgs::state`], [`FencedArgs::tx`], [`FencedArgs::token`]).
#[derive(Debug, Clone)]
pub struct FencedArgs {
    /// What serialises the handlers of one resource.
    pub guard: Guard,
    /// `begin = ..`: an expression whose `.await` yields `Result<Tx, E>`; the transaction is
    /// opened under the guard, before the re-read, and committed after the body.
    pub begin: Option<Expr>,
    /// `tx = ..`: the name the re-read and the body see the transaction under.
    pub tx: Option<Binding>,
    /// `state = ..`: the name the verify and the body see the re-read state under.
    pub state: Binding,
    /// `reread = ..`: reads the persisted state under the guard (may use `.await` and `?`).
    pub reread: Expr,
    /// `verify = ..`: a `bool` that is true when the operation's identity still matches.
    pub verify: Expr,
    /// `stale = ..`: the value the handler returns, writing nothing, when it is stale.
    pub stale: Expr,
    /// `token = ..`: the name the body sees the lease's fencing token under.
    pub token: Option<Binding>,
}

/// What `#[fenced]` holds while the handler runs.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per attribute, built once: size does not matter
pub enum Guard {
    /// A lease from a `LeaseStore`: it expires, and each holder gets a larger fencing token.
    Lease(LeaseArgs),
    /// `lock = ..`: an in-process lock (no expiry, no fencing token).
    Lock(Expr),
}

/// `lease = .., resource = .., ttl = .., owner = ..`.
#[derive(Debug, Clone)]
pub struct LeaseArgs {
    /// `lease = ..`: the lease store (cloned by the expansion; stores are cheap handles).
    pub store: Expr,
    /// `resource = ..`: the key of the resource (`impl Into<String>`).
    pub resource: Expr,
    /// `ttl = ..`: how long the lease lasts (`std::time::Duration`).
    pub ttl: Expr,
    /// `owner = ..`: who holds the lease; a unique owner per call when absent.
    pub owner: Option<Expr>,
}

/// A name the expansion binds for the body: `ident` or `mut ident`.
#[derive(Debug, Clone)]
pub struct Binding {
    pub mutability: Option<Token![mut]>,
    pub ident: Ident,
}

impl Guard {
    /// The expression of the lease store or the lock.
    pub fn expr(&self) -> &Expr {
        match self {
            Guard::Lease(lease) => &lease.store,
            Guard::Lock(lock) => lock,
        }
    }

    /// Whether the guard is a lease (and so has a fencing token).
    pub fn is_lease(&self) -> bool {
        matches!(self, Guard::Lease(_))
    }
}

impl FencedArgs {
    /// The expression of the lease store or the lock.
    pub fn guard_expr(&self) -> &Expr {
        self.guard.expr()
    }

    /// The names the expansion binds for the body, in binding order (tx, state, token).
    pub fn bindings(&self) -> impl Iterator<Item = &Binding> {
        self.tx
            .iter()
            .chain(std::iter::once(&self.state))
            .chain(self.token.iter())
    }
}

/// One `key = value` pair before the model is built.
struct RawArg {
    key: Ident,
    value: RawValue,
}

enum RawValue {
    Expr(Expr),
    Binding(Binding),
}

fn is_binding_key(key: &str) -> bool {
    matches!(key, "state" | "tx" | "token")
}

fn parse_binding(input: ParseStream) -> syn::Result<Binding> {
    let mutability: Option<Token![mut]> = input.parse()?;
    let ident: Ident = input.parse().map_err(|err| {
        syn::Error::new(
            err.span(),
            "expected a name to bind, like `order` or `mut order`",
        )
    })?;
    Ok(Binding { mutability, ident })
}

fn parse_raw(input: ParseStream) -> syn::Result<Vec<RawArg>> {
    let mut args = Vec::new();
    while !input.is_empty() {
        let key: Ident = input.parse().map_err(|err| {
            syn::Error::new(
                err.span(),
                format!(
                    "expected an argument name, one of: {}",
                    quoted_list(ACCEPTED)
                ),
            )
        })?;
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key} = ..`"),
            ));
        }
        let _: Token![=] = input.parse()?;
        let value = if is_binding_key(&key.to_string()) {
            RawValue::Binding(parse_binding(input)?)
        } else {
            RawValue::Expr(input.parse()?)
        };
        args.push(RawArg { key, value });
        if input.is_empty() {
            break;
        }
        let _: Token![,] = input.parse()?;
    }
    Ok(args)
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Collects several errors into one.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(err),
            None => self.0 = Some(err),
        }
    }

    fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }
}

#[derive(Default)]
struct Slots {
    lease: Option<(Ident, Expr)>,
    resource: Option<(Ident, Expr)>,
    ttl: Option<(Ident, Expr)>,
    owner: Option<(Ident, Expr)>,
    lock: Option<(Ident, Expr)>,
    begin: Option<(Ident, Expr)>,
    reread: Option<(Ident, Expr)>,
    verify: Option<(Ident, Expr)>,
    stale: Option<(Ident, Expr)>,
    tx: Option<(Ident, Binding)>,
    state: Option<(Ident, Binding)>,
    token: Option<(Ident, Binding)>,
}

fn put<T>(slot: &mut Option<(Ident, T)>, key: Ident, value: T, errors: &mut Errors) {
    if slot.is_some() {
        errors.at(key.span(), format!("duplicate argument `{key}`"));
    } else {
        *slot = Some((key, value));
    }
}

/// Parses the tokens inside `#[fenced(..)]`. The macro and the analyzer both call this.
///
/// Every error found is reported (combined into the returned error), each on the user's tokens;
/// an unknown argument's error lists the accepted ones. A missing argument is reported at
/// [`Span::call_site`], which for an attribute macro is the attribute itself.
pub fn parse(args: TokenStream) -> syn::Result<FencedArgs> {
    let raw = parse_raw.parse2(args)?;
    let mut errors = Errors::default();
    let mut slots = Slots::default();
    for RawArg { key, value } in raw {
        let name = key.to_string();
        match value {
            RawValue::Binding(binding) => match name.as_str() {
                "tx" => put(&mut slots.tx, key, binding, &mut errors),
                "state" => put(&mut slots.state, key, binding, &mut errors),
                _ => put(&mut slots.token, key, binding, &mut errors),
            },
            RawValue::Expr(expr) => {
                let slot = match name.as_str() {
                    "lease" => &mut slots.lease,
                    "resource" => &mut slots.resource,
                    "ttl" => &mut slots.ttl,
                    "owner" => &mut slots.owner,
                    "lock" => &mut slots.lock,
                    "begin" => &mut slots.begin,
                    "reread" => &mut slots.reread,
                    "verify" => &mut slots.verify,
                    "stale" => &mut slots.stale,
                    _ => {
                        errors.at(
                            key.span(),
                            format!(
                                "unknown argument `{key}`; `#[fenced]` accepts {}",
                                quoted_list(ACCEPTED)
                            ),
                        );
                        continue;
                    }
                };
                put(slot, key, expr, &mut errors);
            }
        }
    }
    let model = build(slots, &mut errors);
    match (model, errors.0) {
        (_, Some(err)) => Err(err),
        (Some(args), None) => Ok(args),
        (None, None) => Err(syn::Error::new(
            Span::call_site(),
            "invalid `#[fenced]` arguments",
        )),
    }
}

fn missing(errors: &mut Errors, what: &str, why: &str) {
    errors.at(
        Span::call_site(),
        format!("`#[fenced]` is missing `{what}`: {why}"),
    );
}

fn build(slots: Slots, errors: &mut Errors) -> Option<FencedArgs> {
    let Slots {
        lease,
        resource,
        ttl,
        owner,
        lock,
        begin,
        reread,
        verify,
        stale,
        tx,
        state,
        token,
    } = slots;

    let guard = match (lease, lock) {
        (Some((_, store)), None) => {
            if resource.is_none() {
                missing(
                    errors,
                    "resource = ..",
                    "the lease needs the key of the resource it guards",
                );
            }
            if ttl.is_none() {
                missing(
                    errors,
                    "ttl = ..",
                    "the lease needs a duration after which it expires",
                );
            }
            match (resource, ttl) {
                (Some((_, resource)), Some((_, ttl))) => Some(Guard::Lease(LeaseArgs {
                    store,
                    resource,
                    ttl,
                    owner: owner.map(|(_, owner)| owner),
                })),
                _ => None,
            }
        }
        (None, Some((_, lock))) => {
            for (key, _) in [resource, ttl, owner].into_iter().flatten() {
                errors.at(
                    key.span(),
                    format!("`{key}` only applies to a `lease`; a `lock` has no {key}"),
                );
            }
            if let Some((key, _)) = &token {
                errors.at(
                    key.span(),
                    "a `lock` has no fencing token; use `lease = ..` to get one",
                );
            }
            Some(Guard::Lock(lock))
        }
        (Some((key, _)), Some(_)) => {
            errors.at(key.span(), "use either `lease` or `lock`, not both");
            None
        }
        (None, None) => {
            missing(
                errors,
                "lease = ..` or `lock = ..",
                "a fenced handler re-reads and verifies under a lease or a lock",
            );
            None
        }
    };

    match (&begin, &tx) {
        (Some((key, _)), None) => errors.at(
            key.span(),
            "`begin` needs `tx = <name>` to name the transaction for the re-read and the body",
        ),
        (None, Some((key, _))) => errors.at(
            key.span(),
            "`tx` names the transaction opened by `begin = ..`, which is missing",
        ),
        _ => {}
    }
    if let (Some(Guard::Lease(_)), None, None) = (&guard, &begin, &token) {
        errors.at(
            Span::call_site(),
            "a `lease` without `begin = ..` must bind its fencing token with `token = <name>` \
             and pass it to the write, or an expired holder could still write",
        );
    }
    if state.is_none() {
        missing(
            errors,
            "state = <name>",
            "the body sees the re-read state under this name",
        );
    }
    if reread.is_none() {
        missing(
            errors,
            "reread = ..",
            "the state must be read again under the guard",
        );
    }
    if verify.is_none() {
        missing(
            errors,
            "verify = ..",
            "the operation's identity must be checked before the body runs",
        );
    }
    if stale.is_none() {
        missing(
            errors,
            "stale = ..",
            "a stale call returns this value and writes nothing",
        );
    }

    // Names bound for the body must differ from each other.
    let mut seen: Vec<&Ident> = Vec::new();
    for (_, binding) in [&tx, &state, &token].into_iter().flatten() {
        if let Some(first) = seen.iter().find(|seen| **seen == &binding.ident) {
            errors.at(
                binding.ident.span(),
                format!("`{}` is already bound by another argument", first),
            );
        }
        seen.push(&binding.ident);
    }

    Some(FencedArgs {
        guard: guard?,
        begin: begin.map(|(_, e)| e),
        tx: tx.map(|(_, b)| b),
        state: state?.1,
        reread: reread?.1,
        verify: verify?.1,
        stale: stale?.1,
        token: token.map(|(_, b)| b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn errors_of(tokens: TokenStream) -> String {
        match parse(tokens) {
            Ok(_) => String::from("ok"),
            Err(err) => err
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn lease_with_transaction_parses_into_the_model() {
        let args = parse(quote! {
            lease = self.leases, resource = format!("order:{id}"), ttl = TTL,
            begin = self.db.begin(), tx = tx,
            state = mut order, reread = load(&mut tx, id).await?,
            verify = order.attempt == attempt, stale = Ok(Paid::Stale), token = token,
        })
        .unwrap();
        assert!(args.guard.is_lease());
        assert_eq!(args.state.ident, "order");
        assert!(args.state.mutability.is_some());
        assert_eq!(args.tx.as_ref().unwrap().ident, "tx");
        assert_eq!(args.token.as_ref().unwrap().ident, "token");
        let names: Vec<String> = args.bindings().map(|b| b.ident.to_string()).collect();
        assert_eq!(names, ["tx", "order", "token"]);
        let verify = &args.verify;
        assert_eq!(
            quote!(#verify).to_string(),
            quote!(order.attempt == attempt).to_string()
        );
    }

    #[test]
    fn lock_without_transaction_parses() {
        let args = parse(quote! {
            lock = self.lock, state = seat, reread = self.load(id).await,
            verify = seat.reservation == Some(rid), stale = Released::Stale,
        })
        .unwrap();
        assert!(!args.guard.is_lease());
        assert!(args.begin.is_none());
    }

    #[test]
    fn unknown_argument_lists_the_accepted_ones() {
        let err = errors_of(
            quote! { lock = l, state = s, reread = r, verify = v, stale = x, retries = 3 },
        );
        assert!(err.contains("unknown argument `retries`"), "{err}");
        assert!(err.contains("`lease`, `resource`, `ttl`"), "{err}");
    }

    #[test]
    fn every_missing_argument_is_reported_at_once() {
        let err = errors_of(quote! { lock = l });
        for what in ["state = <name>", "reread = ..", "verify = ..", "stale = .."] {
            assert!(err.contains(what), "missing {what} not reported in {err}");
        }
    }

    #[test]
    fn lease_without_transaction_must_bind_its_token() {
        let err = errors_of(quote! {
            lease = s, resource = r, ttl = t, state = x, reread = r, verify = v, stale = y
        });
        assert!(err.contains("must bind its fencing token"), "{err}");
    }

    #[test]
    fn lock_has_no_token_ttl_or_resource() {
        let err = errors_of(quote! {
            lock = l, ttl = t, token = tok, state = x, reread = r, verify = v, stale = y
        });
        assert!(err.contains("`ttl` only applies to a `lease`"), "{err}");
        assert!(err.contains("a `lock` has no fencing token"), "{err}");
    }

    #[test]
    fn duplicates_and_conflicts_are_errors() {
        let err = errors_of(quote! {
            lease = s, lock = l, resource = r, ttl = t, token = x, state = x, state = y,
            reread = r, verify = v, stale = y
        });
        assert!(err.contains("use either `lease` or `lock`"), "{err}");
        assert!(err.contains("duplicate argument `state`"), "{err}");
        assert!(err.contains("`x` is already bound"), "{err}");
    }

    #[test]
    fn begin_and_tx_go_together() {
        let err = errors_of(quote! {
            lock = l, begin = db.begin(), state = x, reread = r, verify = v, stale = y
        });
        assert!(err.contains("`begin` needs `tx = <name>`"), "{err}");
    }
}
