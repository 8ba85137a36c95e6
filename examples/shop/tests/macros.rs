//! Behaviour of the handlers written with `#[staleguard::fenced]` and
//! `#[staleguard::idempotent]`, called directly on an in-memory SQLite database: a late payment
//! callback exits stale without writing, an old release timer leaves the next reservation
//! alone, a held lease makes a concurrent callback back off, and a voucher is credited once.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};
use staleguard::lease::LeaseStore;
use staleguard_example_shop::seats::{HoldRequest, release_reservation_fenced};
use staleguard_example_shop::vouchers::{RedeemError, Redeemed};
use staleguard_example_shop::{AppState, ShopError, checkout, orders, psp_stub, seats, vouchers};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// The payment provider is a closed local port: every gateway call ends without an answer.
async fn app() -> AppState {
    app_with_psp("http://127.0.0.1:9/psp").await
}

async fn app_with_psp(psp_url: &str) -> AppState {
    AppState::connect("sqlite::memory:", psp_url)
        .await
        .expect("in-memory database opens")
}

/// Serves the stand-in provider (approves everything) on a free local port; returns its URL.
async fn approving_psp() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let psp = Router::new()
        .route("/psp/charges", post(psp_stub::approve))
        .route("/psp/credits", post(psp_stub::approve));
    tokio::spawn(async move { axum::serve(listener, psp).await });
    format!("http://{addr}/psp")
}

#[derive(Debug, PartialEq)]
struct OrderView {
    status: String,
    attempt: Option<String>,
    charge: Option<String>,
}

async fn order(app: &AppState, id: i64) -> OrderView {
    let (status, attempt, charge) =
        sqlx::query_as("SELECT status, payment_attempt_id, charge_id FROM orders WHERE id = ?")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    OrderView {
        status,
        attempt,
        charge,
    }
}

/// A pending order moved to "processing" with a payment attempt (the gateway call is
/// unanswered, so it ends "payment_unknown" with the attempt recorded).
async fn order_in_payment(app: &AppState, amount_cents: i64) -> (i64, String) {
    let Json(v) = orders::create_order(
        State(app.clone()),
        Json(orders::NewOrder {
            customer: "grace".into(),
            amount_cents,
        }),
    )
    .await
    .unwrap();
    let id = v["id"].as_i64().unwrap();
    checkout::checkout_guarded(State(app.clone()), Path(id))
        .await
        .unwrap();
    let attempt = order(app, id)
        .await
        .attempt
        .expect("checkout records the attempt");
    (id, attempt)
}

async fn fenced_callback(
    app: &AppState,
    id: i64,
    attempt: &str,
    amount_cents: i64,
    charge: &str,
) -> Result<(StatusCode, &'static str), ShopError> {
    orders::payment_callback_fenced(
        State(app.clone()),
        Path(id),
        Json(orders::PaymentCallback {
            payment_attempt_id: attempt.into(),
            amount_cents,
            charge_id: charge.into(),
        }),
    )
    .await
}

#[tokio::test]
async fn fenced_callback_after_a_cancel_exits_stale_and_writes_nothing() {
    let app = app().await;
    let (id, attempt) = order_in_payment(&app, 1500).await;
    let cancel = orders::cancel_order(State(app.clone()), Path(id))
        .await
        .unwrap();
    assert_eq!(cancel, StatusCode::NO_CONTENT);
    let before = order(&app, id).await;

    let late = fenced_callback(&app, id, &attempt, 1500, "ch-late")
        .await
        .unwrap();
    assert_eq!(late, (StatusCode::OK, "stale"));
    let after = order(&app, id).await;
    assert_eq!(after, before);
    assert_eq!(after.status, "cancelled");
    assert_eq!(after.charge, None);
}

