//! Records as stores hold them, and the requests and transitions the engine asks of a store.

use super::key::RecordKey;

/// The state of an idempotency record. `INIT` is the claim itself: a record exists only once it
/// has been claimed, so it is never observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Processing,
    Success,
    Failed,
    Unknown,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Processing => "PROCESSING",
            State::Success => "SUCCESS",
            State::Failed => "FAILED",
            State::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        Some(match text {
            "PROCESSING" => State::Processing,
            "SUCCESS" => State::Success,
            "FAILED" => State::Failed,
            "UNKNOWN" => State::Unknown,
            _ => return None,
        })
    }

    /// SUCCESS and FAILED: the only states retention may delete.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Success | State::Failed)
    }
}

/// One record, as returned by a claim or a read. Times are milliseconds since the Unix epoch on
/// the *store's* clock; `now` is that clock when the statement ran, so the engine compares times
/// without trusting its own clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub key: RecordKey,
    /// Stable for the record's life, kept across takeovers: the id a body can hand to a
    /// downstream system as *its* idempotency key.
    pub record_id: String,
    pub fingerprint: String,
    pub state: State,
    /// The owner token of the current (or last) claimant.
    pub owner: String,
    /// Fencing counter: 1 at the first claim, +1 at every takeover.
    pub fence: i64,
    pub lease_expires_at: i64,
    /// When a terminal record stops counting (retention).
    pub expires_at: i64,
    /// The stored response (SUCCESS) or error (FAILED, UNKNOWN), as JSON text.
    pub response: Option<String>,
    pub now: i64,
}

/// What a claim asks for. The store creates the record in PROCESSING with `owner`, fence 1 and a
/// lease of `lease_ms` from its own clock, or takes over an existing record when it may
/// ([`ClaimRequest::may_take`]: lease expired with the same fingerprint; FAILED with the same
/// fingerprint and `retry_failed`; terminal and past retention) by one atomic compare-and-set,
/// or else returns it unchanged **without writing** (a replay or an "in progress" answer is a
/// read). The claim succeeded exactly when the returned record's `owner` is this request's
/// `owner`.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    pub key: &'a RecordKey,
    pub record_id: &'a str,
    pub fingerprint: &'a str,
    pub owner: &'a str,
    pub lease_ms: i64,
    pub retention_ms: i64,
    pub retry_failed: bool,
}

impl ClaimRequest<'_> {
    /// Whether a claim may take `record` over (by the times of the store's clock the record
    /// carries): a terminal record past retention; or, with the same fingerprint, a PROCESSING
    /// record whose lease has expired, or a FAILED one when `retry_failed`. A record this
    /// request already owns is its own. Stores that read before they write use this to decide
    /// whether to go on to the compare-and-set upsert, which decides again atomically.
    pub fn may_take(&self, record: &Record) -> bool {
        if record.owner == self.owner {
            return false;
        }
        let reset = record.state.is_terminal() && record.expires_at <= record.now;
        let same = record.fingerprint == self.fingerprint;
        reset
            || same
                && (record.state == State::Processing && record.lease_expires_at <= record.now
                    || record.state == State::Failed && self.retry_failed)
    }
}

/// The claim an owner holds: every transition it asks for is conditional on all three.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    pub key: &'a RecordKey,
    pub fence: i64,
    pub owner: &'a str,
}

/// How an owner leaves PROCESSING.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// SUCCESS with the serialized response.
    Success(&'a str),
    /// FAILED with the serialized error.
    Failed(&'a str),
    /// UNKNOWN with the serialized error (kept for the resolver).
    Unknown(&'a str),
    /// A retryable error: delete the record so the next request runs; after a takeover
    /// (fence > 1) keep it with its lease ended, so the next request takes it over with the
    /// same record id (an earlier owner may have acted under it).
    Release,
}

/// How the reconciler leaves UNKNOWN.
#[derive(Debug, Clone, Copy)]
pub enum Resolved<'a> {
    Success(&'a str),
    Failed(&'a str),
    /// Still undecided: the record stays UNKNOWN, goes to the back of the
    /// [`IdempotencyStore::unknown`](super::IdempotencyStore::unknown) order (so that the
    /// records behind it are looked at next) and its reservation ends.
    Deferred,
}

/// The result of a compare-and-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Transition {
    Applied,
    /// The condition did not hold: the record moved on (taken over, resolved, reaped); nothing
    /// was written.
    Fenced,
}

impl Transition {
    pub(crate) fn from_rows(rows: u64) -> Transition {
        if rows == 1 {
            Transition::Applied
        } else {
            Transition::Fenced
        }
    }
}
