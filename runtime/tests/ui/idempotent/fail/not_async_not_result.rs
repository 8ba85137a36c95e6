//! a plain `fn` returning a bare value: `#[idempotent]` needs `async fn .. -> Result<T, E>`.

#[path = "../support.rs"]
mod support;
use support::*;

#[staleguard::idempotent(store = state.idem, key = req.key)]
fn charge(state: &AppState, req: Pay) -> Receipt {
    Receipt { amount: req.amount }
}

fn main() {}
