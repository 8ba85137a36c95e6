//! The effect model: what one event of a body does once classified (a lock taken, a transaction
//! begun, state read or written, a remote call, a task spawned, ..), per event of a body, and the
//! view rules read (the body's own effects plus those its call sites gain from their callees'
//! summaries, see [`crate::summary::widen`]).

use crate::facts::{BodyId, PerBody};
use crate::name::Name;
use crate::sql::SqlKind;
use std::borrow::Cow;
use std::sync::Arc;

/// What a call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum EffectKind {
    Lock,
    TxBegin,
    TxCommit,
    TxRollback,
    /// `conn.transaction(|c| ..)`: the closure argument runs inside a transaction.
    TxClosure,
    Read,
    Write,
    Remote,
    /// `tokio::spawn` & co.: closure arguments run detached.
    Spawn,
    Sleep,
    /// A delayed task or job (`DelayQueue::insert`, `enqueue_in`).
    Schedule,
    /// An atomic claim of a key (`SET NX`, `INSERT .. ON CONFLICT DO NOTHING`, Lua script,
    /// `GETDEL`).
    Claim,
}

/// How an in-memory access reaches the state behind a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum GuardUse {
    /// Through a guard held in a local, or not through a guard at all.
    #[default]
    Held,
    /// Through a guard that lives for one expression (`m.lock().unwrap().insert(k, v)`): the
    /// lock is taken at the access itself.
    Temporary,
    /// A lock taken for a crate method called on the temporary guard
    /// (`seats.lock().unwrap().hold(seat)`), before classification decides from the method's
    /// receiver whether it reads or writes.
    TemporaryMethod,
}

/// A column (or model field, or hash field) a write sets, and its value when it is visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assigned {
    /// Lowercase, unqualified (`status`, `locked_until`).
    pub column: Name,
    pub value: AssignedValue,
}

/// Records a field assignment of a model (`model.status = Set(Status::Paid)`) among the fields
/// pending on it: the assignment's constant, or an unknown value; a later assignment of the
/// same field replaces an earlier one.
pub(crate) fn set_field(sets: &mut Vec<Assigned>, field: &str, value: Option<&Name>) {
    sets.retain(|s| s.column != field);
    sets.push(Assigned {
        column: Name::new(field),
        value: value.map_or(AssignedValue::Unknown, |v| AssignedValue::Const(v.clone())),
    });
}

/// The pseudo-column of a model a body was handed and saves (`fn update_payment(p:
/// payment::ActiveModel)`): its value is that parameter, and each call gives it the fields the
/// caller set on its argument (see [`crate::summary::pass_arguments`]). No column is so named.
pub(crate) const CALLER_FIELDS: &str = "#caller-fields";

/// What a write sets a column to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AssignedValue {
    /// A literal or a constant, as written: `paid`, `PROCESSING`, `JobStatus::Running`, `true`.
    Const(Name),
    /// The current time.
    Now,
    /// The column's own value changed by an operator (`balance = balance - $1`).
    Relative,
    /// Something the analysis does not see (a bound local, an expression).
    Unknown,
    /// The value of the body's parameter at this index of [`crate::ir::Body::params`]: a
    /// caller that passes a constant gives it (see [`crate::summary::pass_arguments`]).
    Param(u8),
}

impl Effect {
    /// An update that clears a token column (`SET reset_token = NULL`, `Set(None)`): the token
    /// stored in the row is consumed.
    pub fn clears_token(&self) -> bool {
        self.kind == EffectKind::Write
            && !self.insert
            && !self.delete
            && self.sets.iter().any(|a| {
                matches!(&a.value, AssignedValue::Const(v) if v == "null")
                    && crate::kb::names::is_token_name(&a.column)
            })
    }
}

impl AssignedValue {
    /// Body `body`'s parameter named `name`, as a value (`Unknown` when it is none).
    pub fn param_of(body: &crate::ir::Body, name: &str) -> AssignedValue {
        match body.params.iter().position(|(n, _)| n == name) {
            Some(k) if k <= u8::MAX as usize => AssignedValue::Param(k as u8),
            _ => AssignedValue::Unknown,
        }
    }

