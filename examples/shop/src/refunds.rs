//! Refunds: a customer asks for an order's refund with an `Idempotency-Key` header, and a worker
//! pays the requested refunds out through the gateway.
//!
//! `request_refund` is the duplicate-as-failure hazard: it records the request under its key,
//! and answers a key it has seen before with 409 without looking at the record. The client that
//! retries while the first request is still being recorded, or after it was paid out, is told
//! that its refund failed; it retries again, or tells the customer the refund was refused.
//! `request_refund_guarded` reads the record on the conflict and answers from it: the refund id
//! once paid, 202 while it is still on its way, 422 when the key was used for another order.
//!
//! `run_refunds` is the processing-without-lease hazard: it claims a requested refund by moving
//! it to `processing` with a compare-and-set, but writes no lease and no owner. A worker that
//! dies between the claim and the payout leaves the refund `processing` for ever: no other worker
//! will touch it. `run_refunds_guarded` writes an owner and a lease with the claim, takes over a
//! refund whose lease ran out, and completes by compare-and-set on the owner, so an old worker
//! that wakes up late cannot overwrite the new one's outcome.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::gateway::GatewayError;
use crate::state::AppState;

fn internal(err: sqlx::Error) -> StatusCode {
    eprintln!("database error: {err}");
    StatusCode::INTERNAL_SERVER_ERROR
}

/// The request's `Idempotency-Key` header (400 without one).
fn idempotency_key(headers: &HeaderMap) -> Result<String, StatusCode> {
    headers
        .get("Idempotency-Key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .ok_or(StatusCode::BAD_REQUEST)
}

/// `POST /orders/{id}/refund` — HAZARD (duplicate-as-failure).
pub async fn request_refund(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<Value>), StatusCode> {
    let key = idempotency_key(&headers)?;
    let recorded = sqlx::query(
        "INSERT INTO refund_requests (idempotency_key, order_id, state) VALUES (?, ?, 'requested')",
    )
    .bind(&key)
    .bind(order_id)
    .execute(&app.db)
    .await;
    match recorded {
        Ok(_) => Ok((StatusCode::ACCEPTED, Json(json!({ "state": "requested" })))),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            //~^ duplicate-as-failure
            Err(StatusCode::CONFLICT)
        }
        Err(e) => Err(internal(e)),
    }
}

/// `POST /v2/orders/{id}/refund` — guarded: a repeated key is answered from its record.
pub async fn request_refund_guarded(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<Value>), StatusCode> {
    let key = idempotency_key(&headers)?;
    let recorded = sqlx::query(
        "INSERT INTO refund_requests (idempotency_key, order_id, state) VALUES (?, ?, 'requested')",
    )
    .bind(&key)
    .bind(order_id)
    .execute(&app.db)
    .await;
    match recorded {
        Ok(_) => Ok((StatusCode::ACCEPTED, Json(json!({ "state": "requested" })))),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            let (first_order, state, refund_id): (i64, String, Option<String>) = sqlx::query_as(
                "SELECT order_id, state, refund_id FROM refund_requests WHERE idempotency_key = ?",
            )
            .bind(&key)
            .fetch_one(&app.db)
            .await
            .map_err(internal)?;
            Ok(match (state.as_str(), refund_id) {
                _ if first_order != order_id => (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    Json(json!({ "error": "key already used for another order" })),
                ),
                ("refunded", Some(id)) => (
                    StatusCode::OK,
                    Json(json!({ "state": "refunded", "refund_id": id })),
                ),
                (state, _) => (StatusCode::ACCEPTED, Json(json!({ "state": state }))),
            })
        }
        Err(e) => Err(internal(e)),
    }
}

/// `POST /refunds/run` — HAZARD (processing-without-lease): pays out one requested refund.
/// Answers the key it handled, if any.
pub async fn run_refunds(State(app): State<AppState>) -> Result<Json<Value>, StatusCode> {
    let next: Option<(String, i64)> = sqlx::query_as(
        "SELECT r.idempotency_key, o.amount_cents FROM refund_requests r \
         JOIN orders o ON o.id = r.order_id WHERE r.state = 'requested' LIMIT 1",
    )
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let Some((key, amount_cents)) = next else {
        return Ok(Json(json!({ "handled": null })));
    };
    let claimed = sqlx::query(
        //~^ processing-without-lease
        "UPDATE refund_requests SET state = 'processing' WHERE idempotency_key = ? AND state = 'requested'",
    )
    .bind(&key)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    if claimed.rows_affected() == 0 {
        return Ok(Json(json!({ "handled": null })));
    }
    let (state, refund_id) = match app.gateway.credit(&key, amount_cents).await {
        Ok(id) => ("refunded", Some(id)),
        Err(GatewayError::Declined(_)) => ("requested", None),
        Err(GatewayError::Unknown(_)) => ("unknown", None),
    };
    sqlx::query(
        "UPDATE refund_requests SET state = ?, refund_id = ? \
         WHERE idempotency_key = ? AND state = 'processing'",
    )
    .bind(state)
    .bind(refund_id)
    .bind(&key)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    Ok(Json(json!({ "handled": key, "state": state })))
}

/// `POST /v2/refunds/run` — guarded: the claim carries an owner and a lease, an expired lease
/// is taken over, and the outcome is written only by the claim's owner.
pub async fn run_refunds_guarded(State(app): State<AppState>) -> Result<Json<Value>, StatusCode> {
    let next: Option<(String, i64)> = sqlx::query_as(
        "SELECT r.idempotency_key, o.amount_cents FROM refund_requests r \
         JOIN orders o ON o.id = r.order_id \
         WHERE r.state = 'requested' OR (r.state = 'processing' AND r.lease_until < datetime('now')) \
         LIMIT 1",
    )
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let Some((key, amount_cents)) = next else {
        return Ok(Json(json!({ "handled": null })));
    };
    let owner: Option<String> = sqlx::query_scalar(
        "UPDATE refund_requests \
         SET state = 'processing', owner = lower(hex(randomblob(8))), \
             lease_until = datetime('now', '+60 seconds') \
         WHERE idempotency_key = ? \
           AND (state = 'requested' OR (state = 'processing' AND lease_until < datetime('now'))) \
         RETURNING owner",
    )
    .bind(&key)
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let Some(owner) = owner else {
        return Ok(Json(json!({ "handled": null })));
    };
    let (state, refund_id) = match app.gateway.credit(&key, amount_cents).await {
        Ok(id) => ("refunded", Some(id)),
        Err(GatewayError::Declined(_)) => ("requested", None),
        Err(GatewayError::Unknown(_)) => ("unknown", None),
    };
    sqlx::query(
        "UPDATE refund_requests SET state = ?, refund_id = ?, owner = NULL, lease_until = NULL \
         WHERE idempotency_key = ? AND owner = ? AND state = 'processing'",
    )
    .bind(state)
    .bind(refund_id)
    .bind(&key)
    .bind(&owner)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    Ok(Json(json!({ "handled": key, "state": state })))
}
