//! Behaviour of `#[idempotent]` handlers against real stores: 64 duplicates in flight × 200
//! rounds with a unique-constrained ledger, a crash mid-flight followed by a takeover, a
//! timed-out remote call left UNKNOWN and reconciled, a late owner fenced, and the request
//! identity checks (missing key, reused key, tenant scope).

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use serde::{Deserialize, Serialize};
use staleguard::idempotency::{
    Config, Idempotency, IdempotencyStore, Reconciler, Resolution, UnknownRecord,
};
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

/// The service: its idempotency engine, its ledger, and a count of body runs.
struct Shop<S> {
    idem: Idempotency<S>,
    ledger: Ledger,
    runs: AtomicUsize,
}

impl<S> Shop<S> {
    fn new(idem: Idempotency<S>, ledger: Ledger) -> Arc<Self> {
        Arc::new(Shop {
            idem,
            ledger,
            runs: AtomicUsize::new(0),
        })
    }
}

/// The effect is one ledger row per order (unique): a second run of the body is an error.
#[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim)]
async fn charge<S: IdempotencyStore>(shop: &Shop<S>, req: Pay) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    shop.ledger
        .record(&req.order, &req.order, claim.fence())
        .await?;
    tokio::task::yield_now().await;
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: claim.fence() as u64,
    })
}

/// Makes the first run "crash" right after its effect: it signals, then never completes (the
/// test drops its future, as a process crash would).
struct Crash {
    armed: Mutex<bool>,
    reached: Notify,
}

impl Crash {
    fn new() -> Self {
        Crash {
            armed: Mutex::new(true),
            reached: Notify::new(),
        }
    }

    async fn maybe_crash(&self) {
        let crash = std::mem::replace(&mut *self.armed.lock().unwrap(), false);
        if crash {
            self.reached.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// Effect keyed by the attempt: a takeover repeats it.
#[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim)]
async fn transfer_naive<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    crash: &Crash,
) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    let effect = format!("{}#{}", req.order, claim.fence());
    shop.ledger
        .record(&effect, &req.order, claim.fence())
        .await?;
    crash.maybe_crash().await;
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: claim.fence() as u64,
    })
}

/// Effect keyed by the record id (the same for every owner of the key): the downstream
/// deduplicates, so a takeover does not repeat it.
#[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim)]
async fn transfer_keyed<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    crash: &Crash,
) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    shop.ledger
        .record_once(claim.record_id(), &req.order, claim.fence())
        .await?;
    crash.maybe_crash().await;
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: claim.fence() as u64,
    })
}

/// A payment gateway that applies the charge and then (the first time) never answers.
#[derive(Default)]
struct Gateway {
    charges: Mutex<HashMap<String, u64>>,
    answered: AtomicUsize,
}

impl Gateway {
    async fn charge(&self, order: &str, amount: u64) -> Result<(), AppError> {
        *self
            .charges
            .lock()
            .unwrap()
            .entry(order.to_owned())
            .or_default() += amount;
        if self.answered.fetch_add(1, Ordering::SeqCst) == 0 {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[staleguard::idempotent(store = shop.idem, key = req.key, fingerprint(req.order, req.amount))]
async fn charge_remote<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    gateway: &Gateway,
) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    match tokio::time::timeout(
        Duration::from_millis(50),
        gateway.charge(&req.order, req.amount),
    )
    .await
    {
        Ok(result) => result?,
        Err(_elapsed) => return Err(AppError::Timeout),
    }
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: 1,
    })
}

/// Blocks after its claim until released, to let a second owner take over.
#[staleguard::idempotent(store = shop.idem, key = req.key, claim = claim)]
async fn slow<S: IdempotencyStore>(
    shop: &Shop<S>,
    req: Pay,
    release: &Notify,
) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    if claim.fence() == 1 {
        release.notified().await;
    }
    Ok(Receipt {
        order: req.order,
        amount: req.amount,
        attempt: claim.fence() as u64,
    })
}

#[staleguard::idempotent(store = shop.idem, key = req.key, tenant = tenant, name = "tenant-charge")]
async fn tenant_charge<S: IdempotencyStore>(
    shop: &Shop<S>,
    tenant: &str,
    req: Pay,
) -> Result<Receipt, AppError> {
    shop.runs.fetch_add(1, Ordering::SeqCst);
    Ok(Receipt {
        order: format!("{tenant}:{}", req.order),
        amount: req.amount,
        attempt: 1,
    })
}

// ---------------------------------------------------------------------------------------------