    /// The current time: SQL's `now()`, or a clock read written in Rust (kept as the constant
    /// [`crate::ir::NOW_VALUE`] by an ORM's `.eq(Utc::now())`).
    pub fn is_now(&self) -> bool {
        match self {
            AssignedValue::Now => true,
            AssignedValue::Const(v) => v == crate::ir::NOW_VALUE,
            _ => false,
        }
    }

    /// The constant, when the value is one.
    pub fn constant(&self) -> Option<&str> {
        match self {
            AssignedValue::Const(v) => Some(v.as_str()),
            _ => None,
        }
    }
}

/// One classified effect of an event.
#[derive(Debug, Clone)]
pub(crate) struct Effect {
    pub kind: EffectKind,
    /// Table, entity, redis key or in-memory place the effect touches.
    pub table: Option<Name>,
    /// `SELECT .. FOR UPDATE` and ORM equivalents.
    pub locking: bool,
    /// A read that counts rows or totals a column over them (`SELECT count(*) ..`, `SELECT
    /// SUM(amount) ..`, diesel's and sea-orm's `.count(..)`).
    pub counts: bool,
    /// Rarer marks, one bit each ([`Effect::ordered`], [`Effect::read_only`],
    /// [`Effect::writes_in_cte`], [`Effect::conflict_sets`], [`Effect::list_move`],
    /// [`Effect::picked_claim`], [`Effect::null_claim`], [`Effect::document`]).
    marks: u8,
    /// A write whose filter tests more than the key.
    pub conditional: bool,
    /// A write whose filter compares an operation identity (`AND reservation_id = $2`).
    pub ident_guard: bool,
    pub delete: bool,
    /// In-memory state behind a lock (not persisted).
    pub in_memory: bool,
    /// Creates a new row (`INSERT`) rather than changing one.
    pub insert: bool,
    /// An insert that settles an existing row itself: `ON CONFLICT ..`, `ON DUPLICATE KEY ..`,
    /// `INSERT OR REPLACE`, `REPLACE INTO`, `INSERT .. SELECT .. WHERE NOT EXISTS`, diesel's
    /// `.on_conflict(..)`.
    pub upsert: bool,
    /// A delete filtered without any key (`WHERE expires_at < now()`): a purge.
    pub purge: bool,
    /// The columns a write's filter compares (SQL and ORM filters). Shared, not copied, by
    /// the effects call sites gain from it (as are `sets`).
    pub where_cols: Arc<[Name]>,
    /// What a write sets (SQL `SET` / `INSERT` values, diesel `.set(..)`, sea-orm model fields).
    pub sets: Arc<[Assigned]>,
    /// The write picks its rows (a `WHERE`, a `find(id)`, a model's key); `false` for a
    /// statement over the whole table.
    pub filtered: bool,
    /// What it writes expires on its own (a Redis `SET .. EX`, `set_ex`, `pset_ex`).
    pub expires: bool,
    /// Concerns an idempotency key / one-time token.
    pub token: bool,
    /// In a key-value store (Redis): it takes effect at once, outside any SQL transaction.
    pub kv: bool,
    /// The SQL statement's verb, when the effect was read from SQL text.
    pub sql: Option<SqlKind>,
    /// A claim that takes a lock (`SET lock:x NX`, an insert into a lock table): held until
    /// released, like a guard.
    pub lock_claim: bool,
    /// Named by the project's `[knowledge]`, not recognised from evidence.
    pub configured: bool,
    /// A lock held outside this process that can end without its holder knowing — a
    /// distributed lock, a Redis lock, a session advisory lock: a lease.
    pub lease: bool,
    /// A lock attempt that answers at once when the lock is held (`try_lock`, a Redis
    /// `SET lock:.. NX`, `pg_try_advisory_lock`) instead of waiting for it.
    pub attempt: bool,
    /// A spawned closure that runs once after a delay (`run_later`), with no sleep of its own.
    pub delayed: bool,
    pub guard: GuardUse,
    /// The local a commit or rollback applies to: `None` when it is not known (`COMMIT` as
    /// SQL text), empty for a call with no receiver (see [`Effect::tx_local`]). Boxed, like
    /// `payload`: few effects have one, and every effect is copied to each caller.
    pub tx_on: Option<Box<Name>>,
    /// Human description: "sends an HTTP request", "runs `UPDATE orders`" (most are static
    /// text, so building and copying effects allocates no string for them). Shown, never
    /// tested: decisions read the typed fields.
    pub what: Cow<'static, str>,
    /// The callee whose summary gives this effect.
    pub via: Option<BodyId>,
    /// A remote call recognised only by its receiver's name (`self.payment_gateway.charge(..)`
    /// on a type the analysis does not know): the last resort, weaker than a known client type.
    pub by_name: bool,
    /// A value it sets was passed in by the call it was gained at (a constant argument for a
    /// callee's parameter): the callee could not judge it, its caller can.
    pub passed: bool,
    /// A schedule's payload (`None` for every other effect).
    pub payload: Option<Box<Payload>>,
}

