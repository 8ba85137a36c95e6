//! axum handlers with extractors (`State`, `Path`, `Json`, the key header) are still axum handlers.

#[path = "../support.rs"]
mod support;
use support::*;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use staleguard::idempotency::axum::IdempotencyKeyHeader;
use std::sync::Arc;

impl IntoResponse for PayError {
    fn into_response(self) -> Response {
        (axum::http::StatusCode::PAYMENT_REQUIRED, format!("{self:?}")).into_response()
    }
}

/// The key comes from the `Idempotency-Key` header; the response is `Json<T>` (stored as `T`).
#[staleguard::idempotent(store = state.idem, key = key)]
async fn create_payment(
    State(state): State<Arc<AppState>>,
    key: IdempotencyKeyHeader,
    Json(req): Json<Pay>,
) -> Result<Json<Receipt>, PayError> {
    Ok(Json(Receipt { amount: req.amount }))
}

/// An optional header (a missing key is still a 400, from the macro), a path segment as tenant.
#[staleguard::idempotent(store = state.idem, key = key, tenant = account, claim = claim)]
async fn refund(
    State(state): State<Arc<AppState>>,
    Path(account): Path<String>,
    key: Option<IdempotencyKeyHeader>,
    Json(req): Json<Pay>,
) -> Result<Json<Receipt>, PayError> {
    let _ = claim.fence();
    Ok(Json(Receipt { amount: req.amount }))
}

fn main() {
    let state = Arc::new(AppState { idem: staleguard::idempotency::Idempotency::new(Default::default()) });
    let _app: Router = Router::new()
        .route("/payments", post(create_payment))
        .route("/accounts/{account}/refunds", post(refund))
        .with_state(state);
}
