//! every argument at once, a method, an `Option` key, an integer tenant; the futures are `Send`.

#[path = "../support.rs"]
mod support;
use support::*;
use std::sync::Arc;

#[staleguard::idempotent(
    store = state.idem,
    key = req.key,
    tenant = req.tenant,
    fingerprint(req.amount, req.tenant),
    name = "payments.charge",
    lease = "10s",
    wait = "500ms",
    retention = "7d",
    failed = retry,
    claim = claim,
)]
async fn charge(state: Arc<AppState>, req: Pay) -> Result<Receipt, PayError> {
    // The claim is usable in the body: downstream idempotency key and fencing token.
    let _downstream_key: &str = claim.record_id();
    let _fence: i64 = claim.fence();
    claim.heartbeat().await?;
    if req.amount == 0 {
        return Err(PayError::Declined);
    }
    Ok(Receipt { amount: req.amount })
}

/// A method, with a key that is an `Option` and an integer tenant.
struct Service {
    idem: Arc<staleguard::idempotency::Idempotency<staleguard::idempotency::MemoryStore>>,
}

impl Service {
    #[staleguard::idempotent(store = self.idem, key = key, tenant = tenant_id)]
    async fn refund(&self, key: Option<String>, tenant_id: u64, amount: u64) -> Result<Receipt, PayError> {
        Ok(Receipt { amount })
    }
}

fn assert_send<F: std::future::Future + Send>(_: F) {}

fn main() {
    let state = Arc::new(AppState { idem: staleguard::idempotency::Idempotency::new(Default::default()) });
    let req = Pay { key: "k".into(), tenant: "t".into(), amount: 1 };
    assert_send(charge(state.clone(), req));
    let service = Service { idem: Arc::new(state.idem.clone()) };
    assert_send(service.refund(Some("k".into()), 7, 1));
}