/// What a scheduled task carries: field or captured names, and the payload's struct type.
#[derive(Debug, Clone, Default)]
pub(crate) struct Payload {
    pub names: Vec<Name>,
    pub ty: Option<Name>,
}

impl Effect {
    pub fn new(kind: EffectKind, what: impl Into<Cow<'static, str>>) -> Effect {
        Effect {
            kind,
            table: None,
            locking: false,
            counts: false,
            marks: 0,
            conditional: false,
            ident_guard: false,
            delete: false,
            in_memory: false,
            insert: false,
            upsert: false,
            purge: false,
            where_cols: Arc::default(),
            sets: Arc::default(),
            filtered: true,
            expires: false,
            token: false,
            kv: false,
            sql: None,
            lock_claim: false,
            configured: false,
            lease: false,
            attempt: false,
            delayed: false,
            guard: GuardUse::Held,
            tx_on: None,
            what: what.into(),
            via: None,
            by_name: false,
            passed: false,
            payload: None,
        }
    }

    /// The local a commit or rollback applies to: `None` when it is not known (`COMMIT` as
    /// SQL text), `Some("")` for a call with no receiver.
    pub fn tx_local(&self) -> Option<&str> {
        self.tx_on.as_deref().map(Name::as_str)
    }

    pub fn with_table<T: Into<Name>>(mut self, t: Option<T>) -> Effect {
        self.table = t.map(Into::into);
        self
    }

    /// A read that orders what it finds (`ORDER BY ..`, diesel's `.order(..)`, sea-orm's
    /// `.order_by_desc(..)`): it picks among several rows with the columns it filters on.
    pub fn ordered(&self) -> bool {
        self.marks & Self::ORDERED != 0
    }

    /// A remote call that changes nothing at the remote: an HTTP `GET` / `HEAD`, an AWS
    /// `get_*` / `list_*` / `describe_*`, a gRPC `get_*` / `list_*` method.
    pub fn read_only(&self) -> bool {
        self.marks & Self::READ_ONLY != 0
    }

    /// A read whose statement also writes, in a `WITH` query before its `SELECT` (`WITH picked
    /// AS (UPDATE jobs SET status = 'running' WHERE id IN (SELECT .. FOR UPDATE SKIP LOCKED)
    /// RETURNING *) SELECT ..`): the rows it returns are already claimed.
    pub fn writes_in_cte(&self) -> bool {
        self.marks & Self::CTE_WRITE != 0
    }

    pub fn set_writes_in_cte(&mut self, on: bool) {
        self.mark(Self::CTE_WRITE, on);
    }

    /// An upsert whose `sets` are what its conflict branch writes (diesel's `.on_conflict(..)
    /// .do_update().set(..)`): on an existing row it overwrites those columns.
    pub fn conflict_sets(&self) -> bool {
        self.marks & Self::CONFLICT_SETS != 0
    }

    pub fn set_conflict_sets(&mut self, on: bool) {
        self.mark(Self::CONFLICT_SETS, on);
    }

    /// A Redis move of an entry from one list to another (`BRPOPLPUSH`, `LMOVE`): `table` is
    /// the list it puts the entry in, `where_cols` holds the one it takes it from.
    pub fn list_move(&self) -> bool {
        self.marks & Self::LIST_MOVE != 0
    }

    pub fn set_list_move(&mut self, on: bool) {
        self.mark(Self::LIST_MOVE, on);
    }

    /// An `UPDATE` of the row an unlocked subquery picked, setting a column the subquery
    /// filtered on and the outer filter does not test (see [`crate::sql::SqlInfo::picked_claim`]):
    /// the first of `sets` is that column.
    pub fn picked_claim(&self) -> bool {
        self.marks & Self::PICKED_CLAIM != 0
    }

