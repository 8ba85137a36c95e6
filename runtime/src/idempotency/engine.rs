//! The engine: claim, decide (run / replay / in progress / mismatch / take over), and complete
//! by compare-and-set. `#[idempotent]` expands into [`Idempotency::begin`] and
//! [`Guard::finish`] around the handler's body.

pub use super::codec::{ErrorCodec, ResponseCodec};
use super::error::IdempotencyError;
use super::failure::{Classify, FailureKind};
use super::fingerprint::Fingerprint;
use super::key::{IdempotencyKey, RecordKey};
use super::record::{Attempt, ClaimRequest, Outcome, Record, State, Transition};
use super::store::{IdempotencyStore, StoreError};
use super::token;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// What to do when a duplicate finds a FAILED record (a permanent error) with the same payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedPolicy {
    /// Replay the stored error: the body does not run again (default).
    Replay,
    /// Take the record over (fence + 1) and run the body again.
    Retry,
}

/// Engine-wide defaults; `#[idempotent(lease = .., ..)]` overrides them per handler.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long a claim is exclusive before another request may take it over (default 30 s).
    pub lease: Duration,
    /// How long SUCCESS and FAILED records are kept and replayed (default 24 h).
    pub retention: Duration,
    /// When set, a duplicate in flight waits up to this long for the first request's outcome
    /// before answering "in progress" (default: answer at once).
    pub wait: Option<Duration>,
    pub failed: FailedPolicy,
    /// First polling interval while waiting (doubles up to 8x).
    pub poll: Duration,
    /// The largest response (serialized) stored for replay (default 256 MiB). A larger one is
    /// not written: its record becomes UNKNOWN, for the reconciler, so that a retry does not
    /// run the effect again.
    pub max_response_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            lease: Duration::from_secs(30),
            retention: Duration::from_secs(24 * 60 * 60),
            wait: None,
            failed: FailedPolicy::Replay,
            poll: Duration::from_millis(20),
            max_response_bytes: 256 << 20,
        }
    }
}

/// A store and its configuration. Cheap to clone (one `Arc`).
pub struct Idempotency<S> {
    pub(super) inner: Arc<Inner<S>>,
}

pub(super) struct Inner<S> {
    pub(super) store: S,
    pub(super) config: Config,
}

