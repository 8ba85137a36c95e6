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
//! `redeem_voucher_idempotent` gets that state machine from `#[staleguard::idempotent]` (claim
//! with a lease and a fence, replay, in progress, takeover, UNKNOWN on a timeout): the body only
//! reads the voucher, credits it with the record id as the provider's idempotency key, and
//! deletes the token *after* the credit.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use staleguard::idempotency::{Classify, FailureKind, IdempotencyError};

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

/// What a redemption answers; stored with the idempotency record and replayed to duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redeemed {
    pub amount_cents: i64,
    /// The provider's credit id.
    pub credit_id: String,
}

/// Why `redeem_voucher_idempotent` did not redeem. Serializable: a permanent failure is stored
/// and replayed like a success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RedeemError {
    /// No such voucher (never issued, or redeemed and past the record's retention).
    UnknownVoucher,
    /// The provider refused the credit: nothing happened.
    Declined(u16),
    /// The provider did not answer: the credit may have happened. The record stays UNKNOWN
    /// until reconciled; duplicates get "in progress".
    CreditUnknown,
    /// The database failed. Before the credit nothing happened; after it, a retry repeats the
    /// credit with the same record id, which the provider deduplicates, then deletes the token.
    Database(String),
    /// The request's idempotency outcome: in progress (409), key reused with another payload
    /// (422), missing or invalid key (400), store failure (503).
    Idempotency {
        status: u16,
        retry_after: Option<u64>,
        message: String,
    },
}

impl RedeemError {
    fn db(err: sqlx::Error) -> Self {
        RedeemError::Database(err.to_string())
    }
}

impl From<GatewayError> for RedeemError {
    fn from(err: GatewayError) -> Self {
        match err {
            GatewayError::Declined(status) => RedeemError::Declined(status),
            GatewayError::Unknown(_) => RedeemError::CreditUnknown,
        }
    }
}

impl From<IdempotencyError> for RedeemError {
    fn from(err: IdempotencyError) -> Self {
        RedeemError::Idempotency {
            status: err.status(),
            retry_after: err.retry_after_secs(),
            message: err.to_string(),
        }
    }
}

impl Classify for RedeemError {
    fn classify(&self) -> FailureKind {
        match self {
            RedeemError::CreditUnknown => FailureKind::Unknown,
            // Nothing a retry could duplicate: the record is released and the customer may retry.
            RedeemError::UnknownVoucher
            | RedeemError::Declined(_)
            | RedeemError::Database(_)
            | RedeemError::Idempotency { .. } => FailureKind::Retryable,
        }
    }
}

impl IntoResponse for RedeemError {
    fn into_response(self) -> Response {
        match self {
            RedeemError::UnknownVoucher => {
                (StatusCode::NOT_FOUND, "unknown voucher").into_response()
            }
            RedeemError::Declined(_) => {
                (StatusCode::BAD_GATEWAY, "declined, retry later").into_response()
            }
            RedeemError::CreditUnknown => {
                (StatusCode::ACCEPTED, "outcome being reconciled").into_response()
            }
            RedeemError::Database(err) => {
                eprintln!("database error: {err}");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
            RedeemError::Idempotency {
                status,
                retry_after,
                message,
            } => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = (status, message).into_response();
                if let Some(secs) = retry_after {
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                }
                response
            }
        }
    }
}

/// `POST /v3/vouchers/{token}/redeem` — guarded by `#[staleguard::idempotent]`, keyed by the
/// voucher token: the first request claims the record and runs the body; a duplicate in flight
/// gets 409 with `Retry-After`; a later duplicate gets the stored response; a credit that timed
/// out leaves the record UNKNOWN (never "failed", never run again before it is reconciled).
/// The body deletes the voucher token only after the credit succeeded.
#[staleguard::idempotent(store = app.idempotency, key = token, claim = claim)]
pub async fn redeem_voucher_idempotent(
    State(app): State<AppState>,
    Path(token): Path<String>,
) -> Result<Json<Redeemed>, RedeemError> {
    let amount: Option<i64> =
        sqlx::query_scalar("SELECT amount_cents FROM voucher_tokens WHERE token = ?")
            .bind(&token)
            .fetch_optional(&app.db)
            .await
            .map_err(RedeemError::db)?;
    let Some(amount_cents) = amount else {
        return Err(RedeemError::UnknownVoucher);
    };
    // The record id is the same for every owner of this key (a takeover after a crash too):
    // as the provider's idempotency key it makes a repeated credit a no-op.
    let credit_id = app.gateway.credit(claim.record_id(), amount_cents).await?;
    sqlx::query("DELETE FROM voucher_tokens WHERE token = ?")
        .bind(&token)
        .execute(&app.db)
        .await
        .map_err(RedeemError::db)?;
    Ok(Json(Redeemed {
        amount_cents,
        credit_id,
    }))
}
