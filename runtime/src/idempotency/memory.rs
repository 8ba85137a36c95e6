//! The in-memory store: the same state machine as the SQL stores behind a mutex, for tests and
//! single-process tools. Its clock is the process clock plus an offset tests can advance.

use super::key::RecordKey;
use super::record::{Attempt, ClaimRequest, Outcome, Record, Resolved, State, Transition};
use super::store::{IdempotencyStore, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Records in a `HashMap`; clones share the same map.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    records: Mutex<HashMap<RecordKey, Entry>>,
    offset_ms: AtomicI64,
}

/// A record and when it was last touched (the SQL stores' `updated_at`): the reconciler's order.
struct Entry {
    record: Record,
    touched: i64,
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Moves this store's clock forward (leases and retention expire without sleeping).
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.inner.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// How many records are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn now(&self) -> i64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        wall + self.inner.offset_ms.load(Ordering::SeqCst)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RecordKey, Entry>> {
        self.inner
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn holds(record: &Record, attempt: &Attempt<'_>) -> bool {
    record.state == State::Processing
        && record.fence == attempt.fence
        && record.owner == attempt.owner
}

impl IdempotencyStore for MemoryStore {
    async fn claim(&self, request: &ClaimRequest<'_>) -> Result<Record, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        let fresh = |fence: i64, record_id: &str, response: Option<String>| Record {
            key: request.key.clone(),
            record_id: record_id.to_owned(),
            fingerprint: request.fingerprint.to_owned(),
            state: State::Processing,
            owner: request.owner.to_owned(),
            fence,
            lease_expires_at: now + request.lease_ms,
            expires_at: now + request.retention_ms,
            response,
            now,
        };
        let record = match records.get(request.key) {
            None => fresh(1, request.record_id, None),
            Some(Entry { record, .. }) => {
                let existing = Record {
                    now,
                    ..record.clone()
                };
                if !request.may_take(&existing) {
                    // A replay, "in progress", a mismatch: a read, nothing written.
                    return Ok(existing);
                }
                let reset = existing.state.is_terminal() && existing.expires_at <= now;
                let id = if reset {
                    request.record_id
                } else {
                    &existing.record_id
                };
                fresh(existing.fence + 1, id, None)
            }
        };
        records.insert(
            request.key.clone(),
            Entry {
                record: record.clone(),
                touched: now,
            },
        );
        Ok(record)
    }

    async fn finish(
        &self,
        attempt: &Attempt<'_>,
        outcome: Outcome<'_>,
        retention_ms: i64,
    ) -> Result<Transition, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        let Some(Entry { record, touched }) = records
            .get_mut(attempt.key)
            .filter(|e| holds(&e.record, attempt))
        else {
            return Ok(Transition::Fenced);
        };
        *touched = now;
        let (state, response) = match outcome {
            Outcome::Success(body) => (State::Success, body),
            Outcome::Failed(body) => (State::Failed, body),
            Outcome::Unknown(body) => (State::Unknown, body),
            // A first claim's release frees the key; after a takeover the record is kept, its
            // lease ended, so that the next claim takes it over with the same record id (an
            // earlier owner may have acted under it) and a higher fence.
            Outcome::Release if attempt.fence > 1 => {
                record.lease_expires_at = now;
                return Ok(Transition::Applied);
            }
            Outcome::Release => {
                records.remove(attempt.key);
                return Ok(Transition::Applied);
            }
        };
        record.state = state;
        record.response = Some(response.to_owned());
        record.expires_at = now + retention_ms;
        record.lease_expires_at = now;
        Ok(Transition::Applied)
    }

    async fn heartbeat(
        &self,
        attempt: &Attempt<'_>,
        lease_ms: i64,
    ) -> Result<Transition, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        match records
            .get_mut(attempt.key)
            .filter(|e| holds(&e.record, attempt))
        {
            Some(Entry { record, touched }) => {
                *touched = now;
                record.lease_expires_at = now + lease_ms;
                Ok(Transition::Applied)
            }
            None => Ok(Transition::Fenced),
        }
    }

    async fn get(&self, key: &RecordKey) -> Result<Option<Record>, StoreError> {
        let now = self.now();
        Ok(self.lock().get(key).map(|e| Record {
            now,
            ..e.record.clone()
        }))
    }

    async fn unknown(&self, limit: u32, reserve_ms: i64) -> Result<Vec<Record>, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        let mut free: Vec<&mut Entry> = records
            .values_mut()
            .filter(|e| e.record.state == State::Unknown && e.record.lease_expires_at <= now)
            .collect();
        free.sort_by_key(|e| e.touched);
        Ok(free
            .into_iter()
            .take(limit as usize)
            .map(|e| {
                e.record.lease_expires_at = now + reserve_ms;
                Record {
                    now,
                    ..e.record.clone()
                }
            })
            .collect())
    }

    async fn resolve(
        &self,
        key: &RecordKey,
        fence: i64,
        resolved: Resolved<'_>,
        retention_ms: i64,
    ) -> Result<Transition, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        // Strictly after every other UNKNOWN record, also within one millisecond.
        let last = records
            .values()
            .filter(|e| e.record.state == State::Unknown)
            .map(|e| e.touched)
            .max()
            .unwrap_or(0);
        let Some(Entry { record, touched }) = records
            .get_mut(key)
            .filter(|e| e.record.state == State::Unknown && e.record.fence == fence)
        else {
            return Ok(Transition::Fenced);
        };
        let (state, body) = match resolved {
            Resolved::Success(body) => (State::Success, body),
            Resolved::Failed(body) => (State::Failed, body),
            Resolved::Deferred => {
                *touched = now.max(last + 1);
                record.lease_expires_at = now;
                return Ok(Transition::Applied);
            }
        };
        *touched = now;
        record.state = state;
        record.response = Some(body.to_owned());
        record.expires_at = now + retention_ms;
        Ok(Transition::Applied)
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        let now = self.now();
        let mut records = self.lock();
        let before = records.len();
        records.retain(|_, e| !(e.record.state.is_terminal() && e.record.expires_at <= now));
        Ok((before - records.len()) as u64)
    }
}
