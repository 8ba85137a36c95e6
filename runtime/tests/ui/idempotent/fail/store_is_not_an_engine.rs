//! `store = ..` naming something that is not an `Idempotency<S>`.

#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state, key = req.key)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PayError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
