//! The store conformance suite: every check runs against every store (memory, SQLite, and
//! PostgreSQL when `STALEGUARD_TEST_POSTGRES_URL` is set) through the engine, with a wrapper that
//! counts store round trips. Leases and retention of zero make expiry immediate on the store's
//! own clock, so nothing sleeps.

#![cfg(feature = "sqlite")]

mod idempotent_support;

use idempotent_support::*;
use staleguard::idempotency::{
    Attempt, Begun, Call, ClaimRequest, Config, FailedPolicy, Fingerprint, Fingerprinter, Guard,
    Idempotency, IdempotencyError, IdempotencyKey, IdempotencyStore, Outcome, Reconciler, Record,
    RecordKey, Resolution, Resolved, State, StoreError, Transition,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts calls into the store it wraps: each call is one statement, one round trip. With
/// `refuse_over`, it refuses a SUCCESS whose response is longer (a store's own size limit).
#[derive(Clone)]
struct Counting<S> {
    inner: S,
    calls: Arc<AtomicUsize>,
    refuse_over: Option<usize>,
}

impl<S> Counting<S> {
    fn take(&self) -> usize {
        self.calls.swap(0, Ordering::SeqCst)
    }
    fn tick(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl<S: IdempotencyStore> IdempotencyStore for Counting<S> {
    async fn claim(&self, r: &ClaimRequest<'_>) -> Result<Record, StoreError> {
        self.tick();
        self.inner.claim(r).await
    }
    async fn finish(
        &self,
        a: &Attempt<'_>,
        o: Outcome<'_>,
        ms: i64,
    ) -> Result<Transition, StoreError> {
        self.tick();
        if let (Some(limit), Outcome::Success(body)) = (self.refuse_over, &o)
            && body.len() > limit
        {
            return Err(StoreError::msg("value too long for the response column"));
        }
        self.inner.finish(a, o, ms).await
    }
    async fn heartbeat(&self, a: &Attempt<'_>, ms: i64) -> Result<Transition, StoreError> {
        self.tick();
        self.inner.heartbeat(a, ms).await
    }
    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        self.tick();
        self.inner.get(key).await
    }
    async fn unknown(&self, limit: u32, reserve_ms: i64) -> Result<Vec<Record>, StoreError> {
        self.tick();
        self.inner.unknown(limit, reserve_ms).await
    }
    async fn resolve(
        &self,
        k: &RecordKey,
        f: i64,
        r: Resolved<'_>,
        ms: i64,
    ) -> Result<Transition, StoreError> {
        self.tick();
        self.inner.resolve(k, f, r, ms).await
    }
    async fn reap(&self) -> Result<u64, StoreError> {
        self.tick();
        self.inner.reap().await
    }
}

/// One store under test; engines with different configurations share it.
struct Fixture<S> {
    store: Counting<S>,
}

impl<S: IdempotencyStore + Clone> Fixture<S> {
    fn new(store: S) -> Self {
        Fixture {
            store: Counting {
                inner: store,
                calls: Arc::default(),
                refuse_over: None,
            },
        }
    }

    fn engine(&self, config: Config) -> Idempotency<Counting<S>> {
        Idempotency::with_config(self.store.clone(), config)
    }

    /// Long lease: a claim stays exclusive for the whole test.
    fn held(&self) -> Idempotency<Counting<S>> {
        self.engine(Config {
            lease: Duration::from_secs(3600),
            ..Config::default()
        })
    }

    /// Zero lease: a claim is expired as soon as it is made (by the store's clock).
    fn expiring(&self) -> Idempotency<Counting<S>> {
        self.engine(Config {
            lease: Duration::ZERO,
            ..Config::default()
        })
    }

    async fn record(&self, key: &str) -> Option<Record> {
        self.store.inner.get(&record_key(key)).await.unwrap()
    }
}

fn fingerprint(amount: u64) -> Fingerprint {
    let mut fp = Fingerprinter::new();
    fp.add("amount", &amount);
    fp.finish().unwrap()
}

fn call(key: &str, amount: u64) -> Call {
    Call::new(
        "charge",
        IdempotencyKey::new(key).unwrap(),
        fingerprint(amount),
    )
}

fn record_key(key: &str) -> RecordKey {
    RecordKey::new("charge", None, &IdempotencyKey::new(key).unwrap())
}

fn receipt(order: &str, attempt: u64) -> Receipt {
    Receipt {
        order: order.to_owned(),
        amount: 100,
        attempt,
    }
}

async fn run<S: IdempotencyStore>(engine: &Idempotency<S>, call: Call) -> Guard<S> {
    match engine.begin(call).await {
        Ok(Begun::Run(guard)) => guard,
        Ok(Begun::Replay(stored)) => panic!("expected to run, got a replay of {stored:?}"),
        Err(e) => panic!("expected to run, got {e}"),
    }
}

async fn replay<S: IdempotencyStore>(
    engine: &Idempotency<S>,
    call: Call,
) -> Result<Receipt, AppError> {
    match engine.begin(call).await {
        Ok(Begun::Replay(Ok(body))) => Ok(serde_json::from_str(&body).unwrap()),
        Ok(Begun::Replay(Err(body))) => Err(serde_json::from_str(&body).unwrap()),
        Ok(Begun::Run(guard)) => panic!(
            "expected a replay, the body would run (fence {})",
            guard.handle().fence()
        ),
        Err(e) => panic!("expected a replay, got {e}"),
    }
}

async fn refused<S: IdempotencyStore>(engine: &Idempotency<S>, call: Call) -> IdempotencyError {
    match engine.begin(call).await {
        Err(e) => e,
        Ok(Begun::Run(_)) => panic!("expected an error, the body would run"),
        Ok(Begun::Replay(stored)) => panic!("expected an error, got a replay of {stored:?}"),
    }
}

async fn claim_then_complete_in_two_round_trips<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    f.store.take();
    let guard = run(&engine, call("k1", 100)).await;
    assert_eq!(guard.handle().fence(), 1);
    let done = guard.finish::<_, AppError>(Ok(receipt("o1", 1))).await;
    assert_eq!(done, Ok(receipt("o1", 1)));
    assert_eq!(f.store.take(), 2, "claim + complete");
    let record = f.record("k1").await.unwrap();
    assert_eq!(record.state, State::Success);
    assert_eq!(record.fence, 1);
}

async fn replay_costs_one_round_trip<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    let guard = run(&engine, call("k1", 100)).await;
    guard
        .finish::<_, AppError>(Ok(receipt("o1", 1)))
        .await
        .unwrap();
    f.store.take();
    assert_eq!(replay(&engine, call("k1", 100)).await, Ok(receipt("o1", 1)));
    assert_eq!(f.store.take(), 1, "a replay is the claim statement alone");
    assert_eq!(replay(&engine, call("k1", 100)).await, Ok(receipt("o1", 1)));
}