impl<S> Clone for Idempotency<S> {
    fn clone(&self) -> Self {
        Idempotency {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// One idempotent call, as the macro describes it.
#[derive(Debug, Clone)]
pub struct Call {
    pub handler: String,
    pub tenant: Option<IdempotencyKey>,
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    pub lease: Option<Duration>,
    pub retention: Option<Duration>,
    pub wait: Option<Duration>,
    pub failed: Option<FailedPolicy>,
}

impl Call {
    pub fn new(handler: impl Into<String>, key: IdempotencyKey, fingerprint: Fingerprint) -> Self {
        Call {
            handler: handler.into(),
            tenant: None,
            key,
            fingerprint,
            lease: None,
            retention: None,
            wait: None,
            failed: None,
        }
    }
}

/// What [`Idempotency::begin`] decided.
pub enum Begun<S> {
    /// This request owns the key: run the body, then [`Guard::finish`].
    Run(Guard<S>),
    /// The outcome is stored: `Ok` holds the response JSON, `Err` the error JSON.
    Replay(Result<String, String>),
}

pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

impl<S: IdempotencyStore> Idempotency<S> {
    pub fn new(store: S) -> Self {
        Idempotency::with_config(store, Config::default())
    }

    pub fn with_config(store: S, config: Config) -> Self {
        Idempotency {
            inner: Arc::new(Inner { store, config }),
        }
    }

    pub fn store(&self) -> &S {
        &self.inner.store
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Claims the call's key and decides: run, replay, or an error (in progress, mismatch,
    /// store). A replay or an "in progress" answer is one read; the store writes only for a
    /// new key or a takeover.
    pub async fn begin(&self, call: Call) -> Result<Begun<S>, IdempotencyError> {
        let prepared = self.prepare(call);
        let request = prepared.request(prepared.failed == FailedPolicy::Retry);
        async {
            let mut patience = Patience::new(prepared.wait, self.inner.config.poll);
            loop {
                // A claim is safe to repeat: if the first attempt was applied before its
                // connection failed, the second finds the record owned by this request.
                let record = match self.inner.store.claim(&request).await {
                    Ok(record) => record,
                    Err(e) => {
                        tracing::debug!(error = %e, "idempotency claim failed; retrying once");
                        self.inner.store.claim(&request).await?
                    }
                };
                tracing::Span::current().record("fence", record.fence);
                match self.decide(&record, &request) {
                    Decision::Run => {
                        if record.fence > 1 {
                            tracing::info!(record_id = %record.record_id, "idempotency takeover");
                        } else {
                            tracing::debug!("idempotency claimed");
                        }
                        return Ok(Begun::Run(Guard {
                            handle: self.handle(&prepared, record, false),
                            retention_ms: ms(prepared.retention),
                        }));
                    }
                    Decision::Replay(stored) => {
                        tracing::debug!(ok = stored.is_ok(), "idempotency replay");
                        return Ok(Begun::Replay(stored));
                    }
                    Decision::Mismatch => {
                        tracing::warn!("idempotency key reused with a different payload");
                        return Err(IdempotencyError::Mismatch);
                    }
                    Decision::Busy(retry_after) => {
                        if !patience.wait().await {
                            tracing::info!(
                                state = record.state.as_str(),
                                retry_after_ms = retry_after.as_millis() as u64,
                                "idempotency in progress"
                            );
                            return Err(IdempotencyError::InProgress { retry_after });
                        }
                    }
                }
            }
        }
        .instrument(prepared.span.clone())
        .await
    }

    /// The handle of the claim this request won: `record`'s fence and id, for the key and
    /// owner `prepared` drew.
    pub(super) fn handle(
        &self,
        prepared: &Prepared,
        record: Record,
        local: bool,
    ) -> ClaimHandle<S> {
        ClaimHandle {
            engine: self.clone(),
            key: prepared.key.clone(),
            owner: prepared.owner.clone(),
            fence: record.fence,
            record_id: record.record_id,
            lease_ms: ms(prepared.lease),
            local,
        }
    }

    /// Resolves `call` against the engine's defaults and draws the owner token and the record
    /// id a new record would get.
    pub(super) fn prepare(&self, call: Call) -> Prepared {
        let key = RecordKey::new(
            call.handler,
            call.tenant.as_ref().map(|t| t.as_str()),
            &call.key,
        );
        let span = tracing::info_span!(
            "idempotency.claim",
            handler = %key.handler,
            tenant = %key.tenant,
            key = %key.key,
            fence = tracing::field::Empty,
        );
        let config = &self.inner.config;
        Prepared {
            span,
            key,
            fingerprint: call.fingerprint,
            lease: call.lease.unwrap_or(config.lease),
            retention: call.retention.unwrap_or(config.retention),
            wait: call.wait.or(config.wait),
            failed: call.failed.unwrap_or(config.failed),
            owner: token::fresh(),
            record_id: token::fresh(),
        }
    }

    pub(super) fn decide(&self, record: &Record, request: &ClaimRequest<'_>) -> Decision {
        if record.owner == request.owner {
            return Decision::Run;
        }
        if record.fingerprint != request.fingerprint {
            return Decision::Mismatch;
        }
        let stored = || record.response.clone().unwrap_or_else(|| "null".to_owned());
        match record.state {
            State::Success => Decision::Replay(Ok(stored())),
            State::Failed => Decision::Replay(Err(stored())),
            State::Processing => Decision::Busy(Duration::from_millis(
                (record.lease_expires_at - record.now).max(0) as u64,
            )),
            State::Unknown => Decision::Busy(Duration::from_millis(request.lease_ms.max(0) as u64)),
        }
    }

    /// Deletes SUCCESS and FAILED records past retention (never PROCESSING or UNKNOWN).
    pub async fn reap(&self) -> Result<u64, IdempotencyError> {
        let removed = self.inner.store.reap().await?;
        tracing::debug!(removed, "idempotency reaped");
        Ok(removed)
    }
}

/// A call resolved against the engine's defaults: what its claim needs.
pub(super) struct Prepared {
    pub(super) key: RecordKey,
    pub(super) span: tracing::Span,
    pub(super) fingerprint: Fingerprint,
    pub(super) lease: Duration,
    pub(super) retention: Duration,
    pub(super) wait: Option<Duration>,
    pub(super) failed: FailedPolicy,
    pub(super) owner: String,
    pub(super) record_id: String,
}

/// How long a duplicate that finds the key in progress waits for the first request: until its
/// `wait` runs out, polling with pauses that double from the engine's poll interval up to
/// eight times it.
pub(super) struct Patience {
    deadline: Option<tokio::time::Instant>,
    pause: Duration,
    poll: Duration,
}

impl Patience {
    pub(super) fn new(wait: Option<Duration>, poll: Duration) -> Self {
        Patience {
            deadline: wait.map(|w| tokio::time::Instant::now() + w),
            pause: poll,
            poll,
        }
    }

    /// Sleeps one pause and answers `true`, or answers `false` once the wait has run out.
    pub(super) async fn wait(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        match self.deadline {
            Some(deadline) if now < deadline => {
                tokio::time::sleep(self.pause.min(deadline - now)).await;
                self.pause = (self.pause * 2).min(self.poll * 8);
                true
            }
            _ => false,
        }
    }
}

impl Prepared {
    pub(super) fn request(&self, retry_failed: bool) -> ClaimRequest<'_> {
        ClaimRequest {
            key: &self.key,
            record_id: &self.record_id,
            fingerprint: self.fingerprint.as_str(),
            owner: &self.owner,
            lease_ms: ms(self.lease),
            retention_ms: ms(self.retention),
            retry_failed,
        }
    }
}

pub(super) enum Decision {
    Run,
    Replay(Result<String, String>),
    Mismatch,
    Busy(Duration),
}

/// What the body can see of its claim: the fence and the record id to pass downstream, and a
/// heartbeat for long bodies. Bind it with `#[idempotent(claim = name, ..)]`.
pub struct ClaimHandle<S> {
    pub(super) engine: Idempotency<S>,
    pub(super) key: RecordKey,
    pub(super) owner: String,
    pub(super) fence: i64,
    pub(super) record_id: String,
    pub(super) lease_ms: i64,
    /// Claimed in the body's transaction: the row lock, not the lease, keeps duplicates out.
    pub(super) local: bool,
}

impl<S> Clone for ClaimHandle<S> {
    fn clone(&self) -> Self {
        ClaimHandle {
            engine: self.engine.clone(),
            key: self.key.clone(),
            owner: self.owner.clone(),
            fence: self.fence,
            record_id: self.record_id.clone(),
            lease_ms: self.lease_ms,
            local: self.local,
        }
    }
}

impl<S: IdempotencyStore> ClaimHandle<S> {
    /// The fencing counter of this claim: 1 for the first owner, +1 per takeover. A downstream
    /// system that remembers the highest fence it saw per record can refuse an older owner.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// The record's id, the same for every owner of this record: use it as the downstream
    /// idempotency key so a takeover does not repeat the effect.
    pub fn record_id(&self) -> &str {
        &self.record_id
    }

    pub fn key(&self) -> &RecordKey {
        &self.key
    }

    pub(super) fn attempt(&self) -> Attempt<'_> {
        Attempt {
            key: &self.key,
            fence: self.fence,
            owner: &self.owner,
        }
    }

    /// Renews the lease for another lease period. `Err(Fenced)` when the claim was taken over:
    /// stop, another owner is running. In the one-transaction mode it does nothing: the claim is
    /// the uncommitted row, which nobody can take over.
    pub async fn heartbeat(&self) -> Result<(), IdempotencyError> {
        if self.local {
            return Ok(());
        }
        match self
            .engine
            .inner
            .store
            .heartbeat(&self.attempt(), self.lease_ms)
            .await?
        {
            Transition::Applied => Ok(()),
            Transition::Fenced => {
                tracing::warn!(key = %self.key, fence = self.fence, "idempotency heartbeat fenced");
                Err(IdempotencyError::Fenced)
            }
        }
    }
}

/// The claim held while the body runs. Dropping it without [`finish`](Guard::finish) (a crash,
/// a cancelled future) leaves the record PROCESSING until its lease expires and another request
/// takes it over.
pub struct Guard<S> {
    handle: ClaimHandle<S>,
    retention_ms: i64,
}

impl<S: IdempotencyStore> Guard<S> {
    pub fn handle(&self) -> ClaimHandle<S> {
        self.handle.clone()
    }

    /// Records the body's result by compare-and-set and returns it: `Ok` → SUCCESS; an error →
    /// released (retryable), FAILED (permanent) or UNKNOWN (unknown). A fenced owner gets
    /// `Err(Fenced)` for a success and its own error otherwise; nothing is written.
    pub async fn finish<T, E>(self, result: Result<T, E>) -> Result<T, E>
    where
        T: Serialize + DeserializeOwned,
        E: Serialize + DeserializeOwned + Classify + From<IdempotencyError>,
    {
        self.finish_with(result, &ResponseCodec::new(), &ErrorCodec::new())
            .await
    }

    /// [`finish`](Self::finish) with the codecs built once (what the macro expands into).
    pub async fn finish_with<T, E>(
        self,
        result: Result<T, E>,
        response: &ResponseCodec<T>,
        error: &ErrorCodec<E>,
    ) -> Result<T, E> {
        let span = tracing::info_span!(
            "idempotency.complete",
            handler = %self.handle.key.handler,
            key = %self.handle.key.key,
            fence = self.handle.fence,
        );
        self.finish_inner(result, response, error)
            .instrument(span)
            .await
    }

    async fn finish_inner<T, E>(
        self,
        result: Result<T, E>,
        response: &ResponseCodec<T>,
        error_codec: &ErrorCodec<E>,
    ) -> Result<T, E> {
        let store = &self.handle.engine.inner.store;
        let attempt = self.handle.attempt();
        let from = error_codec.from;
        match result {
            Ok(value) => {
                let body = match (response.encode)(&value) {
                    Ok(body) => body,
                    Err(e) => {
                        let reason = format!("response could not be serialized: {e}");
                        let note = serde_json::to_string(&reason).unwrap_or_default();
                        tracing::warn!(%reason, "idempotency unknown");
                        let _ = store
                            .finish(&attempt, Outcome::Unknown(&note), self.retention_ms)
                            .await;
                        return Err(from(IdempotencyError::Codec { reason }));
                    }
                };
                let limit = self.handle.engine.inner.config.max_response_bytes;
                let stored = if body.len() > limit {
                    Err(format!(
                        "the response is {} bytes, over the limit of {limit}",
                        body.len()
                    ))
                } else {
                    match self.finish_twice(Outcome::Success(&body)).await {
                        Ok(t) => Ok(t),
                        // The effect is done: a retry must not run it again. If the store
                        // takes a small UNKNOWN, it refused this response, not the connection
                        // (see below); otherwise the failure is transient and stays one.
                        Err(e) => Err(format!("the store refused the response: {e}")),
                    }
                };
                match stored {
                    Ok(Transition::Applied) => Ok(value),
                    Ok(Transition::Fenced) => {
                        tracing::warn!("idempotency fenced: completion rejected");
                        Err(from(IdempotencyError::Fenced))
                    }
                    Err(reason) => {
                        let note = serde_json::to_string(&reason).unwrap_or_default();
                        match store
                            .finish(&attempt, Outcome::Unknown(&note), self.retention_ms)
                            .await
                        {
                            Ok(Transition::Applied) => {
                                tracing::warn!(%reason, "idempotency unknown: response not stored");
                                Ok(value)
                            }
                            // A failed attempt above was applied after all: stored.
                            Ok(Transition::Fenced) if self.stored_as(State::Success).await => {
                                Ok(value)
                            }
                            Ok(Transition::Fenced) => {
                                tracing::warn!("idempotency fenced: completion rejected");
                                Err(from(IdempotencyError::Fenced))
                            }
                            Err(e) => Err(from(IdempotencyError::Store(e))),
                        }
                    }
                }
            }
            Err(error) => {
                let kind = (error_codec.classify)(&error);
                let body = (error_codec.encode)(&error).unwrap_or_else(|_| "null".to_owned());
                let outcome = match kind {
                    FailureKind::Retryable => Outcome::Release,
                    FailureKind::Permanent => Outcome::Failed(&body),
                    FailureKind::Unknown => Outcome::Unknown(&body),
                };
                match self.finish_twice(outcome).await {
                    Ok(Transition::Applied) => match kind {
                        FailureKind::Unknown => tracing::warn!("idempotency unknown"),
                        FailureKind::Permanent => tracing::info!("idempotency failed"),
                        FailureKind::Retryable => tracing::debug!("idempotency released"),
                    },
                    Ok(Transition::Fenced) => {
                        tracing::warn!(?kind, "idempotency fenced: failure not recorded")
                    }
                    Err(e) => tracing::error!(error = %e, "idempotency store failed on completion"),
                }
                Err(error)
            }
        }
    }
}

impl<S: IdempotencyStore> Guard<S> {
    /// One completion, tried a second time on a store error (a connection killed mid-call:
    /// the pools skip their ping, so a dead connection is found by the statement). When the
    /// first attempt was applied before its answer was lost, the second reports `Fenced`: a
    /// read tells that case from a real takeover.
    async fn finish_twice(&self, outcome: Outcome<'_>) -> Result<Transition, StoreError> {
        let store = &self.handle.engine.inner.store;
        let attempt = self.handle.attempt();
        let first = match store.finish(&attempt, outcome, self.retention_ms).await {
            Ok(done) => return Ok(done),
            Err(e) => e,
        };
        tracing::debug!(error = %first, "idempotency completion failed; retrying once");
        match store.finish(&attempt, outcome, self.retention_ms).await? {
            Transition::Fenced if self.applied(outcome).await => Ok(Transition::Applied),
            done => Ok(done),
        }
    }

    /// Whether the record shows `outcome` written by this owner (a completion whose answer was
    /// lost).
    async fn applied(&self, outcome: Outcome<'_>) -> bool {
        match outcome {
            Outcome::Success(_) => self.stored_as(State::Success).await,
            Outcome::Failed(_) => self.stored_as(State::Failed).await,
            Outcome::Unknown(_) => self.stored_as(State::Unknown).await,
            Outcome::Release => match self.handle.engine.inner.store.get(&self.handle.key).await {
                Ok(None) => self.handle.fence == 1,
                Ok(Some(r)) => {
                    r.fence == self.handle.fence
                        && r.owner == self.handle.owner
                        && r.state == State::Processing
                        && r.lease_expires_at <= r.now
                }
                Err(_) => false,
            },
        }
    }

    /// Whether the record is in `state`, written by this owner under this fence.
    async fn stored_as(&self, state: State) -> bool {
        match self.handle.engine.inner.store.get(&self.handle.key).await {
            Ok(Some(r)) => {
                r.state == state && r.fence == self.handle.fence && r.owner == self.handle.owner
            }
            _ => false,
        }
    }
}

/// Anything `#[idempotent(store = ..)]` may name: an [`Idempotency`], a reference to one, or an
/// `Arc` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an idempotency engine",
    label = "`store = ..` must evaluate to a `staleguard::idempotency::Idempotency<S>`",
    note = "wrap the store: `Idempotency::new(store)`"
)]
pub trait AsIdempotency {
    type Store: IdempotencyStore;
    fn as_idempotency(&self) -> &Idempotency<Self::Store>;
}

impl<S: IdempotencyStore> AsIdempotency for Idempotency<S> {
    type Store = S;
    fn as_idempotency(&self) -> &Idempotency<S> {
        self
    }
}

impl<T: AsIdempotency + ?Sized> AsIdempotency for &T {
    type Store = T::Store;
    fn as_idempotency(&self) -> &Idempotency<T::Store> {
        (**self).as_idempotency()
    }
}

impl<T: AsIdempotency + ?Sized> AsIdempotency for Arc<T> {
    type Store = T::Store;
    fn as_idempotency(&self) -> &Idempotency<T::Store> {
        (**self).as_idempotency()
    }
}
