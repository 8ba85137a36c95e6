//! Checkout: charging the customer through the payment gateway.
//!
//! `checkout` is the rpc-in-transaction hazard: it calls the gateway while the transaction that
//! moved the order to "processing" is open. If the call times out the handler rolls back, but the
//! provider may have charged the card: local state says "pending", the money is gone, and the
//! order row stayed locked for the whole round trip.
//! `checkout_guarded` persists "processing" (with a fresh payment attempt id) and commits, calls
//! the gateway with no transaction open, then records the outcome with a conditional UPDATE; a
//! timeout is recorded as "payment_unknown" for reconciliation, never as a failure.
//! `checkout_eager` is the timeout-as-failure hazard: shaped like the guarded version, it
//! records an unanswered call as "payment_failed".

use axum::extract::{Path, State};
use axum::http::StatusCode;

use crate::gateway::GatewayError;
use crate::state::AppState;

fn internal(err: sqlx::Error) -> StatusCode {
    eprintln!("database error: {err}");
    StatusCode::INTERNAL_SERVER_ERROR
}

const START_ATTEMPT: &str = "UPDATE orders \
     SET status = 'processing', payment_attempt_id = lower(hex(randomblob(8))), \
         attempt_expires_at = datetime('now', '+5 minutes') \
     WHERE id = ? AND status IN ('pending', 'payment_failed') \
     RETURNING payment_attempt_id, amount_cents";

/// Moves the order to "processing" with a fresh payment attempt id and commits: the attempt
/// id and the amount, or `None` when the order cannot be paid now.
async fn start_attempt(app: &AppState, order_id: i64) -> Result<Option<(String, i64)>, StatusCode> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let started: Option<(String, i64)> = sqlx::query_as(START_ATTEMPT)
        .bind(order_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(started)
}

/// `POST /orders/{id}/checkout` — HAZARD (rpc-in-transaction).
pub async fn checkout(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
) -> Result<StatusCode, StatusCode> {
    let mut tx = app.db.begin().await.map_err(internal)?;
    let started: Option<(String, i64)> = sqlx::query_as(START_ATTEMPT)
        .bind(order_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(internal)?;
    let Some((attempt_id, amount_cents)) = started else {
        return Ok(StatusCode::CONFLICT);
    };
    let charged = app.gateway.charge(&attempt_id, amount_cents).await;
    //~^ rpc-in-transaction
    match charged {
        Ok(charge_id) => {
            sqlx::query(
                "UPDATE orders SET status = 'paid', charge_id = ? \
                 WHERE id = ? AND payment_attempt_id = ?",
            )
            .bind(charge_id)
            .bind(order_id)
            .bind(&attempt_id)
            .execute(&mut *tx)
            .await
            .map_err(internal)?;
            tx.commit().await.map_err(internal)?;
            Ok(StatusCode::OK)
        }
        Err(_) => {
            tx.rollback().await.map_err(internal)?;
            Ok(StatusCode::BAD_GATEWAY)
        }
    }
}

/// `POST /v2/orders/{id}/checkout` — guarded: commit "processing" first, call out, then record
/// the outcome conditionally on the same attempt id.
pub async fn checkout_guarded(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
) -> Result<StatusCode, StatusCode> {
    let Some((attempt_id, amount_cents)) = start_attempt(&app, order_id).await? else {
        return Ok(StatusCode::CONFLICT);
    };

    let (status, charge_id, code) = match app.gateway.charge(&attempt_id, amount_cents).await {
        Ok(charge_id) => ("paid", Some(charge_id), StatusCode::OK),
        Err(GatewayError::Declined(_)) => ("payment_failed", None, StatusCode::PAYMENT_REQUIRED),
        Err(GatewayError::Unknown(_)) => ("payment_unknown", None, StatusCode::ACCEPTED),
    };
    let recorded = sqlx::query(
        "UPDATE orders SET status = ?, charge_id = ? \
         WHERE id = ? AND payment_attempt_id = ? AND status = 'processing'",
    )
    .bind(status)
    .bind(charge_id)
    .bind(order_id)
    .bind(attempt_id)
    .execute(&app.db)
    .await
    .map_err(internal)?;
    if recorded.rows_affected() != 1 {
        // The order moved on (cancelled, or a callback recorded the result first): leave it.
        return Ok(StatusCode::CONFLICT);
    }
    Ok(code)
}

/// `POST /v3/orders/{id}/checkout` — HAZARD (timeout-as-failure): like the guarded version it
/// commits "processing" and calls out with no transaction open, but it records every gateway
/// error, an unanswered call too, as "payment_failed". The customer is asked to pay again for
/// a charge that may have gone through.
pub async fn checkout_eager(
    State(app): State<AppState>,
    Path(order_id): Path<i64>,
) -> Result<StatusCode, StatusCode> {
    let Some((attempt_id, amount_cents)) = start_attempt(&app, order_id).await? else {
        return Ok(StatusCode::CONFLICT);
    };

    match app.gateway.charge(&attempt_id, amount_cents).await {
        Ok(charge_id) => {
            sqlx::query(
                "UPDATE orders SET status = 'paid', charge_id = ? \
                 WHERE id = ? AND payment_attempt_id = ? AND status = 'processing'",
            )
            .bind(charge_id)
            .bind(order_id)
            .bind(&attempt_id)
            .execute(&app.db)
            .await
            .map_err(internal)?;
            Ok(StatusCode::OK)
        }
        Err(_) => {
            sqlx::query(
                //~^ timeout-as-failure
                "UPDATE orders SET status = 'payment_failed' \
                 WHERE id = ? AND payment_attempt_id = ? AND status = 'processing'",
            )
            .bind(order_id)
            .bind(&attempt_id)
            .execute(&app.db)
            .await
            .map_err(internal)?;
            Ok(StatusCode::PAYMENT_REQUIRED)
        }
    }
}