#[tokio::test]
async fn fenced_callback_pays_the_current_attempt_once_and_rejects_other_attempts() {
    let app = app().await;
    let (id, attempt) = order_in_payment(&app, 900).await;

    let wrong_attempt = fenced_callback(&app, id, "an-older-attempt", 900, "ch-old")
        .await
        .unwrap();
    assert_eq!(wrong_attempt, (StatusCode::OK, "stale"));
    let wrong_amount = fenced_callback(&app, id, &attempt, 1, "ch-tampered")
        .await
        .unwrap();
    assert_eq!(wrong_amount, (StatusCode::OK, "stale"));
    assert_eq!(order(&app, id).await.status, "payment_unknown");

    let paid = fenced_callback(&app, id, &attempt, 900, "ch-1")
        .await
        .unwrap();
    assert_eq!(paid, (StatusCode::OK, "paid"));
    let redelivered = fenced_callback(&app, id, &attempt, 900, "ch-2")
        .await
        .unwrap();
    assert_eq!(redelivered, (StatusCode::OK, "already paid"));
    let now = order(&app, id).await;
    assert_eq!(now.status, "paid");
    assert_eq!(now.charge.as_deref(), Some("ch-1"));

    // The cancel that comes after the payment is refused by its conditional UPDATE.
    let cancel = orders::cancel_order(State(app.clone()), Path(id))
        .await
        .unwrap();
    assert_eq!(cancel, StatusCode::CONFLICT);
}

#[tokio::test]
async fn fenced_callback_backs_off_while_another_call_holds_the_order_lease() {
    let app = app().await;
    let (id, attempt) = order_in_payment(&app, 400).await;
    let other = app
        .leases
        .acquire(
            &format!("order:{id}"),
            "reconciler-7",
            Duration::from_secs(60),
        )
        .await
        .unwrap();

    let busy = fenced_callback(&app, id, &attempt, 400, "ch-busy").await;
    assert!(
        matches!(busy, Err(ShopError::Guard(staleguard::Error::Held(_)))),
        "{busy:?}"
    );
    assert_eq!(order(&app, id).await.status, "payment_unknown");

    app.leases.release(&other).await.unwrap();
    let paid = fenced_callback(&app, id, &attempt, 400, "ch-after")
        .await
        .unwrap();
    assert_eq!(paid, (StatusCode::OK, "paid"));
}

