//! a response type that cannot be stored and replayed (not `Serialize` + `DeserializeOwned`).

#[path = "../support.rs"]
mod support;
use support::*;

pub struct Opaque;

#[staleguard::idempotent(store = state.idem, key = req.key)]
async fn charge(state: &AppState, req: Pay) -> Result<Opaque, PayError> {
    let _ = req;
    Ok(Opaque)
}

fn main() {}