/// Runs `check` against every store, each with its own ledger.
macro_rules! on_every_store {
    ($check:ident, $config:expr) => {
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                let (ledger, _file) = super::Ledger::scratch().await;
                let shop = super::Shop::new(super::memory_store($config), ledger);
                super::$check(shop).await;
            }

            #[cfg(feature = "redis")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                let Some(url) = super::redis_url(concat!(stringify!($check), "::redis")) else {
                    return;
                };
                let (ledger, _file) = super::Ledger::scratch().await;
                let idem = super::redis_store(&url, $config).await;
                let prefix = idem.store().prefix().to_owned();
                super::$check(super::Shop::new(idem, ledger)).await;
                super::drop_redis_prefix(&url, &prefix).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let (idem, _file) = super::sqlite_store($config).await;
                let ledger = super::Ledger::sqlite(idem.store().pool().clone()).await;
                super::$check(super::Shop::new(idem, ledger)).await;
            }

            #[cfg(feature = "postgres")]
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(url) = super::postgres_url(concat!(stringify!($check), "::postgres"))
                else {
                    return;
                };
                let (idem, table) = super::postgres_store(&url, $config).await;
                let ledger = super::Ledger::postgres(idem.store().pool().clone()).await;
                let shop = super::Shop::new(idem, ledger);
                super::$check(shop.clone()).await;
                shop.ledger.drop_table().await;
                super::drop_postgres_table(&shop.idem, &table).await;
            }
        }
    };
}

const ROUNDS: usize = 200;
const DUPLICATES: usize = 64;

/// 64 identical requests at once, 200 times: the body runs exactly once per round, and every
/// caller gets the stored response or "in progress" (which it can retry), nothing else.
async fn duplicates_in_flight_run_the_body_once<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    let mut in_progress = 0;
    for round in 0..ROUNDS {
        let order = format!("order-{round}");
        let key = format!("key-{round}");
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..DUPLICATES {
            let shop = Arc::clone(&shop);
            let req = pay(&key, &order, 100);
            calls.spawn(async move { charge(&shop, req).await });
        }
        let expected = Receipt {
            order: order.clone(),
            amount: 100,
            attempt: 1,
        };
        while let Some(result) = calls.join_next().await {
            match result.unwrap() {
                Ok(receipt) => assert_eq!(receipt, expected),
                Err(AppError::Idem(Idem::InProgress)) => in_progress += 1,
                Err(other) => panic!("round {round}: a duplicate got {other:?}"),
            }
        }
        assert_eq!(shop.ledger.effects(&order).await, vec![1], "round {round}");
        assert_eq!(
            shop.runs.load(Ordering::SeqCst),
            round + 1,
            "round {round}: body runs"
        );
        // Once the first request is done, a duplicate gets the replay.
        assert_eq!(charge(&shop, pay(&key, &order, 100)).await, Ok(expected));
    }
    println!(
        "{in_progress} of {} duplicates were told \"in progress\"",
        ROUNDS * DUPLICATES
    );
}
on_every_store!(duplicates_in_flight_run_the_body_once, Default::default());

fn short_lease() -> Config {
    Config {
        lease: Duration::from_millis(200),
        ..Config::default()
    }
}

/// Retries `call` while it answers "in progress" (a client honouring 409 + Retry-After).
async fn until_not_in_progress<F, Fut>(mut call: F) -> Result<Receipt, AppError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Receipt, AppError>>,
{
    for _ in 0..400 {
        match call().await {
            Err(AppError::Idem(Idem::InProgress)) => {
                tokio::time::sleep(Duration::from_millis(25)).await
            }
            other => return other,
        }
    }
    panic!("still in progress after 10 s");
}

/// The first owner crashes after its effect and before completing. After the lease expires a
/// retry takes over (fence 2) and completes. What the ledger shows is the promise: the effect
/// is at least once, unless the body keys it downstream by the record id, then exactly once.
async fn crash_mid_flight_is_taken_over<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    for keyed in [false, true] {
        let order = format!("order-keyed-{keyed}");
        let req = pay(&format!("key-{keyed}"), &order, 100);
        let crash = Arc::new(Crash::new());
        let first = {
            let (shop, req, crash) = (Arc::clone(&shop), req.clone(), Arc::clone(&crash));
            tokio::spawn(async move {
                if keyed {
                    transfer_keyed(&shop, req, &crash).await
                } else {
                    transfer_naive(&shop, req, &crash).await
                }
            })
        };
        crash.reached.notified().await;
        first.abort(); // the process dies: the guard is dropped, nothing is recorded
        assert!(first.await.unwrap_err().is_cancelled());
        // While the dead owner's lease lasts, duplicates are told to come back later.
        let early = if keyed {
            transfer_keyed(&shop, req.clone(), &crash).await
        } else {
            transfer_naive(&shop, req.clone(), &crash).await
        };
        assert_eq!(early, Err(AppError::Idem(Idem::InProgress)));
        let retried = until_not_in_progress(|| {
            let (shop, req, crash) = (Arc::clone(&shop), req.clone(), Arc::clone(&crash));
            async move {
                if keyed {
                    transfer_keyed(&shop, req, &crash).await
                } else {
                    transfer_naive(&shop, req, &crash).await
                }
            }
        })
        .await;
        let expected = Receipt {
            order: order.clone(),
            amount: 100,
            attempt: 2,
        };
        assert_eq!(
            retried,
            Ok(expected.clone()),
            "the retry took over with fence 2"
        );
        if keyed {
            assert_eq!(
                shop.ledger.effects(&order).await,
                vec![1],
                "keyed by record id: once"
            );
        } else {
            assert_eq!(
                shop.ledger.effects(&order).await,
                vec![1, 2],
                "keyed by attempt: twice"
            );
        }
        let replayed = if keyed {
            transfer_keyed(&shop, req.clone(), &crash).await
        } else {
            transfer_naive(&shop, req.clone(), &crash).await
        };
        assert_eq!(replayed, Ok(expected));
    }
    assert_eq!(
        shop.runs.load(Ordering::SeqCst),
        4,
        "two crashed runs, two takeovers"
    );
}
on_every_store!(crash_mid_flight_is_taken_over, super::short_lease());