async fn same_key_other_payload_is_a_mismatch<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    let guard = run(&engine, call("k1", 100)).await;
    // While in flight, and once stored: the payload is compared first.
    assert!(matches!(
        refused(&engine, call("k1", 999)).await,
        IdempotencyError::Mismatch
    ));
    guard
        .finish::<_, AppError>(Ok(receipt("o1", 1)))
        .await
        .unwrap();
    assert!(matches!(
        refused(&engine, call("k1", 999)).await,
        IdempotencyError::Mismatch
    ));
    // Scoped by handler and tenant: the same key elsewhere is another record.
    let mut other = call("k1", 999);
    other.handler = "refund".to_owned();
    run(&engine, other).await;
    let mut tenant = call("k1", 999);
    tenant.tenant = Some(IdempotencyKey::new("acme").unwrap());
    run(&engine, tenant).await;
}

async fn duplicate_in_flight_is_in_progress<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    let _first = run(&engine, call("k1", 100)).await;
    match refused(&engine, call("k1", 100)).await {
        IdempotencyError::InProgress { retry_after } => {
            assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(3600));
        }
        other => panic!("expected in progress, got {other}"),
    }
    assert_eq!(
        f.record("k1").await.unwrap().fence,
        1,
        "a duplicate never takes a live lease"
    );
}

async fn duplicate_may_wait_for_the_first_outcome<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    let waiting = f.engine(Config {
        lease: Duration::from_secs(3600),
        wait: Some(Duration::from_secs(30)),
        poll: Duration::from_millis(5),
        ..Config::default()
    });
    let first = run(&engine, call("k1", 100)).await;
    let duplicate = tokio::spawn(async move { replay(&waiting, call("k1", 100)).await });
    tokio::time::sleep(Duration::from_millis(30)).await;
    first
        .finish::<_, AppError>(Ok(receipt("o1", 1)))
        .await
        .unwrap();
    assert_eq!(duplicate.await.unwrap(), Ok(receipt("o1", 1)));
}

