//! Types shared by the `#[idempotent]` UI cases (included with `#[path]`).

#![allow(dead_code)]

use serde::{Deserialize, Serialize};
use staleguard::idempotency::{Classify, FailureKind, Idempotency, IdempotencyError, MemoryStore};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pay {
    pub key: String,
    pub tenant: String,
    pub amount: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub amount: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum PayError {
    Declined,
    Timeout,
    Idempotency(String),
}

impl Classify for PayError {
    fn classify(&self) -> FailureKind {
        match self {
            PayError::Declined => FailureKind::Permanent,
            PayError::Timeout => FailureKind::Unknown,
            PayError::Idempotency(_) => FailureKind::Retryable,
        }
    }
}

impl From<IdempotencyError> for PayError {
    fn from(e: IdempotencyError) -> Self {
        PayError::Idempotency(e.to_string())
    }
}

pub struct AppState {
    pub idem: Idempotency<MemoryStore>,
}
