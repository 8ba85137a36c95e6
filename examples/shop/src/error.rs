//! The error type of the handlers written with `#[staleguard::fenced]`: a database failure or a
//! guard failure (the lease is held by another call, the lease store failed), mapped to HTTP.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Why a fenced handler failed (a *stale* call is not a failure: it returns its `stale` value).
#[derive(Debug)]
pub enum ShopError {
    /// The database failed (the transaction, the re-read or the write).
    Db(sqlx::Error),
    /// The lease or the fence check failed.
    Guard(staleguard::Error),
}

impl From<sqlx::Error> for ShopError {
    fn from(err: sqlx::Error) -> Self {
        ShopError::Db(err)
    }
}

impl From<staleguard::Error> for ShopError {
    fn from(err: staleguard::Error) -> Self {
        ShopError::Guard(err)
    }
}

impl From<staleguard::lease::LeaseError> for ShopError {
    fn from(err: staleguard::lease::LeaseError) -> Self {
        ShopError::Guard(err.into())
    }
}

impl IntoResponse for ShopError {
    fn into_response(self) -> Response {
        match self {
            // Another call holds the resource's lease: the caller (the provider's webhook
            // redelivery, the timer's job queue) retries later.
            ShopError::Guard(staleguard::Error::Held(held)) => {
                (StatusCode::CONFLICT, format!("busy: {held}")).into_response()
            }
            ShopError::Guard(err) => {
                eprintln!("guard error: {err}");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
            ShopError::Db(err) => {
                eprintln!("database error: {err}");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}
