//! `#[idempotent]` without `key`: a required argument is missing.

#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state.idem)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PayError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