/// A timed-out remote call leaves the record UNKNOWN (not FAILED: the charge may have happened);
/// duplicates are "in progress"; the reconciler asks the gateway and stores the success; the
/// next duplicate gets the replay and the gateway was charged once.
async fn timeout_is_unknown_until_reconciled<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    let gateway = Arc::new(Gateway::default());
    let req = pay("key-t", "order-t", 250);
    assert_eq!(
        charge_remote(&shop, req.clone(), &gateway).await,
        Err(AppError::Timeout)
    );
    assert_eq!(
        charge_remote(&shop, req.clone(), &gateway).await,
        Err(AppError::Idem(Idem::InProgress))
    );
    let resolver_gateway = Arc::clone(&gateway);
    let reconciler = Reconciler::new(shop.idem.clone(), move |record: UnknownRecord| {
        let gateway = Arc::clone(&resolver_gateway);
        async move {
            assert_eq!(record.error_as::<AppError>(), Some(AppError::Timeout));
            let charged = gateway.charges.lock().unwrap().get("order-t").copied();
            match charged {
                Some(amount) => Resolution::success(&Receipt {
                    order: "order-t".into(),
                    amount,
                    attempt: 1,
                })
                .unwrap(),
                None => Resolution::failure(&AppError::Declined("not charged".into())).unwrap(),
            }
        }
    });
    let report = reconciler.run_once().await.unwrap();
    assert_eq!(report.resolved, 1);
    let expected = Receipt {
        order: "order-t".into(),
        amount: 250,
        attempt: 1,
    };
    assert_eq!(
        charge_remote(&shop, req.clone(), &gateway).await,
        Ok(expected)
    );
    assert_eq!(shop.runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        gateway.charges.lock().unwrap().get("order-t"),
        Some(&250),
        "charged once"
    );
}
on_every_store!(timeout_is_unknown_until_reconciled, Default::default());

/// The background reconciler converges UNKNOWN without anyone calling it.
async fn background_reconciler_converges<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    let gateway = Arc::new(Gateway::default());
    let req = pay("key-bg", "order-bg", 10);
    assert_eq!(
        charge_remote(&shop, req.clone(), &gateway).await,
        Err(AppError::Timeout)
    );
    let task = Reconciler::new(shop.idem.clone(), |_record: UnknownRecord| async {
        Resolution::success(&Receipt {
            order: "order-bg".into(),
            amount: 10,
            attempt: 1,
        })
        .unwrap()
    })
    .spawn(Duration::from_millis(20));
    let replayed = until_not_in_progress(|| charge_remote(&shop, req.clone(), &gateway)).await;
    task.abort();
    assert_eq!(
        replayed,
        Ok(Receipt {
            order: "order-bg".into(),
            amount: 10,
            attempt: 1
        })
    );
    assert_eq!(shop.runs.load(Ordering::SeqCst), 1);
}
on_every_store!(background_reconciler_converges, Default::default());

fn no_lease() -> Config {
    Config {
        lease: Duration::ZERO,
        ..Config::default()
    }
}

