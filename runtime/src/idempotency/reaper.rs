//! The reaper: deletes SUCCESS and FAILED records past retention, on demand or on an interval.
//! It never deletes PROCESSING (someone owns it) or UNKNOWN (not yet reconciled) records.

use super::engine::Idempotency;
use super::store::IdempotencyStore;
use std::time::Duration;

/// Periodic retention for one engine.
pub struct Reaper<S> {
    engine: Idempotency<S>,
}

impl<S: IdempotencyStore> Reaper<S> {
    pub fn new(engine: Idempotency<S>) -> Self {
        Reaper { engine }
    }

    /// Runs [`Idempotency::reap`] every `interval` until the handle is aborted.
    pub fn spawn(self, interval: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(e) = self.engine.reap().await {
                    tracing::error!(error = %e, "idempotency reaper pass failed");
                }
            }
        })
    }
}