async fn seat(app: &AppState, seat: i64) -> (String, Option<String>, Option<i64>) {
    sqlx::query_as("SELECT status, holder, reservation_id FROM seats WHERE id = ?")
        .bind(seat)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn hold_v3(app: &AppState, seat: i64, holder: &str) -> i64 {
    let (code, Json(v)) = seats::hold_seat_fenced(
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
async fn fenced_release_timer_of_an_old_reservation_does_not_free_the_new_hold() {
    let app = app().await;
    let ada = hold_v3(&app, 17, "ada").await;
    let gave_back = seats::release_seat(
        State(app.clone()),
        Path(17),
        Json(HoldRequest {
            holder: "ada".into(),
        }),
    )
    .await
    .unwrap();
    assert_eq!(gave_back, StatusCode::NO_CONTENT);
    let bob = hold_v3(&app, 17, "bob").await;
    assert_ne!(ada, bob);

    // Ada's timer fires late: the seat is held again, but by Bob's reservation.
    assert!(!release_reservation_fenced(&app, 17, ada).await.unwrap());
    assert_eq!(
        seat(&app, 17).await,
        ("held".into(), Some("bob".into()), Some(bob))
    );

    // Bob's own timer releases it; firing twice is harmless.
    assert!(release_reservation_fenced(&app, 17, bob).await.unwrap());
    assert_eq!(seat(&app, 17).await, ("free".into(), None, None));
    assert!(!release_reservation_fenced(&app, 17, bob).await.unwrap());
}

async fn issue(app: &AppState, amount_cents: i64) -> String {
    let Json(v) = vouchers::issue_voucher(
        State(app.clone()),
        Json(vouchers::NewVoucher {
            customer: "ada".into(),
            amount_cents,
        }),
    )
    .await
    .unwrap();
    v["token"].as_str().unwrap().to_owned()
}

async fn voucher_left(app: &AppState, token: &str) -> bool {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM voucher_tokens WHERE token = ?")
        .bind(token)
        .fetch_one(&app.db)
        .await
        .unwrap();
    n == 1
}

async fn redeem(app: &AppState, token: &str) -> Result<Redeemed, RedeemError> {
    vouchers::redeem_voucher_idempotent(State(app.clone()), Path(token.to_owned()))
        .await
        .map(|Json(redeemed)| redeemed)
}

#[tokio::test]
async fn idempotent_redeem_credits_once_and_replays_the_stored_answer() {
    let psp = approving_psp().await;
    let app = app_with_psp(&psp).await;
    let token = issue(&app, 250).await;

    let first = redeem(&app, &token).await.unwrap();
    assert_eq!(first.amount_cents, 250);
    assert!(first.credit_id.starts_with("psp-"), "{first:?}");
    // The token is deleted only after the credit.
    assert!(!voucher_left(&app, &token).await);

    // A duplicate gets the stored response; the body did not run again (it would have found
    // no voucher and answered `UnknownVoucher`).
    let again = redeem(&app, &token).await.unwrap();
    assert_eq!(again, first);
}

/// A provider that counts credits and holds each one until the test releases it.
#[derive(Default)]
struct GatedPsp {
    credits: AtomicUsize,
    arrived: Notify,
    release: Notify,
}

async fn gated_credit(
    State(psp): State<Arc<GatedPsp>>,
    Json(req): Json<psp_stub::StubRequest>,
) -> Json<Value> {
    psp.credits.fetch_add(1, Ordering::SeqCst);
    psp.arrived.notify_one();
    psp.release.notified().await;
    Json(json!({ "id": format!("credit-{}", req.reference) }))
}

async fn gated_psp() -> (String, Arc<GatedPsp>) {
    let psp = Arc::new(GatedPsp::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new()
        .route("/psp/credits", post(gated_credit))
        .with_state(psp.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{addr}/psp"), psp)
}

#[tokio::test]
async fn idempotent_redeem_duplicates_in_flight_get_in_progress_and_the_credit_happens_once() {
    let (url, psp) = gated_psp().await;
    let app = app_with_psp(&url).await;
    let token = issue(&app, 800).await;

    // The first redemption reaches the provider and is held there.
    let first = tokio::spawn({
        let app = app.clone();
        let token = token.clone();
        async move { redeem(&app, &token).await }
    });
    psp.arrived.notified().await;

    // Duplicates arriving meanwhile are told "in progress" and never reach the provider.
    for _ in 0..8 {
        match redeem(&app, &token).await {
            Err(RedeemError::Idempotency { status: 409, .. }) => {}
            other => panic!("expected in progress, got {other:?}"),
        }
    }
    assert!(voucher_left(&app, &token).await);

    psp.release.notify_one();
    let redeemed = first.await.unwrap().unwrap();
    assert_eq!(redeemed.amount_cents, 800);
    assert!(!voucher_left(&app, &token).await);

    // Later duplicates get the stored answer.
    assert_eq!(redeem(&app, &token).await.unwrap(), redeemed);
    assert_eq!(psp.credits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn idempotent_redeem_keeps_the_token_when_the_credit_outcome_is_unknown() {
    let app = app().await;
    let token = issue(&app, 300).await;

    let first = redeem(&app, &token).await;
    assert_eq!(first, Err(RedeemError::CreditUnknown));
    assert!(voucher_left(&app, &token).await);

    // The record is UNKNOWN: a duplicate is told "in progress" (409), not run again.
    match redeem(&app, &token).await {
        Err(RedeemError::Idempotency {
            status,
            retry_after,
            ..
        }) => {
            assert_eq!(status, 409);
            assert!(retry_after.is_some());
        }
        other => panic!("expected in progress, got {other:?}"),
    }
    assert!(voucher_left(&app, &token).await);
}

#[tokio::test]
async fn idempotent_redeem_of_an_unknown_voucher_is_not_stored() {
    let app = app().await;
    let missing = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        redeem(&app, missing).await,
        Err(RedeemError::UnknownVoucher)
    );
    // Retryable: the record was released, so the next request runs the body again.
    assert_eq!(
        redeem(&app, missing).await,
        Err(RedeemError::UnknownVoucher)
    );
    let records: i64 = sqlx::query_scalar("SELECT count(*) FROM idempotency_records")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(records, 0);
}
