//! What `#[idempotent]` expands into. Not a public API: names and shapes change freely.

use super::engine::{AsIdempotency, Begun, Call, Guard, Idempotency};
use super::error::IdempotencyError;
use super::fingerprint::Fingerprinter;
use super::store::IdempotencyStore;
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
/// or an idempotency error converted into the handler's error type).
pub async fn begin<S, T, E>(
    engine: &Idempotency<S>,
    call: Result<Call, IdempotencyError>,
) -> ControlFlow<Result<T, E>, Guard<S>>
where
    S: IdempotencyStore,
    T: DeserializeOwned,
    E: DeserializeOwned + From<IdempotencyError>,
{
    let outcome = match call {
        Ok(call) => engine.begin(call).await,
        Err(e) => Err(e),
    };
    let codec = |e: serde_json::Error| {
        E::from(IdempotencyError::Codec {
            reason: e.to_string(),
        })
    };
    match outcome {
        Ok(Begun::Run(guard)) => ControlFlow::Continue(guard),
        Ok(Begun::Replay(Ok(body))) => {
            ControlFlow::Break(serde_json::from_str::<T>(&body).map_err(codec))
        }
        Ok(Begun::Replay(Err(body))) => {
            ControlFlow::Break(Err(serde_json::from_str::<E>(&body).unwrap_or_else(codec)))
        }
        Err(e) => ControlFlow::Break(Err(E::from(e))),
    }
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

/// Compile-time check that the handler's response can be stored and replayed.
pub fn assert_response<T: Serialize + DeserializeOwned>() {}

/// Compile-time check that the handler's error can be classified, stored and replayed, and
/// can carry idempotency errors.
pub fn assert_error<E>()
where
    E: super::failure::Classify + Serialize + DeserializeOwned + From<IdempotencyError>,
{
}
