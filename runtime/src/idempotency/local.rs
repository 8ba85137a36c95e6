//! The one-transaction mode (`#[idempotent(tx = tx, ..)]`): the claim is made in a new
//! transaction of the store's database, which the body writes through; the outcome commits with
//! the body's writes, and an error or a dropped future rolls everything back.

use super::engine::{
    Call, ClaimHandle, Decision, ErrorCodec, Idempotency, Patience, ResponseCodec, ms,
};
use super::error::IdempotencyError;
use super::record::Transition;
use super::store::LocalStore;
use tracing::Instrument;

/// What [`Idempotency::begin_local`] decided.
pub enum BegunLocal<S: LocalStore> {
    /// This request owns the key: run the body in the transaction, then
    /// [`LocalGuard::finish_with`].
    Run(LocalGuard<S>, S::Tx),
    /// The outcome is stored: `Ok` holds the response JSON, `Err` the error JSON.
    Replay(Result<String, String>),
}

impl<S: LocalStore> Idempotency<S> {
    /// The one-transaction mode: claims the call's key inside a new transaction of the store's
    /// database and, when this request owns it, hands the transaction over for the body's own
    /// writes. A concurrent duplicate waits on the claimed row until this transaction ends,
    /// then replays its outcome (or, if it rolled back, claims the key itself).
    pub async fn begin_local(&self, call: Call) -> Result<BegunLocal<S>, IdempotencyError> {
        let prepared = self.prepare(call);
        // A failure leaves no record in this mode: nothing to retry or replay.
        let request = prepared.request(false);
        async {
            let mut patience = Patience::new(prepared.wait, self.inner.config.poll);
            loop {
                let (record, tx) = self.inner.store.claim_in_transaction(&request).await?;
                tracing::Span::current().record("fence", record.fence);
                match self.decide(&record, &request) {
                    Decision::Run => {
                        tracing::debug!("idempotency claimed in the transaction");
                        let guard = LocalGuard {
                            handle: self.handle(&prepared, record, true),
                            retention_ms: ms(prepared.retention),
                        };
                        return Ok(BegunLocal::Run(guard, tx));
                    }
                    Decision::Replay(stored) => {
                        tracing::debug!(ok = stored.is_ok(), "idempotency replay");
                        return Ok(BegunLocal::Replay(stored));
                    }
                    Decision::Mismatch => {
                        tracing::warn!("idempotency key reused with a different payload");
                        return Err(IdempotencyError::Mismatch);
                    }
                    Decision::Busy(retry_after) => {
                        drop(tx);
                        if !patience.wait().await {
                            tracing::info!(
                                state = record.state.as_str(),
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
}

/// The claim of the one-transaction mode, held while the body runs in the transaction.
/// Dropping it and the transaction (a crash, a cancelled future) rolls the claim back with
/// the body's writes.
pub struct LocalGuard<S: LocalStore> {
    handle: ClaimHandle<S>,
    retention_ms: i64,
}

impl<S: LocalStore> LocalGuard<S> {
    pub fn handle(&self) -> ClaimHandle<S> {
        self.handle.clone()
    }

    /// `Ok`: writes SUCCESS in `tx` and commits the claim, the body's writes and the outcome
    /// together. An error: rolls all of them back (the key is free again, and since nothing
    /// was committed a retry may run the body) and returns the error. A response that cannot
    /// be encoded or is over `Config::max_response_bytes` is rolled back too, as a `Codec`
    /// error; a failed commit is a `Store` error.
    pub async fn finish_with<T, E>(
        self,
        tx: S::Tx,
        result: Result<T, E>,
        response: &ResponseCodec<T>,
        error: &ErrorCodec<E>,
    ) -> Result<T, E> {
        let from = error.from;
        let value = match result {
            Ok(value) => value,
            Err(e) => {
                drop(tx);
                tracing::debug!("idempotency rolled back: the body failed");
                return Err(e);
            }
        };
        let limit = self.handle.engine.inner.config.max_response_bytes;
        let body = match (response.encode)(&value) {
            Ok(body) if body.len() <= limit => body,
            Ok(body) => {
                let reason = format!(
                    "the response is {} bytes, over the limit of {limit}; rolled back",
                    body.len()
                );
                return Err(from(IdempotencyError::Codec { reason }));
            }
            Err(e) => {
                let reason = format!("response could not be serialized: {e}; rolled back");
                return Err(from(IdempotencyError::Codec { reason }));
            }
        };
        let span = tracing::info_span!(
            "idempotency.complete",
            handler = %self.handle.key.handler,
            key = %self.handle.key.key,
            fence = self.handle.fence,
        );
        let store = &self.handle.engine.inner.store;
        match store
            .complete_in_transaction(tx, &self.handle.attempt(), &body, self.retention_ms)
            .instrument(span)
            .await
        {
            Ok(Transition::Applied) => Ok(value),
            Ok(Transition::Fenced) => Err(from(IdempotencyError::Fenced)),
            Err(e) => Err(from(IdempotencyError::Store(e))),
        }
    }
}
