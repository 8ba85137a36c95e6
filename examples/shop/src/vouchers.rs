//! Vouchers: one-time tokens that credit money to the customer.
//!
//! `redeem_voucher` is the token-deleted-before-effect hazard: it deletes the voucher token
//! first and credits afterwards. When the gateway call fails or times out, the token is already
//! gone: the customer cannot retry and the money was (maybe) never credited.
//! `redeem_voucher_guarded` claims the redemption atomically with an owner and a lease
//! (`INSERT .. ON CONFLICT DO NOTHING RETURNING owner`: no row means someone else holds it),
//! credits, then marks the redemption succeeded by compare-and-set on (token, owner,
//! processing). A duplicate in flight gets 409, a replay gets the stored result, a definite
//! decline releases the claim so the customer may retry, and a timeout is kept as "unknown" for
//! reconciliation. (Taking over an expired lease is left to the reconciler in this example.)

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::gateway::GatewayError;
use crate::state::AppState;

fn internal(err: sqlx::Error) -> StatusCode {
    eprintln!("database error: {err}");
    StatusCode::INTERNAL_SERVER_ERROR
}

#[derive(Deserialize)]
pub struct NewVoucher {
    pub customer: String,
    pub amount_cents: i64,
}

/// `POST /vouchers`: issues a voucher token.
pub async fn issue_voucher(
    State(app): State<AppState>,
    Json(new): Json<NewVoucher>,
) -> Result<Json<Value>, StatusCode> {
    let token: String = sqlx::query_scalar(
        "INSERT INTO voucher_tokens (token, customer, amount_cents) \
         VALUES (lower(hex(randomblob(16))), ?, ?) RETURNING token",
    )
    .bind(new.customer)
    .bind(new.amount_cents)
    .fetch_one(&app.db)
    .await
    .map_err(internal)?;
    Ok(Json(json!({ "token": token })))
}

/// `POST /vouchers/{token}/redeem` — HAZARD (token-deleted-before-effect).
pub async fn redeem_voucher(
    State(app): State<AppState>,
    Path(token): Path<String>,
) -> Result<StatusCode, StatusCode> {
    let voucher: Option<(String, i64)> = sqlx::query_as(
        //~^ token-deleted-before-effect
        "DELETE FROM voucher_tokens WHERE token = ? RETURNING customer, amount_cents",
    )
    .bind(&token)
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let Some((_customer, amount_cents)) = voucher else {
        return Ok(StatusCode::GONE);
    };
    match app.gateway.credit(&token, amount_cents).await {
        Ok(_) => Ok(StatusCode::OK),
        Err(_) => Ok(StatusCode::BAD_GATEWAY),
    }
}

/// `POST /v2/vouchers/{token}/redeem` — guarded: atomic claim, effect, completion mark.
pub async fn redeem_voucher_guarded(
    State(app): State<AppState>,
    Path(token): Path<String>,
) -> Result<(StatusCode, &'static str), StatusCode> {
    let amount: Option<i64> =
        sqlx::query_scalar("SELECT amount_cents FROM voucher_tokens WHERE token = ?")
            .bind(&token)
            .fetch_optional(&app.db)
            .await
            .map_err(internal)?;
    let Some(amount_cents) = amount else {
        return Ok((StatusCode::NOT_FOUND, "unknown voucher"));
    };
    let claim: Option<String> = sqlx::query_scalar(
        "INSERT INTO voucher_redemptions (token, state, owner, lease_until) \
         VALUES (?, 'processing', lower(hex(randomblob(8))), datetime('now', '+60 seconds')) \
         ON CONFLICT (token) DO NOTHING RETURNING owner",
    )
    .bind(&token)
    .fetch_optional(&app.db)
    .await
    .map_err(internal)?;
    let Some(owner) = claim else {
        let state: String =
            sqlx::query_scalar("SELECT state FROM voucher_redemptions WHERE token = ?")
                .bind(&token)
                .fetch_one(&app.db)
                .await
                .map_err(internal)?;
        return Ok(match state.as_str() {
            "succeeded" => (StatusCode::OK, "already redeemed"),
            "unknown" => (StatusCode::ACCEPTED, "outcome being reconciled"),
            _ => (StatusCode::CONFLICT, "redemption in progress"),
        });
    };
    match app.gateway.credit(&token, amount_cents).await {
        Ok(credit_id) => {
            sqlx::query(
                "UPDATE voucher_redemptions SET state = 'succeeded', credit_id = ? \
                 WHERE token = ? AND owner = ? AND state = 'processing'",
            )
            .bind(credit_id)
            .bind(&token)
            .bind(&owner)
            .execute(&app.db)
            .await
            .map_err(internal)?;
            Ok((StatusCode::OK, "redeemed"))
        }
        Err(GatewayError::Declined(_)) => {
            // Nothing happened at the provider: release the claim so a retry may proceed.
            sqlx::query(
                "DELETE FROM voucher_redemptions WHERE token = ? AND owner = ? AND state = 'processing'",
            )
            .bind(&token)
            .bind(&owner)
                .execute(&app.db)
                .await
                .map_err(internal)?;
            Ok((StatusCode::BAD_GATEWAY, "declined, retry later"))
        }
        Err(GatewayError::Unknown(_)) => {
            sqlx::query(
                "UPDATE voucher_redemptions SET state = 'unknown' \
                 WHERE token = ? AND owner = ? AND state = 'processing'",
            )
            .bind(&token)
            .bind(&owner)
            .execute(&app.db)
            .await
            .map_err(internal)?;
            Ok((StatusCode::ACCEPTED, "outcome being reconciled"))
        }
    }
}
