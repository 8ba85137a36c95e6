//! an error type without `Classify`: retryable, permanent or unknown cannot be told apart.

#[path = "../support.rs"]
mod support;
use support::*;

#[derive(serde::Serialize, serde::Deserialize)]
pub struct PlainError;

impl From<staleguard::idempotency::IdempotencyError> for PlainError {
    fn from(_: staleguard::idempotency::IdempotencyError) -> Self {
        PlainError
    }
}

#[staleguard::idempotent(store = state.idem, key = req.key)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PlainError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