    pub fn set_picked_claim(&mut self, on: bool) {
        self.mark(Self::PICKED_CLAIM, on);
    }

    /// A write that stamps a column with the current time where its filter requires it to be
    /// `NULL` and takes no old stamp back (see [`crate::sql::SqlInfo::null_claim`], diesel's
    /// `.filter(started_at.is_null()).set(started_at.eq(now))`): the first of `sets` is that
    /// column.
    pub fn null_claim(&self) -> bool {
        self.marks & Self::NULL_CLAIM != 0
    }

    pub fn set_null_claim(&mut self, on: bool) {
        self.mark(Self::NULL_CLAIM, on);
    }

    /// An access of a document store's collection (MongoDB): its transactions refuse a write
    /// to a document another transaction changed since their snapshot (a write conflict, to
    /// be retried), so a document read and written back in one transaction is not lost.
    pub fn document(&self) -> bool {
        self.marks & Self::DOCUMENT != 0
    }

    pub fn set_document(&mut self, on: bool) {
        self.mark(Self::DOCUMENT, on);
    }

    pub fn set_ordered(&mut self, on: bool) {
        self.mark(Self::ORDERED, on);
    }

    pub fn set_read_only(&mut self, on: bool) {
        self.mark(Self::READ_ONLY, on);
    }

    const ORDERED: u8 = 1;
    const READ_ONLY: u8 = 2;
    const CTE_WRITE: u8 = 4;
    const CONFLICT_SETS: u8 = 8;
    const LIST_MOVE: u8 = 16;
    const PICKED_CLAIM: u8 = 32;
    const NULL_CLAIM: u8 = 64;
    const DOCUMENT: u8 = 128;

    fn mark(&mut self, bit: u8, on: bool) {
        if on {
            self.marks |= bit;
        } else {
            self.marks &= !bit;
        }
    }

    /// An access through a temporary guard: the lock is taken at the access itself.
    pub fn temporary(&self) -> bool {
        self.guard == GuardUse::Temporary
    }
}

/// Every body's [`BodyEffects`], boxed, and absent for the many bodies that have none (no
/// effect, no crate callee): such a body reads as the empty one.
#[derive(Debug)]
pub(crate) struct AllBodyEffects(PerBody<Option<Box<BodyEffects>>>);

static NO_EFFECTS: std::sync::LazyLock<BodyEffects> =
    std::sync::LazyLock::new(|| BodyEffects::new(Sparse::new(0), Sparse::new(0), None));

impl AllBodyEffects {
    /// `all` in body order, laid out like `layout`.
    pub fn new<U>(layout: &PerBody<U>, all: Vec<BodyEffects>) -> Self {
        let mut items: Vec<Option<Box<BodyEffects>>> = Vec::with_capacity(all.len());
        // Not collected in place: that would keep `all`'s sixteen-fold larger buffer.
        // They are kept until the rules are done: without the spare capacity the pushes left.
        items.extend(all.into_iter().map(|mut e| {
            e.direct.shrink();
            e.callees.shrink();
            (!e.is_empty()).then(|| Box::new(e))
        }));
        AllBodyEffects(PerBody::new_like(layout, items))
    }

    /// The same layout with `f` of each body's effects.
    pub fn map<U>(&self, mut f: impl FnMut(&BodyEffects) -> U) -> PerBody<U> {
        self.0.map(|e| f(e.as_deref().unwrap_or(&NO_EFFECTS)))
    }
}

impl std::ops::Index<&BodyId> for AllBodyEffects {
    type Output = BodyEffects;

    fn index(&self, id: &BodyId) -> &BodyEffects {
        self.0[id].as_deref().unwrap_or(&NO_EFFECTS)
    }
}

/// A per-event table where most events have nothing: 4 bytes per event plus the entries, and
/// nothing at all until the first entry (most bodies never get one).
#[derive(Debug, Clone)]
pub(crate) struct Sparse<T> {
    len: u32,
    /// Per event, 1 + its slot, or 0; empty while no event has a slot.
    idx: Box<[u32]>,
    slots: Vec<Vec<T>>,
}

