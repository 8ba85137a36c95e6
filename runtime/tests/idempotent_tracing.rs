//! The idempotency engine's tracing: claim, replay, mismatch, unknown, in progress, takeover and
//! fenced each leave a span or an event. Its own test binary, so the global subscriber sees
//! every callsite (callsite interest is cached process-wide).

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use serde::{Deserialize, Serialize};
use staleguard::idempotency::IdempotencyStore;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pay {
    key: Option<String>,
    order: String,
    amount: u64,
}

fn pay(key: &str, order: &str, amount: u64) -> Pay {
    Pay {
        key: Some(key.to_owned()),
        order: order.to_owned(),
        amount,
    }
}

struct Shop<S> {
    idem: staleguard::idempotency::Idempotency<S>,
    runs: AtomicUsize,
}

#[staleguard::idempotent(store = shop.idem, key = req.key)]
async fn charge<S: IdempotencyStore>(shop: &Shop<S>, req: Pay) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: 1,
    })
}

/// Applies the charge, then never answers.
#[derive(Default)]
struct Gateway {
    charges: Mutex<HashMap<String, u64>>,
}

#[staleguard::idempotent(store = shop.idem, key = req.key)]
async fn charge_remote<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    gateway: &Gateway,
) -> Result<Receipt, AppError> {
    gateway
        .charges
        .lock()
        .unwrap()
        .insert(req.order.clone(), req.amount);
    match tokio::time::timeout(Duration::from_millis(20), std::future::pending::<()>()).await {
        Ok(()) => Ok(Receipt {
            order: req.order,
            amount: req.amount,
            attempt: 1,
        }),
        Err(_elapsed) => Err(AppError::Timeout),
    }
}

#[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim)]
async fn slow<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    release: &Notify,
) -> Result<Receipt, AppError> {
    if claim.fence() == 1 {
        release.notified().await;
    }
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: claim.fence() as u64,
    })
}

/// Records span names and event messages.
struct Capture(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.0
            .lock()
            .unwrap()
            .push(format!("span {}", span.metadata().name()));
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(Option<String>);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut message = Message(None);
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0.unwrap_or_default());
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Claim, replay, in progress, takeover, fenced and unknown each leave a trace.
#[tokio::test]
async fn state_changes_are_traced() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::set_global_default(Capture(Arc::clone(&seen))).unwrap();
    let shop = Shop {
        idem: memory_store(Default::default()),
        runs: AtomicUsize::new(0),
    };
    charge(&shop, pay("k", "o", 1)).await.unwrap();
    charge(&shop, pay("k", "o", 1)).await.unwrap();
    assert_eq!(
        charge(&shop, pay("k", "o", 2)).await,
        Err(AppError::Idem(Idem::Mismatch))
    );
    let gateway = Gateway::default();
    assert_eq!(
        charge_remote(&shop, pay("t", "ot", 1), &gateway).await,
        Err(AppError::Timeout)
    );
    assert_eq!(
        charge_remote(&shop, pay("t", "ot", 1), &gateway).await,
        Err(AppError::Idem(Idem::InProgress))
    );
    // A takeover and a fenced late owner, on one thread: the first call is polled until it
    // waits, then the second takes over (zero lease).
    let no_lease = staleguard::idempotency::Config {
        lease: Duration::ZERO,
        ..Default::default()
    };
    let lease_free = Shop {
        idem: memory_store(no_lease),
        runs: AtomicUsize::new(0),
    };
    let release = Notify::new();
    let req = pay("late", "ol", 1);
    let mut first = std::pin::pin!(slow(&lease_free, req.clone(), &release));
    assert!(futures_poll_once(first.as_mut()).await.is_none());
    slow(&lease_free, req, &release).await.unwrap();
    release.notify_one();
    assert_eq!(first.await, Err(AppError::Idem(Idem::Fenced)));
    assert_eq!(shop.runs.load(Ordering::SeqCst), 1);
    let seen = seen.lock().unwrap().clone();
    for expected in [
        "span idempotency.claim",
        "span idempotency.complete",
        "idempotency claimed",
        "idempotency replay",
        "idempotency key reused with a different payload",
        "idempotency unknown",
        "idempotency in progress",
        "idempotency takeover",
        "idempotency fenced: completion rejected",
    ] {
        assert!(
            seen.iter().any(|s| s == expected),
            "no {expected:?} in {seen:#?}"
        );
    }
}

/// Polls `future` once: `Some(output)` if it finished.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
    let mut future = future;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}
