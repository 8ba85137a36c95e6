//! The axum integration (feature `axum`): the `Idempotency-Key` header extractor,
//! `IntoResponse` for [`IdempotencyError`] with the draft's status codes (400 missing or invalid
//! key, 409 in progress with `Retry-After`, 422 key reused with a different payload), as RFC 9457
//! `application/problem+json` bodies, as the draft asks, and the [`mark_replays`] middleware
//! that adds `Idempotent-Replayed: true` to replayed responses.

use super::error::IdempotencyError;
use super::key::{IdempotencyKey, KeySource};
use axum::extract::{FromRequestParts, OptionalFromRequestParts, Request};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;

/// The header's name, lowercase as HTTP/2 sends it.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The validated `Idempotency-Key` request header. Rejects a request without it (400) or with
/// an invalid one (400). The draft sends the key as a structured-field string (`"abc"`); the
/// quotes are optional here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKeyHeader(pub IdempotencyKey);

fn read(parts: &Parts) -> Option<Result<IdempotencyKey, IdempotencyError>> {
    let value = parts.headers.get(&IDEMPOTENCY_KEY)?;
    let Ok(text) = value.to_str() else {
        return Some(Err(IdempotencyError::InvalidKey {
            reason: "the `Idempotency-Key` header is not visible ASCII".to_owned(),
        }));
    };
    let text = text.trim();
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    Some(IdempotencyKey::new(text))
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = IdempotencyError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        read(parts)
            .unwrap_or(Err(IdempotencyError::MissingKey))
            .map(IdempotencyKeyHeader)
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = IdempotencyError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Option<Self>, Self::Rejection> {
        read(parts)
            .transpose()
            .map(|key| key.map(IdempotencyKeyHeader))
    }
}

impl KeySource for IdempotencyKeyHeader {
    fn key_text(&self) -> Option<Cow<'_, str>> {
        self.0.key_text()
    }
}

/// The response header that marks a replay.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Middleware that adds `Idempotent-Replayed: true` to every response an `#[idempotent]`
/// handler answered from the store (a stored success or a stored permanent failure), and to
/// no other. Install it on the router or on the idempotent routes:
///
/// ```ignore
/// let app = Router::new()
///     .route("/payments", post(create_payment))
///     .layer(axum::middleware::from_fn(staleguard::idempotency::axum::mark_replays));
/// ```
///
/// The handler tells it through a task-local flag set on its replay path, so the handler's
/// own response type is unchanged.
pub async fn mark_replays(request: Request, next: Next) -> Response {
    let (replayed, mut response) = super::replayed::watch(next.run(request)).await;
    if replayed {
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// The media type of an RFC 9457 problem details body.
pub const PROBLEM_JSON: &str = "application/problem+json";

impl IdempotencyError {
    /// The RFC 9457 problem type (a stable URN per kind of error) and its title (the
    /// Idempotency-Key draft's wording where it has one).
    pub fn problem_type(&self) -> (&'static str, &'static str) {
        match self {
            IdempotencyError::MissingKey => (
                "urn:staleguard:problem:idempotency-key-missing",
                "Idempotency-Key is missing",
            ),
            IdempotencyError::InvalidKey { .. } => (
                "urn:staleguard:problem:idempotency-key-invalid",
                "Idempotency-Key is invalid",
            ),
            IdempotencyError::InProgress { .. } => (
                "urn:staleguard:problem:idempotency-key-in-progress",
                "A request is outstanding for this Idempotency-Key",
            ),
            IdempotencyError::Mismatch => (
                "urn:staleguard:problem:idempotency-key-reused",
                "Idempotency-Key is already used",
            ),
            IdempotencyError::Fenced => (
                "urn:staleguard:problem:idempotency-key-taken-over",
                "The request's claim on this Idempotency-Key was taken over",
            ),
            IdempotencyError::Store(_) => (
                "urn:staleguard:problem:idempotency-store-unavailable",
                "The idempotency store is unavailable",
            ),
            IdempotencyError::Codec { .. } => (
                "urn:staleguard:problem:idempotency-response-unstorable",
                "The response could not be stored or replayed",
            ),
        }
    }
}

impl IntoResponse for IdempotencyError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let (kind, title) = self.problem_type();
        let body = serde_json::json!({
            "type": kind,
            "title": title,
            "status": status.as_u16(),
            "detail": self.to_string(),
        });
        let mut response = (status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.retry_after_secs() {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