async fn expired_lease_is_taken_over_with_a_higher_fence<S: IdempotencyStore + Clone>(
    f: &Fixture<S>,
) {
    let engine = f.expiring();
    let first = run(&engine, call("k1", 100)).await;
    let second = run(&engine, call("k1", 100)).await;
    assert_eq!(first.handle().fence(), 1);
    assert_eq!(second.handle().fence(), 2);
    assert_eq!(
        first.handle().record_id(),
        second.handle().record_id(),
        "the record id survives a takeover"
    );
    let record = f.record("k1").await.unwrap();
    assert_eq!((record.state, record.fence), (State::Processing, 2));
    // A takeover needs the same payload.
    assert!(matches!(
        refused(&engine, call("k1", 5)).await,
        IdempotencyError::Mismatch
    ));
}

async fn late_owner_is_fenced_and_writes_nothing<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.expiring();
    let late = run(&engine, call("k1", 100)).await;
    let late_handle = late.handle();
    let current = run(&engine, call("k1", 100)).await;
    assert!(matches!(
        late_handle.heartbeat().await,
        Err(IdempotencyError::Fenced)
    ));
    assert!(current.handle().heartbeat().await.is_ok());
    // The late owner's success is rejected...
    assert_eq!(
        late.finish(Ok(receipt("o1", 1))).await,
        Err(AppError::Idem(Idem::Fenced))
    );
    let record = f.record("k1").await.unwrap();
    assert_eq!(
        (record.state, record.fence, record.response),
        (State::Processing, 2, None)
    );
    // ...and so are its failure and its release (it must not delete the new owner's record).
    let late2 = {
        let engine = f.expiring();
        let g = run(&engine, call("k2", 100)).await;
        let _current2 = run(&engine, call("k2", 100)).await;
        g
    };
    assert_eq!(
        late2.finish::<Receipt, _>(Err(AppError::Unavailable)).await,
        Err(AppError::Unavailable)
    );
    let record2 = f.record("k2").await.unwrap();
    assert_eq!((record2.state, record2.fence), (State::Processing, 2));
    // The current owner completes; duplicates replay its response.
    current
        .finish::<_, AppError>(Ok(receipt("o1", 2)))
        .await
        .unwrap();
    assert_eq!(
        replay(&f.held(), call("k1", 100)).await,
        Ok(receipt("o1", 2))
    );
}

async fn retryable_failure_releases_the_key<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.held();
    let guard = run(&engine, call("k1", 100)).await;
    assert_eq!(
        guard.finish::<Receipt, _>(Err(AppError::Unavailable)).await,
        Err(AppError::Unavailable)
    );
    assert_eq!(f.record("k1").await, None);
    let again = run(&engine, call("k1", 100)).await;
    assert_eq!(again.handle().fence(), 1);
}

/// A receipt whose serialized form is longer than 64 bytes.
fn long_receipt() -> Receipt {
    receipt(&"o".repeat(100), 1)
}

/// Three requests with one key, each answered with `long_receipt()` by the effect when the body
/// runs: how many times the body ran.
async fn effects_of_three_requests<S: IdempotencyStore>(engine: &Idempotency<S>) -> usize {
    let mut effects = 0;
    for _ in 0..3 {
        match engine.begin(call("k1", 100)).await {
            Ok(Begun::Run(guard)) => {
                effects += 1;
                // The effect happened: this caller gets its answer.
                assert_eq!(
                    guard.finish::<_, AppError>(Ok(long_receipt())).await,
                    Ok(long_receipt())
                );
            }
            Ok(Begun::Replay(stored)) => panic!("nothing was stored to replay: {stored:?}"),
            Err(e) => assert!(matches!(e, IdempotencyError::InProgress { .. }), "{e}"),
        }
    }
    effects
}

async fn a_response_over_the_limit_becomes_unknown_and_is_not_run_again<
    S: IdempotencyStore + Clone,
>(
    f: &Fixture<S>,
) {
    let engine = f.engine(Config {
        lease: Duration::ZERO,
        max_response_bytes: 64,
        ..Config::default()
    });
    assert_eq!(
        effects_of_three_requests(&engine).await,
        1,
        "a retry ran the effect again"
    );
    assert_eq!(f.record("k1").await.unwrap().state, State::Unknown);
}

async fn a_response_the_store_refuses_becomes_unknown_and_is_not_run_again<
    S: IdempotencyStore + Clone,
