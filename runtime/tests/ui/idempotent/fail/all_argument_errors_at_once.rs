//! several bad arguments: every error is reported at once, each on its token.

#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state.idem, key = req.key, lease = "3x", key = req.tenant, failed = sometimes)]
async fn charge(state: &AppState, req: Pay) -> Result<Receipt, PayError> {
    Ok(Receipt { amount: req.amount })
}

fn main() {}
