//! A stand-in payment provider mounted under `/psp`, so the example runs without network access.
//! It approves every request and answers with a reference-derived id.

use axum::Json;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub struct StubRequest {
    pub reference: String,
    pub amount_cents: i64,
}

/// `POST /psp/charges` and `POST /psp/credits`.
pub async fn approve(Json(req): Json<StubRequest>) -> Json<Value> {
    Json(json!({ "id": format!("psp-{}-{}", req.reference, req.amount_cents) }))
}
