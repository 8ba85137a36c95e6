//! The HTTP routes: each hazardous handler under its plain path, its guarded version under
//! `/v2/...`, the versions written with staleguard's macros under `/v3/...`, and the stand-in
//! payment provider under `/psp`.

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;
use crate::{checkout, orders, payouts, psp_stub, refunds, seats, shipping, vouchers};

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/orders", post(orders::create_order))
        .route("/orders/{id}", get(orders::get_order))
        .route("/orders/{id}/cancel", post(orders::cancel_order))
        .route(
            "/orders/{id}/payment-callback",
            post(orders::payment_callback),
        )
        .route(
            "/v2/orders/{id}/payment-callback",
            post(orders::payment_callback_guarded),
        )
        .route(
            "/v3/orders/{id}/payment-callback",
            post(orders::payment_callback_fenced),
        )
        .route("/payouts/run", post(payouts::run_payouts))
        .route("/v2/payouts/run", post(payouts::run_payouts_guarded))
        .route("/webhooks/carrier", post(shipping::carrier_webhook))
        .route(
            "/v2/webhooks/carrier",
            post(shipping::carrier_webhook_guarded),
        )
        .route("/orders/{id}/checkout", post(checkout::checkout))
        .route("/v2/orders/{id}/checkout", post(checkout::checkout_guarded))
        .route("/v3/orders/{id}/checkout", post(checkout::checkout_eager))
        .route("/orders/{id}/refund", post(refunds::request_refund))
        .route(
            "/v2/orders/{id}/refund",
            post(refunds::request_refund_guarded),
        )
        .route("/refunds/run", post(refunds::run_refunds))
        .route("/v2/refunds/run", post(refunds::run_refunds_guarded))
        .route("/vouchers", post(vouchers::issue_voucher))
        .route("/vouchers/{token}/redeem", post(vouchers::redeem_voucher))
        .route(
            "/v2/vouchers/{token}/redeem",
            post(vouchers::redeem_voucher_guarded),
        )
        .route(
            "/v3/vouchers/{token}/redeem",
            post(vouchers::redeem_voucher_idempotent),
        )
        .route("/seats/{id}/hold", post(seats::hold_seat))
        .route("/v3/seats/{id}/hold", post(seats::hold_seat_fenced))
        .route("/v2/seats/{id}/hold", post(seats::hold_seat_guarded))
        .route("/seats/{id}/release", post(seats::release_seat))
        .route("/psp/charges", post(psp_stub::approve))
        .route("/psp/credits", post(psp_stub::approve))
        .with_state(state)
}