impl<T> Sparse<T> {
    pub fn new(n: usize) -> Self {
        Sparse {
            len: u32::try_from(n).expect("a body of under 4 G events"),
            idx: Box::default(),
            slots: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    fn slot(&mut self, i: usize) -> &mut Vec<T> {
        assert!(i < self.len(), "event {i} of {}", self.len);
        if self.idx.is_empty() {
            self.idx = vec![0; self.len()].into_boxed_slice();
        }
        if self.idx[i] == 0 {
            // Most events get one entry: no room for four (a vector's first growth) is kept.
            self.slots.push(Vec::with_capacity(1));
            self.idx[i] = self.slots.len() as u32;
        }
        let k = self.idx[i] as usize - 1;
        &mut self.slots[k]
    }

    pub fn set(&mut self, i: usize, mut v: Vec<T>) {
        if !v.is_empty() || self.idx.get(i).is_some_and(|&k| k != 0) {
            v.shrink_to_fit();
            *self.slot(i) = v;
        }
    }

    pub fn push(&mut self, i: usize, v: T) {
        self.slot(i).push(v);
    }

    /// Drops the spare capacity the pushes left.
    fn shrink(&mut self) {
        self.slots.shrink_to_fit();
        for s in &mut self.slots {
            s.shrink_to_fit();
        }
    }

    /// Entries per event, in event order.
    pub fn iter(&self) -> impl Iterator<Item = &[T]> {
        (0..self.len()).map(|i| &self[i])
    }

    /// Every entry, in event order.
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.iter().flatten()
    }

    /// Every entry, in no particular order, without a walk over the events that have none.
    pub fn entries(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for Sparse<T> {
    type Output = [T];

    fn index(&self, i: usize) -> &[T] {
        match self.idx.get(i) {
            Some(&k) if k != 0 => &self.slots[k as usize - 1],
            _ => &[],
        }
    }
}

/// What one body's own events do, from classification: per event its effects, and the crate
/// bodies a call may run.
#[derive(Debug, Clone)]
pub(crate) struct BodyEffects {
    pub direct: Sparse<Effect>,
    pub callees: Sparse<BodyId>,
    /// A parameter holding an open transaction (`tx: &mut Transaction<'_, Postgres>`); boxed,
    /// as few bodies have one.
    pub tx_param: Option<Box<Name>>,
    /// A method of a type that holds a transaction in a field (a repository over the caller's
    /// transaction): its statements run in the caller's transaction.
    pub tx_holder: bool,
    /// A parameter that hands in a connection or an executor, not a pool (`&mut PgConnection`,
    /// `impl PgExecutor<'_>`, `&impl ConnectionTrait`): the caller may have it in a transaction.
    pub conn_param: bool,
    /// Per event, whether it runs detached from the body's flow (inside a spawned or delayed
    /// closure); empty when no event does (most bodies).
    detached: Box<[bool]>,
}

impl BodyEffects {
    /// Nothing to say about the body: no effect, no callee, no transaction handed in.
    fn is_empty(&self) -> bool {
        self.direct.idx.is_empty()
            && self.callees.idx.is_empty()
            && self.tx_param.is_none()
            && !self.tx_holder
            && !self.conn_param
            && self.detached.is_empty()
    }

    pub fn new(direct: Sparse<Effect>, callees: Sparse<BodyId>, tx_param: Option<Name>) -> Self {
        BodyEffects {
            direct,
            callees,
            tx_param: tx_param.map(Box::new),
            tx_holder: false,
            conn_param: false,
            detached: Box::default(),
        }
    }

    /// Records which events run detached (see [`crate::query::detached`]).
    pub fn set_detached(&mut self, detached: Vec<bool>) {
        self.detached = if detached.contains(&true) {
            detached.into_boxed_slice()
        } else {
            Box::default()
        };
    }

    pub fn detached(&self, i: usize) -> bool {
        self.detached.get(i).copied().unwrap_or(false)
    }
}

/// The effects a body's call sites gain from their callees' summaries (what a call to a crate
/// fn does, as seen at the call), in event order. Most bodies gain nothing.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallSiteEffects {
    gained: Box<[(u32, Effect)]>,
}

impl CallSiteEffects {
    /// `gained` in event order.
    pub fn new(gained: Vec<(u32, Effect)>) -> Self {
        debug_assert!(gained.windows(2).all(|w| w[0].0 <= w[1].0));
        CallSiteEffects {
            gained: gained.into_boxed_slice(),
        }
    }

    fn at(&self, i: u32) -> &[(u32, Effect)] {
        if self.gained.is_empty() {
            return &[];
        }
        let lo = self.gained.partition_point(|(e, _)| *e < i);
        let hi = lo + self.gained[lo..].partition_point(|(e, _)| *e == i);
        &self.gained[lo..hi]
    }
}

/// What rules see of a body: its own effects, then what its call sites gain, per event.
#[derive(Clone, Copy)]
pub(crate) struct Effects<'a> {
    pub body: &'a BodyEffects,
    pub sites: &'a CallSiteEffects,
}

impl<'a> Effects<'a> {
    /// The effects of event `i`: its own first, then those gained from callees.
    pub fn at(self, i: u32) -> impl Iterator<Item = &'a Effect> + Clone {
        self.body.direct[i as usize]
            .iter()
            .chain(self.sites.at(i).iter().map(|(_, e)| e))
    }

