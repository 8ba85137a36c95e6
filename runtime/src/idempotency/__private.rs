//! What `#[idempotent]` expands into. Not a public API: names and shapes change freely.

use super::engine::{AsIdempotency, Begun, Call, ErrorCodec, Guard, Idempotency, ResponseCodec};
use super::error::IdempotencyError;
use super::fingerprint::Fingerprinter;
use super::local::{BegunLocal, LocalGuard};
use super::store::{IdempotencyStore, LocalStore};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::ops::ControlFlow;

pub use super::key::IdempotencyKey;
pub use std::time::Duration;

/// Clones the engine out of whatever `store = ..` names, so no borrow outlives the claim.
pub fn engine<A: AsIdempotency + ?Sized>(a: &A) -> Idempotency<A::Store> {
    a.as_idempotency().clone()
}

/// Claims, and returns either the guard (run the body) or the handler's final result (replay,
/// or an idempotency error converted into the handler's error type). No trait bounds: they were
/// checked once, where the codecs were built, so a misuse is reported once, on the user's type.
pub async fn begin<S, T, E>(
    engine: &Idempotency<S>,
    call: Result<Call, IdempotencyError>,
    response: &ResponseCodec<T>,
    error: &ErrorCodec<E>,
) -> ControlFlow<Result<T, E>, Guard<S>>
where
    S: IdempotencyStore,
{
    let outcome = match call {
        Ok(call) => engine.begin(call).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(Begun::Run(guard)) => ControlFlow::Continue(guard),
        Ok(Begun::Replay(stored)) => ControlFlow::Break(replay(stored, response, error)),
        Err(e) => ControlFlow::Break(Err((error.from)(e))),
    }
}

/// The handler's result from a stored outcome (and the replay noted for `Idempotent-Replayed`).
fn replay<T, E>(
    stored: Result<String, String>,
    response: &ResponseCodec<T>,
    error: &ErrorCodec<E>,
) -> Result<T, E> {
    super::replayed::note();
    let from = error.from;
    let codec = |e: serde_json::Error| {
        from(IdempotencyError::Codec {
            reason: e.to_string(),
        })
    };
    match stored {
        Ok(body) => (response.decode)(&body).map_err(codec),
        Err(body) => Err((error.decode)(&body).unwrap_or_else(codec)),
    }
}

/// [`begin`] for the one-transaction mode: the guard and the transaction for the body.
pub async fn begin_local<S, T, E>(
    engine: &Idempotency<S>,
    call: Result<Call, IdempotencyError>,
    response: &ResponseCodec<T>,
    error: &ErrorCodec<E>,
) -> ControlFlow<Result<T, E>, (LocalGuard<S>, S::Tx)>
where
    S: LocalStore,
{
    let outcome = match call {
        Ok(call) => engine.begin_local(call).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(BegunLocal::Run(guard, tx)) => ControlFlow::Continue((guard, tx)),
        Ok(BegunLocal::Replay(stored)) => ControlFlow::Break(replay(stored, response, error)),
        Err(e) => ControlFlow::Break(Err((error.from)(e))),
    }
}

/// The response's codec; requires `T: Serialize + DeserializeOwned` (spanned on the user's `T`).
pub fn response_codec<T: Serialize + DeserializeOwned>() -> ResponseCodec<T> {
    ResponseCodec::new()
}

/// The error's codec; requires `E: Classify + Serialize + DeserializeOwned +
/// From<IdempotencyError>` (spanned on the user's `E`).
pub fn error_codec<E>() -> ErrorCodec<E>
where
    E: super::failure::Classify + Serialize + DeserializeOwned + From<IdempotencyError>,
{
    ErrorCodec::new()
}

/// Part of the default fingerprint: an argument binding. Serializable bindings are hashed
/// (through [`ViaSerialize`]); the others are skipped (through [`ViaSkip`]), chosen by autoref.
pub struct Part<'a, T: ?Sized>(pub &'a str, pub &'a T);

pub trait ViaSerialize {
    fn add_to(&self, fp: &mut Fingerprinter);
}

impl<T: Serialize + ?Sized> ViaSerialize for Part<'_, T> {
    fn add_to(&self, fp: &mut Fingerprinter) {
        fp.add(self.0, self.1);
    }
}

pub trait ViaSkip {
    fn add_to(&self, fp: &mut Fingerprinter);
}

impl<T: ?Sized> ViaSkip for &Part<'_, T> {
    fn add_to(&self, _: &mut Fingerprinter) {}
}

/// Explicitly named fingerprint fields must be serializable.
pub fn add_field<T: Serialize + ?Sized>(fp: &mut Fingerprinter, label: &str, value: &T) {
    fp.add(label, value);
}
