//! Behaviour of the example shop's guarded handlers next to the hazards they replace, driven by
//! calling the handlers directly on an in-memory database. The payment provider is unreachable
//! (a closed local port), so every gateway call ends without a definite answer.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use staleguard::lease::FencingToken;
use staleguard_example_shop::seats::{HoldRequest, release_if_held, release_reservation};
use staleguard_example_shop::{
    AppState, checkout, orders, payouts, refunds, seats, shipping, vouchers,
};

async fn app() -> AppState {
    AppState::connect("sqlite::memory:", "http://127.0.0.1:9/psp")
        .await
        .expect("in-memory database opens")
}

async fn order_status(app: &AppState, id: i64) -> (String, Option<String>) {
    sqlx::query_as("SELECT status, payment_attempt_id FROM orders WHERE id = ?")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn new_order(app: &AppState, amount_cents: i64) -> i64 {
    let Json(v) = orders::create_order(
        State(app.clone()),
        Json(orders::NewOrder {
            customer: "ada".into(),
            amount_cents,
        }),
    )
    .await
    .unwrap();
    v["id"].as_i64().unwrap()
}

#[tokio::test]
async fn guarded_checkout_records_an_unanswered_gateway_call_as_unknown_not_failed() {
    let app = app().await;
    let id = new_order(&app, 1200).await;
    let code = checkout::checkout_guarded(State(app.clone()), Path(id))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::ACCEPTED);
    let (status, attempt) = order_status(&app, id).await;
    assert_eq!(status, "payment_unknown");
    assert!(attempt.is_some());
}

#[tokio::test]
async fn eager_checkout_records_an_unanswered_gateway_call_as_failed() {
    // The hazard the guarded version avoids: the provider never answered, yet the order says
    // the payment failed, and a retry would charge again.
    let app = app().await;
    let id = new_order(&app, 1200).await;
    let code = checkout::checkout_eager(State(app.clone()), Path(id))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::PAYMENT_REQUIRED);
    let (status, _) = order_status(&app, id).await;
    assert_eq!(status, "payment_failed");
}

