//! The axum integration end to end: `Idempotency-Key` extractor, `Json` responses stored and
//! replayed with `Idempotent-Replayed: true`, and the draft's status codes (400 missing /
//! invalid key, 409 in progress with `Retry-After`, 422 key reused with another payload), on
//! the memory store, SQLite and PostgreSQL (when `STALEGUARD_TEST_POSTGRES_URL` is set; under
//! CI a missing URL fails).

#![cfg(all(feature = "axum", feature = "sqlite"))]

mod idempotent_support;

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use staleguard::idempotency::axum::{IdempotencyKeyHeader, mark_replays};
use staleguard::idempotency::{
    Classify, FailureKind, Idempotency, IdempotencyError, IdempotencyStore, MemoryStore,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;
use tower::ServiceExt;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pay {
    amount: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Receipt {
    amount: u64,
    run: usize,
}

/// Keeps what the HTTP layer needs of an idempotency error (the error must round-trip through
/// the store when it is a permanent failure).
#[derive(Debug, Serialize, Deserialize)]
enum ApiError {
    Declined,
    Idempotency {
        status: u16,
        retry_after: Option<u64>,
        message: String,
    },
}

impl Classify for ApiError {
    fn classify(&self) -> FailureKind {
        match self {
            ApiError::Declined => FailureKind::Permanent,
            ApiError::Idempotency { .. } => FailureKind::Retryable,
        }
    }
}

impl From<IdempotencyError> for ApiError {
    fn from(e: IdempotencyError) -> Self {
        ApiError::Idempotency {
            status: e.status(),
            retry_after: e.retry_after_secs(),
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Declined => (StatusCode::PAYMENT_REQUIRED, "declined").into_response(),
            ApiError::Idempotency {
                status,
                retry_after,
                message,
            } => {
                let mut response = (StatusCode::from_u16(status).unwrap(), message).into_response();
                if let Some(secs) = retry_after {
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, secs.into());
                }
                response
            }
        }
    }
}

struct App<S> {
    idem: Idempotency<S>,
    runs: Arc<AtomicUsize>,
    started: Arc<Notify>,
    gate: Arc<Notify>,
}

impl<S> Clone for App<S> {
    fn clone(&self) -> Self {
        App {
            idem: self.idem.clone(),
            runs: self.runs.clone(),
            started: self.started.clone(),
            gate: self.gate.clone(),
        }
    }
}

#[staleguard::idempotent(store = app.idem, key = key)]
async fn create_payment<S: IdempotencyStore>(
    State(app): State<App<S>>,
    key: IdempotencyKeyHeader,
    Json(req): Json<Pay>,
) -> Result<Json<Receipt>, ApiError> {
    let run = app.runs.fetch_add(1, Ordering::SeqCst) + 1;
    if req.amount == 0 {
        return Err(ApiError::Declined);
    }
    if req.amount == 13 {
        app.started.notify_one();
        app.gate.notified().await;
    }
    Ok(Json(Receipt {
        amount: req.amount,
        run,
    }))
}

fn app<S: IdempotencyStore>(store: S) -> (Router, App<S>) {
    let state = App {
        idem: Idempotency::new(store),
        runs: Arc::default(),
        started: Arc::default(),
        gate: Arc::default(),
    };
    let router = Router::new()
        .route("/payments", post(create_payment::<S>))
        .layer(axum::middleware::from_fn(mark_replays))
        .with_state(state.clone());
    (router, state)
}

fn request(key: Option<&str>, amount: u64) -> Request<Body> {
    let mut builder = Request::post("/payments").header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        builder = builder.header("Idempotency-Key", key);
    }
    builder
        .body(Body::from(format!("{{\"amount\":{amount}}}")))
        .unwrap()
}

/// Status, `Retry-After`, body, and whether `Idempotent-Replayed: true` was sent.
async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Option<String>, String, bool) {
    let response = router.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let replayed = match response.headers().get("idempotent-replayed") {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) => panic!("Idempotent-Replayed: {v:?}"),
    };
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        retry_after,
        String::from_utf8(body.to_vec()).unwrap(),
        replayed,
    )
}

async fn missing_or_invalid_key_is_400<S: IdempotencyStore>(store: S) {
    let (router, state) = app(store);
    let (status, _, body, _) = send(&router, request(None, 5)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["status"], 400);
    assert_eq!(problem["title"], "Idempotency-Key is missing");
    assert_eq!(problem["detail"], "missing idempotency key");
    assert_eq!(
        problem["type"],
        "urn:staleguard:problem:idempotency-key-missing"
    );
    let (status, _, _, replayed) = send(&router, request(Some("has space"), 5)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!replayed);
    assert_eq!(state.runs.load(Ordering::SeqCst), 0);
}

