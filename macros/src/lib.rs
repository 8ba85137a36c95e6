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

/// Makes an `async fn` handler idempotent: its effect happens once per key, duplicates get the
/// stored response or "in progress", and a late owner is fenced out.
///
/// ```ignore
/// #[staleguard::idempotent(store = state.idempotency, key = req.idempotency_key, claim = claim)]
/// async fn charge(state: &AppState, req: ChargeRequest) -> Result<Receipt, PayError> {
///     // `claim.record_id()` is the same for every owner of this key: pass it downstream.
///     state.gateway.charge(claim.record_id(), req.amount).await
/// }
/// ```
///
/// Arguments (parsed by `staleguard_grammar::idempotent`, the grammar the analyzer shares):
///
/// | argument | meaning |
/// | --- | --- |
/// | `store = expr` | required: an `Idempotency<S>` (or a reference or `Arc` of one) |
/// | `key = expr` | required: the key — `&str`, `String`, an integer, `Option<_>` (`None` is a missing key), or the axum `IdempotencyKeyHeader` |
/// | `tenant = expr` | scopes the key by tenant |
/// | `fingerprint(expr, ..)` | the request fields hashed to detect a reused key (default: every serializable argument binding) |
/// | `name = "..."` | the key scope (default: the function's name) |
/// | `lease = "30s"` | how long a claim is exclusive before another request may take it over |
/// | `wait = "2s"` | a duplicate in flight waits up to this long for the first outcome instead of answering "in progress" at once |
/// | `retention = "24h"` | how long outcomes are replayed |
/// | `failed = replay` / `retry` | what a duplicate of a permanently failed call gets |
/// | `claim = ident` | binds a `ClaimHandle` (fence, record id, heartbeat) in the body |
///
/// The function must be `async` and return `Result<T, E>` with `T: Serialize +
/// DeserializeOwned` (or axum's `Json<U>` with such a `U`, stored as `U`) and `E: Classify +
/// Serialize + DeserializeOwned + From<IdempotencyError>`. See `docs/idempotency.md` for the
/// state machine, the HTTP mapping and the guarantees.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    idempotent::expand(args.into(), item.into()).into()
}