#[tokio::test]
async fn late_callback_for_a_cancelled_order_is_ignored_by_the_guarded_handler() {
    let app = app().await;
    let id = new_order(&app, 1200).await;
    checkout::checkout_guarded(State(app.clone()), Path(id))
        .await
        .unwrap();
    let (_, attempt) = order_status(&app, id).await;
    let cancel = orders::cancel_order(State(app.clone()), Path(id))
        .await
        .unwrap();
    assert_eq!(cancel, StatusCode::NO_CONTENT);

    let (code, outcome) = orders::payment_callback_guarded(
        State(app.clone()),
        Path(id),
        Json(orders::PaymentCallback {
            payment_attempt_id: attempt.unwrap(),
            amount_cents: 1200,
            charge_id: "ch-late".into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!((code, outcome), (StatusCode::OK, "stale"));
    assert_eq!(order_status(&app, id).await.0, "cancelled");
}

#[tokio::test]
async fn callback_for_the_current_attempt_marks_the_order_paid_once() {
    let app = app().await;
    let id = new_order(&app, 700).await;
    checkout::checkout_guarded(State(app.clone()), Path(id))
        .await
        .unwrap();
    let attempt = order_status(&app, id).await.1.unwrap();
    let callback = || orders::PaymentCallback {
        payment_attempt_id: attempt.clone(),
        amount_cents: 700,
        charge_id: "ch-1".into(),
    };
    let first = orders::payment_callback_guarded(State(app.clone()), Path(id), Json(callback()))
        .await
        .unwrap();
    assert_eq!(first, (StatusCode::OK, "paid"));
    let replay = orders::payment_callback_guarded(State(app.clone()), Path(id), Json(callback()))
        .await
        .unwrap();
    assert_eq!(replay, (StatusCode::OK, "already paid"));
    let wrong_attempt = orders::payment_callback_guarded(
        State(app.clone()),
        Path(id),
        Json(orders::PaymentCallback {
            payment_attempt_id: "someone-else".into(),
            amount_cents: 700,
            charge_id: "ch-2".into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!(wrong_attempt, (StatusCode::OK, "stale"));
}

#[tokio::test]
async fn a_late_delivery_event_marks_a_cancelled_order_delivered_unless_guarded() {
    let app = app().await;
    let event = |order_id| {
        Json(shipping::CarrierEvent {
            order_id,
            tracking_id: "trk-1".into(),
        })
    };
    let paid = new_order(&app, 900).await;
    sqlx::query("UPDATE orders SET status = 'paid' WHERE id = ?")
        .bind(paid)
        .execute(&app.db)
        .await
        .unwrap();
    let delivered = shipping::carrier_webhook_guarded(State(app.clone()), event(paid))
        .await
        .unwrap();
    assert_eq!(delivered, (StatusCode::OK, "delivered"));
    assert_eq!(order_status(&app, paid).await.0, "delivered");

    let cancelled = new_order(&app, 500).await;
    orders::cancel_order(State(app.clone()), Path(cancelled))
        .await
        .unwrap();
    let guarded = shipping::carrier_webhook_guarded(State(app.clone()), event(cancelled))
        .await
        .unwrap();
    assert_eq!(guarded, (StatusCode::OK, "stale"));
    assert_eq!(order_status(&app, cancelled).await.0, "cancelled");
    let blind = shipping::carrier_webhook(State(app.clone()), event(cancelled))
        .await
        .unwrap();
    assert_eq!(blind, StatusCode::OK);
    assert_eq!(order_status(&app, cancelled).await.0, "delivered");
}

async fn set_status(app: &AppState, id: i64, status: &str) {
    sqlx::query("UPDATE orders SET status = ? WHERE id = ?")
        .bind(status)
        .bind(id)
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stale_sweepers_token_pays_nothing_out_but_the_unfenced_sweep_does() {
    let app = app().await;
    let id = new_order(&app, 400).await;
    set_status(&app, id, "delivered").await;
    let newer = payouts::pay_out_delivered(&app.db, FencingToken::new(2))
        .await
        .unwrap();
    assert_eq!(newer, 1);
    assert_eq!(order_status(&app, id).await.0, "paid_out");

    // The order is delivered again (a re-shipment); the sweeper holding token 1, whose lease
    // was taken over by token 2's, wakes up and writes.
    set_status(&app, id, "delivered").await;
    let stale = payouts::pay_out_delivered(&app.db, FencingToken::new(1))
        .await
        .unwrap();
    assert_eq!(stale, 0);
    assert_eq!(order_status(&app, id).await.0, "delivered");

    // The hazard's sweep has no token for the row to check.
    let Json(v) = payouts::run_payouts(State(app.clone())).await.unwrap();
    assert_eq!(v["paid_out"], 1);
    assert_eq!(order_status(&app, id).await.0, "paid_out");
}

async fn issue(app: &AppState) -> String {
    let Json(v) = vouchers::issue_voucher(
        State(app.clone()),
        Json(vouchers::NewVoucher {
            customer: "ada".into(),
            amount_cents: 300,
        }),
    )
    .await
    .unwrap();
    v["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn unguarded_redeem_burns_the_token_when_the_credit_fails() {
    let app = app().await;
    let token = issue(&app).await;
    let first = vouchers::redeem_voucher(State(app.clone()), Path(token.clone()))
        .await
        .unwrap();
    assert_eq!(first, StatusCode::BAD_GATEWAY);
    // The credit never happened, yet the customer can no longer retry.
    let retry = vouchers::redeem_voucher(State(app.clone()), Path(token))
        .await
        .unwrap();
    assert_eq!(retry, StatusCode::GONE);
}

#[tokio::test]
async fn guarded_redeem_keeps_the_token_and_reports_an_unknown_outcome() {
    let app = app().await;
    let token = issue(&app).await;
    let first = vouchers::redeem_voucher_guarded(State(app.clone()), Path(token.clone()))
        .await
        .unwrap();
    assert_eq!(first, (StatusCode::ACCEPTED, "outcome being reconciled"));
    let again = vouchers::redeem_voucher_guarded(State(app.clone()), Path(token.clone()))
        .await
        .unwrap();
    assert_eq!(again, (StatusCode::ACCEPTED, "outcome being reconciled"));
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM voucher_tokens WHERE token = ?")
        .bind(&token)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 1);
}

async fn seat_holder(app: &AppState, seat: i64) -> Option<String> {
    sqlx::query_scalar("SELECT holder FROM seats WHERE id = ?")
        .bind(seat)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn hold_v2(app: &AppState, seat: i64, holder: &str) -> i64 {
    let (code, Json(v)) = seats::hold_seat_guarded(
        State(app.clone()),
        Path(seat),
        Json(HoldRequest {
            holder: holder.into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!(code, StatusCode::CREATED);
    v["reservation_id"].as_i64().unwrap()
}

#[tokio::test]
async fn stale_release_timer_leaves_the_next_reservation_alone() {
    let app = app().await;
    let first = hold_v2(&app, 42, "ada").await;
    let released = seats::release_seat(
        State(app.clone()),
        Path(42),
        Json(HoldRequest {
            holder: "ada".into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!(released, StatusCode::NO_CONTENT);
    let second = hold_v2(&app, 42, "bob").await;
    assert_ne!(first, second);

    // Ada's timer fires late: the guarded action sees another reservation and does nothing.
    assert!(!release_reservation(&app, 42, first).await.unwrap());
    assert_eq!(seat_holder(&app, 42).await.as_deref(), Some("bob"));

    // The unguarded action, which knows only the seat id, frees Bob's seat (the ABA hazard).
    assert!(release_if_held(&app, 42).await.unwrap());
    assert_eq!(seat_holder(&app, 42).await, None);

    // Bob's own timer, carrying his reservation id, would have released it.
    let third = hold_v2(&app, 42, "bob").await;
    assert!(release_reservation(&app, 42, third).await.unwrap());
}

fn keyed(key: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("Idempotency-Key", key.parse().unwrap());
    h
}

async fn refund_state(app: &AppState, key: &str) -> String {
    sqlx::query_scalar("SELECT state FROM refund_requests WHERE idempotency_key = ?")
        .bind(key)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_repeated_refund_key_is_refused_by_the_hazard_and_answered_from_its_record_when_guarded()
{
    let app = app().await;
    let id = new_order(&app, 900).await;
    let (first, _) = refunds::request_refund(State(app.clone()), Path(id), keyed("r-1"))
        .await
        .unwrap();
    assert_eq!(first, StatusCode::ACCEPTED);
    // The first request's refund is paid out (as a worker would record it).
    sqlx::query("UPDATE refund_requests SET state = 'refunded', refund_id = 'rf-1' WHERE idempotency_key = 'r-1'")
        .execute(&app.db)
        .await
        .unwrap();

    // The client retries (its first answer was lost): the hazard says the refund failed.
    let retry = refunds::request_refund(State(app.clone()), Path(id), keyed("r-1")).await;
    assert_eq!(retry.err(), Some(StatusCode::CONFLICT));

    // The guarded handler answers from the record: the refund that was paid.
    let (code, Json(body)) =
        refunds::request_refund_guarded(State(app.clone()), Path(id), keyed("r-1"))
            .await
            .unwrap();
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["refund_id"], "rf-1");

    // The same key for another order is a client error, not a replay.
    let other = new_order(&app, 100).await;
    let (code, _) = refunds::request_refund_guarded(State(app.clone()), Path(other), keyed("r-1"))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);

    // A duplicate of a request still on its way is told so, not refused.
    let (first, _) = refunds::request_refund_guarded(State(app.clone()), Path(other), keyed("r-2"))
        .await
        .unwrap();
    assert_eq!(first, StatusCode::ACCEPTED);
    let (code, Json(body)) =
        refunds::request_refund_guarded(State(app.clone()), Path(other), keyed("r-2"))
            .await
            .unwrap();
    assert_eq!(
        (code, body["state"].as_str()),
        (StatusCode::ACCEPTED, Some("requested"))
    );
}

#[tokio::test]
async fn a_refund_whose_worker_died_stays_stuck_unless_the_claim_has_a_lease() {
    let app = app().await;
    let id = new_order(&app, 900).await;
    let (code, _) = refunds::request_refund(State(app.clone()), Path(id), keyed("r-3"))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::ACCEPTED);
    // A worker claimed it the hazard's way (no lease, no owner) and died before the payout.
    sqlx::query("UPDATE refund_requests SET state = 'processing' WHERE idempotency_key = 'r-3'")
        .execute(&app.db)
        .await
        .unwrap();
    let Json(run) = refunds::run_refunds(State(app.clone())).await.unwrap();
    assert!(
        run["handled"].is_null(),
        "nobody takes the refund over: {run}"
    );
    assert_eq!(refund_state(&app, "r-3").await, "processing");

    // With a lease, a dead worker's claim runs out and the next worker takes the refund over
    // (the provider is unreachable here, so its outcome is unknown, not failed).
    sqlx::query("UPDATE refund_requests SET owner = 'dead', lease_until = datetime('now', '-1 seconds') WHERE idempotency_key = 'r-3'")
        .execute(&app.db)
        .await
        .unwrap();
    let Json(run) = refunds::run_refunds_guarded(State(app.clone()))
        .await
        .unwrap();
    assert_eq!(
        (run["handled"].as_str(), run["state"].as_str()),
        (Some("r-3"), Some("unknown"))
    );

    // A claim whose lease is still running is left to its owner.
    let (code, _) = refunds::request_refund(State(app.clone()), Path(id), keyed("r-4"))
        .await
        .unwrap();
    assert_eq!(code, StatusCode::ACCEPTED);
    sqlx::query("UPDATE refund_requests SET state = 'processing', owner = 'alive', lease_until = datetime('now', '+60 seconds') WHERE idempotency_key = 'r-4'")
        .execute(&app.db)
        .await
        .unwrap();
    let Json(run) = refunds::run_refunds_guarded(State(app.clone()))
        .await
        .unwrap();
    assert!(run["handled"].is_null(), "{run}");
    assert_eq!(refund_state(&app, "r-4").await, "processing");
}
