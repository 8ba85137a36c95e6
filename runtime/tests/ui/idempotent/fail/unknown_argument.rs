//! an unknown argument: the error lists the accepted ones.

#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state.idem, key = req.key, retries = 3)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PayError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