/// A first owner stalls past its (zero) lease; a second takes over and completes; when the first
/// wakes up its completion is fenced and the stored response stays the second's.
async fn late_owner_is_fenced<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    let release = Arc::new(Notify::new());
    let req = pay("key-late", "order-late", 7);
    let first = {
        let (shop, req, release) = (Arc::clone(&shop), req.clone(), Arc::clone(&release));
        tokio::spawn(async move { slow(&shop, req, &release).await })
    };
    while shop.runs.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    let second = slow(&shop, req.clone(), &release).await;
    let expected = Receipt {
        order: "order-late".into(),
        amount: 7,
        attempt: 2,
    };
    assert_eq!(second, Ok(expected.clone()));
    release.notify_one();
    assert_eq!(first.await.unwrap(), Err(AppError::Idem(Idem::Fenced)));
    let record = shop
        .idem
        .store()
        .get(&staleguard::idempotency::RecordKey {
            handler: "slow".into(),
            tenant: String::new(),
            key: "key-late".into(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.fence, record.state),
        (2, staleguard::idempotency::State::Success)
    );
    let stored: Receipt = serde_json::from_str(record.response.as_deref().unwrap()).unwrap();
    assert_eq!(stored, expected);
}
on_every_store!(late_owner_is_fenced, super::no_lease());

/// Identity: a missing or invalid key is refused before the body; a reused key with another
/// payload is a mismatch; tenants and handlers scope keys.
async fn identity_is_checked<S: IdempotencyStore>(shop: Arc<Shop<S>>) {
    let mut missing = pay("k", "o", 1);
    missing.key = None;
    assert_eq!(
        charge(&shop, missing).await,
        Err(AppError::Idem(Idem::MissingKey))
    );
    assert_eq!(
        charge(&shop, pay("has space", "o", 1)).await,
        Err(AppError::Idem(Idem::InvalidKey))
    );
    assert_eq!(
        charge(&shop, pay(&"x".repeat(256), "o", 1)).await,
        Err(AppError::Idem(Idem::InvalidKey))
    );
    assert_eq!(shop.runs.load(Ordering::SeqCst), 0);
    assert!(charge(&shop, pay("k", "o", 1)).await.is_ok());
    assert_eq!(
        charge(&shop, pay("k", "o", 2)).await,
        Err(AppError::Idem(Idem::Mismatch))
    );
    let a = tenant_charge(&shop, "acme", pay("k", "o", 1))
        .await
        .unwrap();
    let b = tenant_charge(&shop, "globex", pay("k", "o", 1))
        .await
        .unwrap();
    assert_eq!((a.order.as_str(), b.order.as_str()), ("acme:o", "globex:o"));
    assert_eq!(
        tenant_charge(&shop, "acme", pay("k", "o", 1))
            .await
            .unwrap(),
        a
    );
    assert_eq!(
        tenant_charge(&shop, "", pay("k", "o", 1)).await,
        Err(AppError::Idem(Idem::InvalidKey))
    );
    assert_eq!(shop.runs.load(Ordering::SeqCst), 3);
}
on_every_store!(identity_is_checked, Default::default());

/// The background reaper deletes expired outcomes and leaves PROCESSING and UNKNOWN records.
#[tokio::test]
async fn background_reaper_deletes_only_expired_outcomes() {
    use staleguard::idempotency::{MemoryStore, Reaper, State};
    let store = MemoryStore::new();
    let forgetful = Config {
        retention: Duration::ZERO,
        ..Config::default()
    };
    let file = ScratchFile::new("ledger");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&file.0)
        .create_if_missing(true);
    let ledger = Ledger::sqlite(sqlx::SqlitePool::connect_with(options).await.unwrap()).await;
    let shop = Shop::new(Idempotency::with_config(store.clone(), forgetful), ledger);
    charge(&shop, pay("done", "o1", 1)).await.unwrap();
    let gateway = Gateway::default();
    assert_eq!(
        charge_remote(&shop, pay("unknown", "o2", 1), &gateway).await,
        Err(AppError::Timeout)
    );
    let release = Notify::new();
    let mut running = std::pin::pin!(slow(&shop, pay("running", "o3", 1), &release));
    assert!(
        std::future::poll_fn(|cx| std::task::Poll::Ready(running.as_mut().poll(cx).is_pending()))
            .await
    );
    assert_eq!(store.len(), 3);
    let reaper = Reaper::new(shop.idem.clone()).spawn(Duration::from_millis(5));
    for _ in 0..2000 {
        if store.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reaper.abort();
    let state = |key: &str| {
        let store = store.clone();
        let key = staleguard::idempotency::RecordKey {
            handler: String::new(),
            tenant: String::new(),
            key: key.to_owned(),
        };
        async move {
            for handler in ["charge", "charge_remote", "slow"] {
                let key = staleguard::idempotency::RecordKey {
                    handler: handler.to_owned(),
                    ..key.clone()
                };
                if let Some(record) = store.get(&key).await.unwrap() {
                    return Some(record.state);
                }
            }
            None
        }
    };
    assert_eq!(state("done").await, None);
    assert_eq!(state("unknown").await, Some(State::Unknown));
    assert_eq!(state("running").await, Some(State::Processing));
}
