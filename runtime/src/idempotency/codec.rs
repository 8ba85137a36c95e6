//! How a handler's response and error are stored and replayed: their trait bounds checked once,
//! kept as function pointers, so that the rest of the expansion has no bounds left to fail.

use super::error::IdempotencyError;
use super::failure::{Classify, FailureKind};
use serde::Serialize;
use serde::de::DeserializeOwned;

type Encode<X> = fn(&X) -> Result<String, serde_json::Error>;
type Decode<X> = fn(&str) -> Result<X, serde_json::Error>;

/// How a handler's response is stored and replayed: its trait bounds checked once, kept as
/// function pointers.
pub struct ResponseCodec<T> {
    pub(crate) encode: Encode<T>,
    pub(crate) decode: Decode<T>,
}

impl<T: Serialize + DeserializeOwned> ResponseCodec<T> {
    pub fn new() -> Self {
        ResponseCodec {
            encode: |v: &T| serde_json::to_string(v),
            decode: |s: &str| serde_json::from_str(s),
        }
    }
}

impl<T: Serialize + DeserializeOwned> Default for ResponseCodec<T> {
    fn default() -> Self {
        ResponseCodec::new()
    }
}

/// How a handler's error is classified, stored, replayed and built from an
/// [`IdempotencyError`]: its trait bounds checked once, kept as function pointers.
pub struct ErrorCodec<E> {
    pub(crate) encode: Encode<E>,
    pub(crate) decode: Decode<E>,
    pub(crate) classify: fn(&E) -> FailureKind,
    pub(crate) from: fn(IdempotencyError) -> E,
}

impl<E> ErrorCodec<E>
where
    E: Serialize + DeserializeOwned + Classify + From<IdempotencyError>,
{
    pub fn new() -> Self {
        ErrorCodec {
            encode: |e: &E| serde_json::to_string(e),
            decode: |s: &str| serde_json::from_str(s),
            classify: |e: &E| e.classify(),
            from: E::from,
        }
    }
}

impl<E> Default for ErrorCodec<E>
where
    E: Serialize + DeserializeOwned + Classify + From<IdempotencyError>,
{
    fn default() -> Self {
        ErrorCodec::new()
    }
}
