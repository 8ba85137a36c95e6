//! The carrier's delivery webhook.
//!
//! `carrier_webhook` is the blind-callback-write hazard: it writes the status the carrier reports
//! by order id alone. The carrier retries and reorders its events, so a "delivered" sent for a
//! parcel that was then stopped lands after the order was cancelled, and a cancelled order is
//! marked delivered (and never refunded).
//! `carrier_webhook_guarded` lets the stored state decide: it moves only an order that is paid,
//! and answers 200 "stale" when no row moved, so the carrier stops retrying.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::error::ShopError;
use crate::state::AppState;

/// What the carrier posts when it delivers a parcel.
#[derive(Deserialize)]
pub struct CarrierEvent {
    pub order_id: i64,
    pub tracking_id: String,
}

/// `POST /webhooks/carrier` — hazard: the carrier's word is written over whatever the order is
/// now.
pub async fn carrier_webhook(
    State(app): State<AppState>,
    Json(ev): Json<CarrierEvent>,
) -> Result<StatusCode, ShopError> {
    sqlx::query("UPDATE orders SET status = 'delivered' WHERE id = ?")
        //~^ blind-callback-write, unguarded-state-transition
        .bind(ev.order_id)
        .execute(&app.db)
        .await?;
    Ok(StatusCode::OK)
}

/// `POST /v2/webhooks/carrier` — guarded: only a paid order becomes delivered; a stale event
/// (the order was cancelled, or is delivered already) changes nothing.
pub async fn carrier_webhook_guarded(
    State(app): State<AppState>,
    Json(ev): Json<CarrierEvent>,
) -> Result<(StatusCode, &'static str), ShopError> {
    let moved =
        sqlx::query("UPDATE orders SET status = 'delivered' WHERE id = ? AND status = 'paid'")
            .bind(ev.order_id)
            .execute(&app.db)
            .await?;
    if moved.rows_affected() == 0 {
        eprintln!(
            "stale carrier event for order {} ({})",
            ev.order_id, ev.tracking_id
        );
        return Ok((StatusCode::OK, "stale"));
    }
    Ok((StatusCode::OK, "delivered"))
}
