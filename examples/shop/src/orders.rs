//! Orders and the asynchronous payment callback.
//!
//! `payment_callback` is the check-before-lock hazard: it reads the order, tests its status, and
//! only then opens the transaction and writes "paid" by id. A cancel that commits between the
//! read and the write is overwritten, and a cancelled order ships.
//! `payment_callback_guarded` opens the transaction first, re-reads the order inside it, verifies
//! the operation identity (the payment attempt id) and writes with a conditional UPDATE whose
//! rows-affected count is checked.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::state::AppState;

fn internal(err: sqlx::Error) -> StatusCode {
    eprintln!("database error: {err}");
    StatusCode::INTERNAL_SERVER_ERROR
}

#[derive(Deserialize)]
pub struct NewOrder {
    pub customer: String,
    pub amount_cents: i64,
}

/// `POST /orders`: creates a pending order.
pub async fn create_order(
    State(app): State<AppState>,
    Json(new): Json<NewOrder>,
) -> Result<Json<Value>, StatusCode> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO orders (customer, amount_cents) VALUES (?, ?) RETURNING id",
    )
    .bind(new.customer)
    .bind(new.amount_cents)
    .fetch_one(&app.db)
    .await
    .map_err(internal)?;
    Ok(Json(json!({ "id": id, "status": "pending" })))
}

/// `GET /orders/{id}`.
pub async fn get_order(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
) -> Result<Json<Value>, StatusCode> {
    let row: Option<(String, i64, Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT status, amount_cents, payment_attempt_id, charge_id FROM orders WHERE id = ?",
    )
    .bind(order_id)
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let (status, amount_cents, attempt, charge) = row.ok_or(StatusCode::NOT_FOUND)?;
    Ok(Json(json!({
        "id": order_id,
        "status": status,
        "amount_cents": amount_cents,
        "payment_attempt_id": attempt,
        "charge_id": charge,
    })))
}

/// `POST /orders/{id}/cancel`: a conditional transition, guarded in its WHERE clause.
pub async fn cancel_order(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
) -> Result<StatusCode, StatusCode> {
    let done = sqlx::query(
        "UPDATE orders SET status = 'cancelled' \
         WHERE id = ? AND status IN ('pending', 'processing', 'payment_failed', 'payment_unknown')",
    )
    .bind(order_id)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    Ok(if done.rows_affected() == 1 {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::CONFLICT
    })
}

/// What the payment provider's webhook says.
#[derive(Deserialize)]
pub struct PaymentCallback {
    pub payment_attempt_id: String,
    pub amount_cents: i64,
    pub charge_id: String,
}

/// `POST /orders/{id}/payment-callback` — HAZARD (check-before-lock).
pub async fn payment_callback(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
    Json(cb): Json<PaymentCallback>,
) -> Result<StatusCode, StatusCode> {
    let row: Option<(String, i64)> =
        sqlx::query_as("SELECT status, amount_cents FROM orders WHERE id = ?")
            .bind(order_id)
            .fetch_optional(&app.db)
            .await
            .map_err(internal)?;
    let (status, amount_cents) = row.ok_or(StatusCode::NOT_FOUND)?;
    if status != "processing" || amount_cents != cb.amount_cents {
        return Ok(StatusCode::CONFLICT);
    }
    let mut tx = app.db.begin().await.map_err(internal)?;
    sqlx::query("UPDATE orders SET status = 'paid', charge_id = ? WHERE id = ?")
        //~^ check-before-lock
        .bind(cb.charge_id)
        .bind(order_id)
        .execute(&mut *tx)
        .await
        .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(StatusCode::OK)
}

/// `POST /v2/orders/{id}/payment-callback` — guarded: transaction, re-read, verify the attempt
/// id, conditional write. A stale callback (cancelled order, superseded attempt) exits without
/// writing and answers 200 so the provider stops retrying; reconciliation refunds it.
pub async fn payment_callback_guarded(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
    Json(cb): Json<PaymentCallback>,
) -> Result<(StatusCode, &'static str), StatusCode> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let row: Option<(String, i64, Option<String>)> =
        sqlx::query_as("SELECT status, amount_cents, payment_attempt_id FROM orders WHERE id = ?")
            .bind(order_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(internal)?;
    let (status, amount_cents, attempt) = row.ok_or(StatusCode::NOT_FOUND)?;
    let current_attempt = attempt.as_deref() == Some(cb.payment_attempt_id.as_str());
    if !current_attempt || amount_cents != cb.amount_cents {
        return Ok((StatusCode::OK, "stale"));
    }
    if status == "paid" {
        return Ok((StatusCode::OK, "already paid"));
    }
    let done = sqlx::query(
        "UPDATE orders SET status = 'paid', charge_id = ? \
         WHERE id = ? AND payment_attempt_id = ? AND status IN ('processing', 'payment_unknown')",
    )
    .bind(cb.charge_id)
    .bind(order_id)
    .bind(cb.payment_attempt_id)
    .execute(&mut *tx)
    .await
    .map_err(internal)?;
    if done.rows_affected() != 1 {
        return Ok((StatusCode::OK, "stale"));
    }
    tx.commit().await.map_err(internal)?;
    Ok((StatusCode::OK, "paid"))
}