>(
    f: &Fixture<S>,
) {
    let limited = Fixture {
        store: Counting {
            refuse_over: Some(64),
            ..f.store.clone()
        },
    };
    assert_eq!(
        effects_of_three_requests(&limited.expiring()).await,
        1,
        "a retry ran the effect again"
    );
    assert_eq!(f.record("k1").await.unwrap().state, State::Unknown);
}

async fn release_after_a_takeover_keeps_the_record<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.expiring();
    // A claims, hands its record id to the provider, and crashes (its guard is never
    // finished; the zero lease has already expired).
    let crashed = run(&engine, call("k1", 100)).await;
    let first_id = crashed.handle().record_id().to_owned();
    drop(crashed);
    // B takes over and fails retryably before calling out.
    let taken = run(&engine, call("k1", 100)).await;
    assert_eq!(taken.handle().fence(), 2);
    assert_eq!(
        taken.finish::<Receipt, _>(Err(AppError::Unavailable)).await,
        Err(AppError::Unavailable)
    );
    // A may have charged under `first_id`: the record must survive B's release, so that the
    // next request reuses the id (the provider deduplicates on it) and fences both out.
    let record = f
        .record("k1")
        .await
        .expect("a release after a takeover keeps the record");
    assert_eq!(record.record_id, first_id);
    let next = run(&f.held(), call("k1", 100)).await;
    assert_eq!(next.handle().record_id(), first_id);
    assert_eq!(next.handle().fence(), 3);
}

async fn permanent_failure_is_replayed_or_retried_by_policy<S: IdempotencyStore + Clone>(
    f: &Fixture<S>,
) {
    let engine = f.held();
    let declined = AppError::Declined("insufficient funds".to_owned());
    let guard = run(&engine, call("k1", 100)).await;
    assert_eq!(
        guard.finish::<Receipt, _>(Err(declined.clone())).await,
        Err(declined.clone())
    );
    assert_eq!(f.record("k1").await.unwrap().state, State::Failed);
    assert_eq!(replay(&engine, call("k1", 100)).await, Err(declined));
    let retrying = f.engine(Config {
        failed: FailedPolicy::Retry,
        ..Config::default()
    });
    let retry = run(&retrying, call("k1", 100)).await;
    assert_eq!(retry.handle().fence(), 2);
    retry
        .finish::<_, AppError>(Ok(receipt("o1", 2)))
        .await
        .unwrap();
    assert_eq!(replay(&engine, call("k1", 100)).await, Ok(receipt("o1", 2)));
}

async fn unknown_is_in_progress_until_reconciled<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.expiring();
    for key in ["k1", "k2", "k3"] {
        let guard = run(&engine, call(key, 100)).await;
        assert_eq!(
            guard.finish::<Receipt, _>(Err(AppError::Timeout)).await,
            Err(AppError::Timeout)
        );
        assert_eq!(f.record(key).await.unwrap().state, State::Unknown);
        // Even with an expired lease, UNKNOWN is never taken over: the effect may have happened.
        assert!(matches!(
            refused(&engine, call(key, 100)).await,
            IdempotencyError::InProgress { .. }
        ));
    }
    let reconciler = Reconciler::new(
        engine.clone(),
        |record: staleguard::idempotency::UnknownRecord| async move {
            assert_eq!(record.error_as::<AppError>(), Some(AppError::Timeout));
            match record.key.key.as_str() {
                "k1" => Resolution::success(&receipt("o1", 1)).unwrap(),
                "k2" => {
                    Resolution::failure(&AppError::Declined("never charged".to_owned())).unwrap()
                }
                _ => Resolution::StillUnknown,
            }
        },
    );
    let report = reconciler.run_once().await.unwrap();
    assert_eq!(
        (report.resolved, report.still_unknown, report.raced),
        (2, 1, 0)
    );
    assert_eq!(replay(&engine, call("k1", 100)).await, Ok(receipt("o1", 1)));
    assert_eq!(
        replay(&engine, call("k2", 100)).await,
        Err(AppError::Declined("never charged".to_owned()))
    );
    assert!(matches!(
        refused(&engine, call("k3", 100)).await,
        IdempotencyError::InProgress { .. }
    ));
    // Resolution is a compare-and-set on (key, fence, UNKNOWN).
    let k3 = f.record("k3").await.unwrap();
    let stale = f
        .store
        .inner
        .resolve(
            &record_key("k3"),
            k3.fence + 1,
            Resolved::Success("1"),
            1000,
        )
        .await
        .unwrap();
    assert_eq!(stale, Transition::Fenced);
    let done = f
        .store
        .inner
        .resolve(&record_key("k1"), 1, Resolved::Success("1"), 1000)
        .await
        .unwrap();
    assert_eq!(
        done,
        Transition::Fenced,
        "an already resolved record is not resolved again"
    );
}