    /// The first effect of `kind` at event `i`.
    pub fn find(self, i: u32, kind: EffectKind) -> Option<&'a Effect> {
        self.at(i).find(|e| e.kind == kind)
    }

    /// Every effect of the body, in event order (own before gained at each event).
    pub fn all(self) -> impl Iterator<Item = &'a Effect> {
        (0..self.body.direct.len() as u32).flat_map(move |i| self.at(i))
    }

    /// Every effect of the body, in no particular order: for "is there one that ..?" (a
    /// rule's `applies`), without a walk over every event.
    pub fn any_order(self) -> impl Iterator<Item = &'a Effect> {
        self.body
            .direct
            .entries()
            .chain(self.sites.gained.iter().map(|(_, e)| e))
    }

    pub fn callees(self, i: u32) -> &'a [BodyId] {
        &self.body.callees[i as usize]
    }

    pub fn detached(self, i: u32) -> bool {
        self.body.detached(i as usize)
    }
}

/// Which effect kinds a body has (own and gained), for the rules' "may this rule fire here?"
/// tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KindSet(u32);

impl KindSet {
    pub fn of(effects: Effects<'_>) -> KindSet {
        let mut set = 0u32;
        for e in effects.any_order() {
            set |= 1 << e.kind as u32;
        }
        KindSet(set)
    }

    pub fn has(self, kind: EffectKind) -> bool {
        self.0 & (1 << kind as u32) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_effect_stays_small() {
        // Every effect is copied into each call site that gains it and each summary that
        // exports it (about 6 MB of them at the peak on qdrant): rare fields live in boxes.
        assert!(
            std::mem::size_of::<Effect>() <= 144,
            "{}",
            std::mem::size_of::<Effect>()
        );
    }

    #[test]
    fn sparse_reads_as_one_list_per_event() {
        let mut t: Sparse<u8> = Sparse::new(4);
        t.set(1, Vec::new());
        assert_eq!(t.len(), 4);
        assert!(t.iter().all(<[u8]>::is_empty), "nothing set yet");
        assert_eq!(&t[9], &[] as &[u8], "out of range reads as empty");
        t.set(2, vec![7]);
        t.push(2, 8);
        t.push(0, 1);
        let rows: Vec<&[u8]> = t.iter().collect();
        assert_eq!(rows, [&[1][..], &[], &[7, 8], &[]]);
        t.set(2, Vec::new());
        assert!(t[2].is_empty(), "a set slot can be emptied");
    }

    #[test]
    fn rules_see_own_effects_then_gained_ones_at_each_event() {
        let mut direct = Sparse::new(4);
        direct.push(1, Effect::new(EffectKind::Read, "own read"));
        let body = BodyEffects::new(direct, Sparse::new(4), None);
        let sites = CallSiteEffects::new(vec![
            (1, Effect::new(EffectKind::Write, "gained write")),
            (1, Effect::new(EffectKind::Remote, "gained call")),
            (3, Effect::new(EffectKind::Sleep, "gained sleep")),
        ]);
        let view = Effects {
            body: &body,
            sites: &sites,
        };
        let at = |i| view.at(i).map(|e| e.what.as_ref()).collect::<Vec<_>>();
        assert_eq!(at(1), ["own read", "gained write", "gained call"]);
        assert!(at(0).is_empty() && at(2).is_empty());
        assert_eq!(at(3), ["gained sleep"]);
        assert_eq!(view.all().count(), 4);
        let kinds = KindSet::of(view);
        assert!(kinds.has(EffectKind::Remote) && !kinds.has(EffectKind::Lock));
    }
}
