#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state, key = req.key)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PayError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