async fn still_unknown_records_make_way_for_newer_ones<S: IdempotencyStore + Clone>(
    f: &Fixture<S>,
) {
    let engine = f.expiring();
    for key in ["k1", "k2", "k3"] {
        if key == "k3" {
            // k3 is the newest UNKNOWN record, by the store's clock.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let guard = run(&engine, call(key, 100)).await;
        assert_eq!(
            guard.finish::<Receipt, _>(Err(AppError::Timeout)).await,
            Err(AppError::Timeout)
        );
    }
    // The provider has no answer for the two old records; it knows k3 succeeded.
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = asked.clone();
    let reconciler = Reconciler::new(
        engine.clone(),
        move |record: staleguard::idempotency::UnknownRecord| {
            let seen = seen.clone();
            async move {
                if record.key.key == "k3" {
                    seen.fetch_add(1, Ordering::SeqCst);
                    Resolution::success(&receipt("o3", 1)).unwrap()
                } else {
                    Resolution::StillUnknown
                }
            }
        },
    )
    .batch(2);
    for _ in 0..3 {
        reconciler.run_once().await.unwrap();
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "two undecidable records must not hide a newer one from a batch of two"
    );
    assert_eq!(replay(&engine, call("k3", 100)).await, Ok(receipt("o3", 1)));
    assert_eq!(f.record("k1").await.unwrap().state, State::Unknown);
}

async fn two_reconcilers_ask_about_each_record_once<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    let engine = f.expiring();
    let keys = ["k1", "k2", "k3", "k4", "k5", "k6"];
    for key in keys {
        let guard = run(&engine, call(key, 100)).await;
        assert_eq!(
            guard.finish::<Receipt, _>(Err(AppError::Timeout)).await,
            Err(AppError::Timeout)
        );
    }
    // One reconciler per instance, passes at the same moment; the provider is slow to answer.
    let asked: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let reconciler = || {
        let asked = asked.clone();
        Reconciler::new(
            engine.clone(),
            move |record: staleguard::idempotency::UnknownRecord| {
                let asked = asked.clone();
                async move {
                    asked.lock().unwrap().push(record.key.key.clone());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Resolution::success(&receipt(&record.key.key, 1)).unwrap()
                }
            },
        )
    };
    let (a, b) = (reconciler(), reconciler());
    let (ra, rb) = tokio::join!(a.run_once(), b.run_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let mut asked = asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(
        asked, keys,
        "each record is asked about once, by one reconciler"
    );
    assert_eq!((ra.resolved + rb.resolved, ra.raced + rb.raced), (6, 0));
    for key in keys {
        assert_eq!(replay(&engine, call(key, 100)).await, Ok(receipt(key, 1)));
    }
}

async fn a_reservation_ends_and_the_record_is_asked_about_again<S: IdempotencyStore + Clone>(
    f: &Fixture<S>,
) {
    // A reconciler that took a record and died (its reservation is never ended by a defer or a
    // resolution) does not hide it for ever: after the reservation, another pass asks.
    let engine = f.expiring();
    let guard = run(&engine, call("k1", 100)).await;
    let _ = guard.finish::<Receipt, _>(Err(AppError::Timeout)).await;
    let taken = f.store.inner.unknown(10, 150).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert!(
        f.store.inner.unknown(10, 150).await.unwrap().is_empty(),
        "reserved"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = Reconciler::new(engine.clone(), |_| async {
        Resolution::success(&receipt("o1", 1)).unwrap()
    })
    .run_once()
    .await
    .unwrap();
    assert_eq!(report.resolved, 1);
}

async fn retention_expires_outcomes_and_the_reaper_spares_live_records<
    S: IdempotencyStore + Clone,
>(
    f: &Fixture<S>,
) {
    let forgetful = f.engine(Config {
        retention: Duration::ZERO,
        lease: Duration::from_secs(3600),
        ..Config::default()
    });
    let first = run(&forgetful, call("k1", 100)).await;
    let first_id = first.handle().record_id().to_owned();
    first
        .finish::<_, AppError>(Ok(receipt("o1", 1)))
        .await
        .unwrap();
    // Checked on read: an expired outcome is not replayed and does not cause a mismatch.
    let fresh = run(&forgetful, call("k1", 555)).await;
    assert_ne!(fresh.handle().record_id(), first_id);
    fresh
        .finish::<_, AppError>(Ok(receipt("o1", 2)))
        .await
        .unwrap();
    // k1: expired SUCCESS; k2: expired FAILED; k3: PROCESSING; k4: UNKNOWN; k5: kept SUCCESS.
    let g = run(&forgetful, call("k2", 100)).await;
    let _ = g
        .finish::<Receipt, _>(Err(AppError::Declined("no".to_owned())))
        .await;
    let _processing = run(&forgetful, call("k3", 100)).await;
    let g = run(&forgetful, call("k4", 100)).await;
    let _ = g.finish::<Receipt, _>(Err(AppError::Timeout)).await;
    let kept = f.held();
    let g = run(&kept, call("k5", 100)).await;
    g.finish::<_, AppError>(Ok(receipt("o5", 1))).await.unwrap();
    assert_eq!(forgetful.reap().await.unwrap(), 2);
    assert_eq!(f.record("k1").await, None);
    assert_eq!(f.record("k2").await, None);
    assert_eq!(f.record("k3").await.unwrap().state, State::Processing);
    assert_eq!(f.record("k4").await.unwrap().state, State::Unknown);
    assert_eq!(f.record("k5").await.unwrap().state, State::Success);
    assert_eq!(forgetful.reap().await.unwrap(), 0);
}

async fn heartbeat_extends_the_lease<S: IdempotencyStore + Clone>(f: &Fixture<S>) {
    // Lease 2 s; the owner renews at 1.2 s; at 2.4 s the original lease is over but the renewed
    // one is not, so a duplicate is still told "in progress" instead of taking over.
    let engine = f.engine(Config {
        lease: Duration::from_secs(2),
        ..Config::default()
    });
    let owner = run(&engine, call("k1", 100)).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    owner.handle().heartbeat().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(matches!(
        refused(&engine, call("k1", 100)).await,
        IdempotencyError::InProgress { .. }
    ));
    assert_eq!(f.record("k1").await.unwrap().fence, 1);
    owner
        .finish::<_, AppError>(Ok(receipt("o1", 1)))
        .await
        .unwrap();
}

macro_rules! suite {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let fixture = super::Fixture::new(staleguard::idempotency::MemoryStore::new());
                    super::$check(&fixture).await;
                }
            )*
        }

        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let (engine, _file) = super::sqlite_store(Default::default()).await;
                    let fixture = super::Fixture::new(engine.store().clone());
                    super::$check(&fixture).await;
                }
            )*
        }

        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let Some(url) = super::postgres_url(concat!("postgres::", stringify!($check))) else { return };
                    let (engine, table) = super::postgres_store(&url, Default::default()).await;
                    let fixture = super::Fixture::new(engine.store().clone());
                    super::$check(&fixture).await;
                    super::drop_postgres_table(&engine, &table).await;
                }
            )*
        }

        #[cfg(feature = "redis")]
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let Some(url) = super::redis_url(concat!("redis::", stringify!($check))) else { return };
                    let engine = super::redis_store(&url, Default::default()).await;
                    let fixture = super::Fixture::new(engine.store().clone());
                    super::$check(&fixture).await;
                    super::drop_redis_prefix(&url, engine.store().prefix()).await;
                }
            )*
        }
    };
}

suite!(
    claim_then_complete_in_two_round_trips,
    replay_costs_one_round_trip,
    same_key_other_payload_is_a_mismatch,
    duplicate_in_flight_is_in_progress,
    duplicate_may_wait_for_the_first_outcome,
    expired_lease_is_taken_over_with_a_higher_fence,
    late_owner_is_fenced_and_writes_nothing,
    heartbeat_extends_the_lease,
    retryable_failure_releases_the_key,
    release_after_a_takeover_keeps_the_record,
    a_response_over_the_limit_becomes_unknown_and_is_not_run_again,
    a_response_the_store_refuses_becomes_unknown_and_is_not_run_again,
    permanent_failure_is_replayed_or_retried_by_policy,
    unknown_is_in_progress_until_reconciled,
    still_unknown_records_make_way_for_newer_ones,
    two_reconcilers_ask_about_each_record_once,
    a_reservation_ends_and_the_record_is_asked_about_again,
    retention_expires_outcomes_and_the_reaper_spares_live_records,
);
