//! The reconciler: UNKNOWN is never terminal. A user-supplied resolver asks the remote side what
//! happened and each UNKNOWN record converges to SUCCESS or FAILED by compare-and-set.

use super::engine::Idempotency;
use super::error::IdempotencyError;
use super::key::RecordKey;
use super::record::{Resolved, State, Transition};
use super::store::IdempotencyStore;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::time::Duration;

/// An UNKNOWN record as the resolver sees it.
#[derive(Debug, Clone)]
pub struct UnknownRecord {
    pub key: RecordKey,
    /// The id the body could pass downstream (see `ClaimHandle::record_id`): ask the remote side
    /// about it.
    pub record_id: String,
    pub fence: i64,
    /// The error the body returned, as JSON.
    pub error: Option<String>,
}

impl UnknownRecord {
    /// The body's error, decoded.
    pub fn error_as<E: DeserializeOwned>(&self) -> Option<E> {
        self.error
            .as_deref()
            .and_then(|e| serde_json::from_str(e).ok())
    }
}

/// What the resolver found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The effect happened: store this response (JSON of the handler's `Ok` type).
    Succeeded(String),
    /// The effect did not happen: store this error (JSON of the handler's error type).
    Failed(String),
    /// Still not known: leave it UNKNOWN and ask again next round.
    StillUnknown,
}

impl Resolution {
    pub fn success<T: Serialize>(response: &T) -> Result<Self, IdempotencyError> {
        serde_json::to_string(response)
            .map(Resolution::Succeeded)
            .map_err(|e| IdempotencyError::Codec {
                reason: e.to_string(),
            })
    }

    pub fn failure<E: Serialize>(error: &E) -> Result<Self, IdempotencyError> {
        serde_json::to_string(error)
            .map(Resolution::Failed)
            .map_err(|e| IdempotencyError::Codec {
                reason: e.to_string(),
            })
    }
}

/// What one reconciliation pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub resolved: usize,
    pub still_unknown: usize,
    /// Records another reconciler resolved first (the compare-and-set did not apply).
    pub raced: usize,
}

/// Runs a resolver over UNKNOWN records, once ([`run_once`](Self::run_once)) or on an interval
/// ([`spawn`](Self::spawn)).
pub struct Reconciler<S, F> {
    engine: Idempotency<S>,
    resolver: F,
    batch: u32,
    reserve: Duration,
}

impl<S, F, Fut> Reconciler<S, F>
where
    S: IdempotencyStore,
    F: Fn(UnknownRecord) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Resolution> + Send,
{
    pub fn new(engine: Idempotency<S>, resolver: F) -> Self {
        Reconciler {
            engine,
            resolver,
            batch: 100,
            reserve: Duration::from_secs(60),
        }
    }

    /// How long a pass holds the records it took (default 60 s): reconcilers on other
    /// instances skip them meanwhile, so the resolver is asked about each record once. A pass
    /// that dies (a crash) leaves its records to the next pass after this time; a resolver
    /// slower than this may see a record asked about again.
    pub fn reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// How many UNKNOWN records one pass looks at (default 100).
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// One pass: reserve up to `batch` UNKNOWN records no other pass holds (longest untouched
    /// first), ask the resolver about each, and resolve them by compare-and-set.
    pub async fn run_once(&self) -> Result<ReconcileReport, IdempotencyError> {
        let store = self.engine.store();
        let retention_ms =
            i64::try_from(self.engine.config().retention.as_millis()).unwrap_or(i64::MAX / 4);
        let reserve_ms = i64::try_from(self.reserve.as_millis()).unwrap_or(i64::MAX / 4);
        let mut report = ReconcileReport::default();
        for record in store.unknown(self.batch, reserve_ms).await? {
            debug_assert_eq!(record.state, State::Unknown);
            let unknown = UnknownRecord {
                key: record.key.clone(),
                record_id: record.record_id.clone(),
                fence: record.fence,
                error: record.response.clone(),
            };
            let resolved = match (self.resolver)(unknown).await {
                Resolution::StillUnknown => {
                    // To the back of the queue, reservation ended: with `batch` undecidable
                    // records at its front, the records behind them would never be asked
                    // about. (One resolved meanwhile is simply not moved.)
                    report.still_unknown += 1;
                    let _moved = store
                        .resolve(&record.key, record.fence, Resolved::Deferred, retention_ms)
                        .await?;
                    continue;
                }
                Resolution::Succeeded(body) => (true, body),
                Resolution::Failed(body) => (false, body),
            };
            let how = if resolved.0 {
                Resolved::Success(&resolved.1)
            } else {
                Resolved::Failed(&resolved.1)
            };
            match store
                .resolve(&record.key, record.fence, how, retention_ms)
                .await?
            {
                Transition::Applied => {
                    tracing::info!(key = %record.key, success = resolved.0, "idempotency reconciled");
                    report.resolved += 1;
                }
                Transition::Fenced => report.raced += 1,
            }
        }
        Ok(report)
    }

    /// Runs a pass every `interval` on the current Tokio runtime until the handle is aborted.
    /// A failed pass is logged and retried next tick.
    pub fn spawn(self, interval: Duration) -> tokio::task::JoinHandle<()>
    where
        Fut: 'static,
    {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(e) = self.run_once().await {
                    tracing::error!(error = %e, "idempotency reconciliation pass failed");
                }
            }
        })
    }
}