async fn replay_returns_the_stored_json_and_reuse_is_422<S: IdempotencyStore>(store: S) {
    let (router, state) = app(store);
    let first = send(&router, request(Some("\"k-1\""), 5)).await;
    assert_eq!(first.0, StatusCode::OK);
    assert!(!first.3, "the first answer is no replay");
    let receipt: Receipt = serde_json::from_str(&first.2).unwrap();
    assert_eq!(receipt, Receipt { amount: 5, run: 1 });
    // The quoted (structured-field) and bare forms are the same key.
    let again = send(&router, request(Some("k-1"), 5)).await;
    assert_eq!((again.0, &again.1, &again.2), (first.0, &first.1, &first.2));
    assert!(again.3, "a replay carries Idempotent-Replayed: true");
    assert_eq!(state.runs.load(Ordering::SeqCst), 1);
    let (status, _, _, replayed) = send(&router, request(Some("k-1"), 6)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(!replayed, "a refused reuse is no replay");
}

async fn permanent_failure_is_replayed<S: IdempotencyStore>(store: S) {
    let (router, state) = app(store);
    let first = send(&router, request(Some("k-0"), 0)).await;
    assert_eq!((first.0, first.3), (StatusCode::PAYMENT_REQUIRED, false));
    let again = send(&router, request(Some("k-0"), 0)).await;
    assert_eq!((again.0, again.3), (StatusCode::PAYMENT_REQUIRED, true));
    assert_eq!(state.runs.load(Ordering::SeqCst), 1);
}

async fn duplicate_in_flight_is_409_with_retry_after<S: IdempotencyStore>(store: S) {
    let (router, state) = app(store);
    let first = {
        let router = router.clone();
        tokio::spawn(async move { send(&router, request(Some("k-13"), 13)).await })
    };
    state.started.notified().await;
    let (status, retry_after, _, replayed) = send(&router, request(Some("k-13"), 13)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(!replayed);
    let secs: u64 = retry_after.expect("Retry-After is set").parse().unwrap();
    assert!(
        (1..=30).contains(&secs),
        "within the 30 s default lease: {secs}"
    );
    state.gate.notify_one();
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    let after = send(&router, request(Some("k-13"), 13)).await;
    assert_eq!((after.0, after.3), (StatusCode::OK, true));
    assert_eq!(state.runs.load(Ordering::SeqCst), 1);
}

/// Each scenario on a fresh store of each kind.
macro_rules! on_every_store {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::MemoryStore::new()).await;
                }
            )*
        }

        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (engine, _file) = super::idempotent_support::sqlite_store(Default::default()).await;
                    super::$scenario(engine.store().clone()).await;
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    use super::idempotent_support::*;
                    let Some(url) = postgres_url(concat!("axum postgres::", stringify!($scenario))) else { return };
                    let (engine, table) = postgres_store(&url, Default::default()).await;
                    super::$scenario(engine.store().clone()).await;
                    drop_postgres_table(&engine, &table).await;
                }
            )*
        }

        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    use super::idempotent_support::*;
                    let Some(url) = redis_url(concat!("axum redis::", stringify!($scenario))) else { return };
                    let engine = redis_store(&url, Default::default()).await;
                    super::$scenario(engine.store().clone()).await;
                    drop_redis_prefix(&url, engine.store().prefix()).await;
                }
            )*
        }
    };
}

on_every_store!(
    missing_or_invalid_key_is_400,
    replay_returns_the_stored_json_and_reuse_is_422,
    permanent_failure_is_replayed,
    duplicate_in_flight_is_409_with_retry_after,
);

/// Every kind of error is an RFC 9457 problem with its own type, the status it is sent with,
/// a title and the error's text as the detail.
#[tokio::test]
async fn idempotency_errors_are_problem_details() {
    let errors = [
        IdempotencyError::MissingKey,
        IdempotencyError::InvalidKey {
            reason: "too long".into(),
        },
        IdempotencyError::InProgress {
            retry_after: std::time::Duration::from_secs(1),
        },
        IdempotencyError::Mismatch,
        IdempotencyError::Fenced,
        IdempotencyError::Codec {
            reason: "no room".into(),
        },
    ];
    let mut types = std::collections::HashSet::new();
    for err in errors {
        let (detail, code) = (err.to_string(), err.status());
        let response = err.into_response();
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        assert_eq!(response.status().as_u16(), code);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["status"], code);
        assert_eq!(problem["detail"], detail.as_str());
        assert!(problem["title"].as_str().is_some_and(|t| !t.is_empty()));
        let kind = problem["type"].as_str().unwrap().to_owned();
        assert!(kind.starts_with("urn:staleguard:problem:"), "{kind}");
        assert!(
            types.insert(kind),
            "each kind of error has its own problem type"
        );
    }
}

#[test]
fn idempotency_errors_render_with_the_draft_codes() {
    let busy = IdempotencyError::InProgress {
        retry_after: std::time::Duration::from_millis(2500),
    };
    let response = busy.into_response();
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(response.headers()[header::RETRY_AFTER], "3");
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/problem+json"
    );
    assert_eq!(
        IdempotencyError::Mismatch.into_response().status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        IdempotencyError::MissingKey.into_response().status(),
        StatusCode::BAD_REQUEST
    );
}
