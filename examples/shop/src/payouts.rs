//! Payouts: a sweep that marks delivered orders paid out, run by one worker at a time under a
//! lease from the staleguard lease store.
//!
//! `run_payouts` is the lease-without-fencing hazard: the lease keeps a second sweeper out only
//! while it lasts. A sweeper that stalls past the lease's 30 s (a slow disk, a paused VM) wakes
//! up and writes anyway, after another sweeper took the lease over and paid the same orders out
//! on its own terms.
//! `run_payouts_guarded` passes the lease's fencing token to the write: each row keeps the
//! newest token that paid it out, and a write with an older token moves nothing.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use sqlx::SqlitePool;
use staleguard::lease::{FencingToken, LeaseStore};

use crate::error::ShopError;
use crate::state::AppState;

/// How long one sweep may hold the payouts lease.
const PAYOUT_LEASE: Duration = Duration::from_secs(30);

/// `POST /payouts/run` — hazard: the write under the lease carries no fencing token.
pub async fn run_payouts(State(app): State<AppState>) -> Result<Json<Value>, ShopError> {
    let lease = app
        .leases
        .acquire("payouts", "sweeper", PAYOUT_LEASE)
        .await?;
    let done = sqlx::query("UPDATE orders SET status = 'paid_out' WHERE status = 'delivered'")
        //~^ lease-without-fencing
        .execute(&app.db)
        .await?;
    app.leases.release(&lease).await?;
    Ok(Json(json!({ "paid_out": done.rows_affected() })))
}

/// `POST /v2/payouts/run` — guarded: the write is fenced by the lease's token.
pub async fn run_payouts_guarded(State(app): State<AppState>) -> Result<Json<Value>, ShopError> {
    let lease = app
        .leases
        .acquire("payouts", "sweeper", PAYOUT_LEASE)
        .await?;
    let paid = pay_out_delivered(&app.db, lease.token()).await?;
    app.leases.release(&lease).await?;
    Ok(Json(json!({ "paid_out": paid })))
}

/// Marks the delivered orders paid out under fencing token `token`, and only those no newer
/// token has touched: the write of a sweeper whose lease was taken over moves nothing.
pub async fn pay_out_delivered(db: &SqlitePool, token: FencingToken) -> Result<u64, sqlx::Error> {
    let token = i64::try_from(token.get()).unwrap_or(i64::MAX);
    let done = sqlx::query(
        "UPDATE orders SET status = 'paid_out', payout_fence = ? \
         WHERE status = 'delivered' AND COALESCE(payout_fence, 0) <= ?",
    )
    .bind(token)
    .bind(token)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
