//! The rules, one file (or folder) each. A rule is one [`declare_rule!`]: its metadata and doc,
//! `applies` (may the rule fire on this body? answered from the body's effects, so the checker
//! skips bodies no rule could fire on) and `check` (the pass over one body that pushes its
//! findings). [`ALL`] lists them; it is generated (see below), so adding a rule is its file,
//! its `fixtures/<rule>/` folder and its generated doc page.

use std::cell::OnceCell;
use std::sync::OnceLock;

use crate::diagnostic::{Diagnostic, Label, Position, Span};
use crate::effects::{
    AllBodyEffects, AssignedValue, CallSiteEffects, Effect, EffectKind, Effects, KindSet,
};
use crate::facts::{BodyId, Facts, PerBody};
use crate::fxhash::FxHashMap;
use crate::ir::{Body, EventKind, Region, Sp};
use crate::kb::names::{
    is_done_value, is_failure_value, is_hold_time_column, is_in_progress_value, is_response_column,
    is_state_column, is_state_value, is_work,
};
use crate::name::Name;
use crate::parse::Lines;
use crate::query::{self, State};
use crate::registry::RuleMeta;
use crate::sql::is_plain_key;
use crate::summary::Summary;

/// A rule: what it is called and documents, when it may fire, and its check.
pub(crate) struct Rule {
    pub meta: RuleMeta,
    /// May the rule fire on this body? A cheap test of the body's effects (`cx.kinds()`,
    /// `cx.effects()`); a body it answers `false` for is not checked. It must answer `true`
    /// wherever `check` could report.
    pub applies: fn(&RuleCx<'_>) -> bool,
    pub check: fn(&RuleCx<'_>, &mut Vec<Diagnostic>),
}

/// Declares a rule from its doc comment (the fixed headings: What it does, Why is this bad?,
/// Example, Use instead, Known problems), its id, default level and one-line summary, and its
/// `applies` and `check` functions.
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        $vis:vis static $id:ident = {
            name: $name:literal,
            level: $level:ident,
            summary: $summary:literal,
            applies: $applies:path,
            check: $check:path $(,)?
        };
    ) => {
        $vis static $id: $crate::rules::Rule = $crate::rules::Rule {
            meta: $crate::registry::RuleMeta {
                name: $name,
                default_level: $crate::diagnostic::Level::$level,
                summary: $summary,
                doc: concat!($($doc, "\n"),*),
            },
            applies: $applies,
            check: $check,
        };
    };
}

// (Rule files see the macro by textual scope: they are declared below it.)

// @generated rule list: `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test conventions`
// adds a line for each rule file (or folder) in this directory and removes the lines of those
// gone; the order, the catalogue's, is kept. Do not edit between the markers by hand.
// @generated begin
mod blind_callback_write;
mod check_before_lock;
mod conflict_dropped;
mod duplicate_as_failure;
mod lease_without_fencing;
mod processing_without_lease;
mod rpc_in_transaction;
mod timeout_as_failure;
mod timeout_without_operation_id;
mod token_deleted_before_effect;
mod unguarded_state_transition;
mod whole_version_compare;

/// Every rule, in catalogue order.
pub(crate) static ALL: &[&Rule] = &[
    &check_before_lock::RULE,
    &rpc_in_transaction::RULE,
    &token_deleted_before_effect::RULE,
    &timeout_without_operation_id::RULE,
    &blind_callback_write::RULE,
    &unguarded_state_transition::RULE,
    &timeout_as_failure::RULE,
    &lease_without_fencing::RULE,
    &processing_without_lease::RULE,
    &duplicate_as_failure::RULE,
    &conflict_dropped::RULE,
    &whole_version_compare::RULE,
];
// @generated end

/// The columns of one table the crate writes: given by inserts, set by updates, and whether an
/// update sets columns it does not name.
#[derive(Default)]
pub(crate) struct TableColumns {
    inserted: Vec<Name>,
    updated: Vec<Name>,
    opaque: bool,
}

/// The "column" a reaper of a Redis list's entries reads (see [`CrateView::reaps`]).
pub(crate) const LIST_ENTRIES: &str = "#list-entries";

/// What the whole crate knows, shared by every body's check.
pub(crate) struct CrateView<'a> {
    pub paths: Vec<&'a str>,
    pub lines: Vec<&'a Lines>,
    pub bodies: Vec<&'a [Body]>,
    /// Per file: what fixes edit by, for the bodies that have any (see
    /// [`crate::ir::FixAnchors`]).
    pub fix_anchors: Vec<&'a [crate::ir::FixAnchors]>,
    pub facts: &'a Facts<'a>,
    pub effects: &'a AllBodyEffects,
    pub sites: &'a PerBody<CallSiteEffects>,
    pub summaries: &'a PerBody<Summary>,
    /// `(table, column)` of every reaper statement in the crate (see [`CrateView::reaps`]),
    /// found on first use.
    pub reapers: OnceLock<Vec<(Name, Name)>>,
    /// What [`CrateView::requeues`] finds, made once.
    pub requeuers: OnceLock<Vec<(Name, Name)>>,
    /// Each body's call sites in the crate (see [`CrateView::call_sites`]), found on first use.
    pub callers: OnceLock<Callers>,
    /// The tables some write of the crate stores a response in (see
    /// [`CrateView::stores_response`]), found on first use.
    pub responses: OnceLock<Vec<Name>>,
    /// What the crate's updates set each `(table, column)` to (see
    /// [`CrateView::only_value`]), found on first use.
    pub updates: OnceLock<FxHashMap<(Name, Name), Option<Name>>>,
    /// Per table, the columns the crate's inserts give and those its updates set (see
    /// [`CrateView::fixed_column`]), found on first use.
    pub columns: OnceLock<Vec<(Name, TableColumns)>>,
    /// The work tables whose rows the crate hands out one holder at a time (see
    /// [`CrateView::holds_exclusively`]), and whether one of them takes held rows back, found
    /// on first use.
    pub handouts: OnceLock<Vec<(Name, bool)>>,
    /// The bodies registered at message routes or as consumers (see
    /// [`crate::handlers::registrations`]), found on first use.
    pub registrations: OnceLock<FxHashMap<BodyId, Name>>,
}

impl<'a> CrateView<'a> {
    /// Every body's own effects, the crate over.
    pub(crate) fn direct_effects(&self) -> impl Iterator<Item = &'a Effect> + '_ {
        self.facts
            .all_bodies()
            .flat_map(|(id, _)| self.effects[&id].direct.all())
    }

    pub fn body(&self, id: BodyId) -> &'a Body {
        &self.bodies[id.file as usize][id.body as usize]
    }

    /// Where event `ev` of body `id` is, as notes name it: `src/jobs.rs:42`.
    pub fn site(&self, id: BodyId, ev: u32) -> String {
        let line = self.body(id).events[ev as usize].sp.line;
        format!("{}:{line}", self.paths[id.file as usize])
    }

    /// A body's effects as rules see them (own, then gained at call sites).
    pub fn effects_of(&self, id: BodyId) -> Effects<'a> {
        Effects {
            body: &self.effects[&id],
            sites: &self.sites[&id],
        }
    }

    /// The bodies registered at message routes (with the path) or as consumers (an empty path).
    pub fn registered(&self) -> &FxHashMap<BodyId, Name> {
        self.registrations
            .get_or_init(|| crate::handlers::registrations(self))
    }

    pub fn summary(&self, id: BodyId) -> Option<&'a Summary> {
        self.summaries.get(&id)
    }

    /// Whether the crate has a reaper for claims of `column` in `table`: a statement that
    /// updates or deletes rows of that table filtered on a time that says since when a row is
    /// held (`heartbeat_at < now() - ..`, `started_at`, a lease's expiry) and on no key, and on
    /// the claimed column or setting it. For a Redis list (`column` [`LIST_ENTRIES`]): a
    /// command that reads or takes its entries.
    pub fn reaps(&self, table: &str, column: &str) -> bool {
        let reapers = self.reapers.get_or_init(|| {
            let mut out = Vec::new();
            for e in self.direct_effects() {
                // A Redis list read or taken from (`LRANGE processing 0 -1`, `RPOPLPUSH
                // processing queue`): its entries are not left there for ever.
                if e.kv {
                    let from = if e.list_move() {
                        e.where_cols.first()
                    } else {
                        e.table.as_ref().filter(|_| e.kind == EffectKind::Read)
                    };
                    if let Some(list) = from {
                        out.push((list.clone(), Name::new(LIST_ENTRIES)));
                    }
                    continue;
                }
                // A sweep over many rows by how long they have been held: no key in the
                // filter, and a time that says since when a row is held (`heartbeat_at`,
                // `started_at`, a lease's expiry). A sweep by when rows are due (`scheduled_at`:
                // the scheduler's promotion of due jobs) or done (`completed_at`: a purge)
                // frees no claim.
                if e.kind != EffectKind::Write
                    || e.insert
                    || !e.where_cols.iter().any(|c| is_hold_time_column(c))
                    || e.where_cols.iter().any(|c| is_plain_key(c))
                {
                    continue;
                }
                let Some(t) = &e.table else { continue };
                let cols = e.where_cols.iter().chain(e.sets.iter().map(|a| &a.column));
                for c in cols {
                    out.push((t.clone(), c.clone()));
                }
            }
            out
        });
        reapers
            .iter()
            .any(|(t, c)| c == column && query::same_state(Some(t), Some(table)))
    }
}

impl<'a> CrateView<'a> {
    /// The tables of the crate's hand-outs of work, each with whether some hand-out of it takes
    /// held rows back: tables where a row of a
    /// work table (jobs, tasks, builds, a queue) is taken by one holder at a time — read with
    /// `FOR UPDATE` (`SKIP LOCKED`) filtered on its state, or moved to an in-progress state by
    /// a compare-and-set on that state. A hand-out that also picks held rows by age (`OR
    /// (status = 'running' AND started_at < now() - ..)`) takes them back.
    fn handouts(&self) -> &[(Name, bool)] {
        self.handouts.get_or_init(|| {
            let mut out: Vec<(Name, bool)> = Vec::new();
            for e in self.direct_effects() {
                let Some(t) = e.table.as_ref().filter(|t| is_work(t)) else {
                    continue;
                };
                let on_state = |c: &Name| is_state_column(c);
                let hands_out = match e.kind {
                    EffectKind::Read => e.locking && e.where_cols.iter().any(on_state),
                    EffectKind::Write | EffectKind::Claim => {
                        !e.insert
                            && e.sets.iter().any(|a| {
                                e.where_cols.contains(&a.column)
                                    && matches!(&a.value, AssignedValue::Const(v)
                                            if is_in_progress_value(v))
                            })
                    }
                    _ => false,
                };
                if !hands_out {
                    continue;
                }
                let takes_back = e.where_cols.iter().any(|c| is_hold_time_column(c));
                match out.iter_mut().find(|(o, _)| o == t) {
                    Some((_, back)) => *back |= takes_back,
                    None => out.push((t.clone(), takes_back)),
                }
            }
            out
        })
    }

    /// Whether the crate hands rows of `table` out to one holder at a time (see
    /// [`CrateView::handouts`]) and takes none of them back from a holder: no reaper of
    /// `column` (see [`CrateView::reaps`]). The holder is then the only writer of a row it
    /// holds. A prefixed table counts as its model's (`fang_tasks` for `Task`).
    pub fn holds_exclusively(&self, table: &str, column: &str) -> bool {
        let mut matching = self
            .handouts()
            .iter()
            .filter(|(t, _)| query::same_table_prefixed(Some(t), Some(table)))
            .peekable();
        matching.peek().is_some()
            && !self.reaps(table, column)
            && !self.requeues(table, column)
            && !matching.any(|(t, takes_back)| *takes_back || self.reaps(t, column))
    }

    /// Whether the crate puts every held row of `table` back (`UPDATE tasks SET status =
    /// 'pending' WHERE status = 'running'`, run when a worker starts): a statement with no key in
    /// its filter that tests `column` and sets it to a waiting state (not in progress, done or
    /// failed). The claims are taken back whoever holds them, not only expired ones.
    pub fn requeues(&self, table: &str, column: &str) -> bool {
        let requeuers = self.requeuers.get_or_init(|| {
            let mut out = Vec::new();
            for e in self.direct_effects() {
                let Some(t) = &e.table else { continue };
                if e.kind != EffectKind::Write
                    || e.insert
                    || e.kv
                    || e.where_cols.iter().any(|c| is_plain_key(c))
                {
                    continue;
                }
                for a in e.sets.iter() {
                    let waiting = a.value.constant().is_some_and(|v| {
                        is_state_value(v)
                            && !is_in_progress_value(v)
                            && !is_done_value(v)
                            && !is_failure_value(v)
                    });
                    if waiting && e.where_cols.contains(&a.column) {
                        out.push((t.clone(), a.column.clone()));
                    }
                }
            }
            out
        });
        requeuers
            .iter()
            .any(|(t, c)| c == column && query::same_state(Some(t), Some(table)))
    }

    /// Where the crate calls body `id`: `(caller, call event)`, callers in body order.
    pub fn call_sites(&self, id: BodyId) -> &[(BodyId, u32)] {
        self.callers.get_or_init(|| Callers::of_crate(self)).of(id)
    }

    /// The one value every update of the crate sets `column` of `table` to, when there is one
    /// and it is a constant (inserts, which give a row its first value, aside): then a write
    /// of it repeats the only transition there is, and changes nothing when it comes twice.
    pub fn only_value(&self, table: &str, column: &str) -> Option<&Name> {
        let updates = self.updates.get_or_init(|| {
            let mut out: FxHashMap<(Name, Name), Option<Name>> = FxHashMap::default();
            for e in self.direct_effects() {
                if e.kind != EffectKind::Write || e.insert || e.delete || e.in_memory {
                    continue;
                }
                let Some(t) = &e.table else { continue };
                for a in e.sets.iter() {
                    let v = match &a.value {
                        AssignedValue::Const(v) => Some(v.clone()),
                        _ => None,
                    };
                    out.entry((t.clone(), a.column.clone()))
                        .and_modify(|old| {
                            if *old != v {
                                *old = None;
                            }
                        })
                        .or_insert(v);
                }
            }
            out
        });
        updates
            .get(&(Name::from(table), Name::from(column)))
            .and_then(Option::as_ref)
    }

    /// Whether `column` of `table` is given when a row is created and never changed after: an
    /// insert of the crate sets it, no update or upsert does, and every update of the table
    /// names the columns it sets (a changeset or a whole model saved could set any). A test of
    /// such a column (`if key.ns != ns`, `if !community.local`) cannot go stale.
    pub fn fixed_column(&self, table: &str, column: &str) -> bool {
        let tables = self.columns.get_or_init(|| {
            let mut out: Vec<(Name, TableColumns)> = Vec::new();
            for e in self.direct_effects() {
                if e.kind != EffectKind::Write || e.in_memory || e.delete {
                    continue;
                }
                let Some(t) = &e.table else { continue };
                let i = match out.iter().position(|(o, _)| o == t) {
                    Some(i) => i,
                    None => {
                        out.push((t.clone(), TableColumns::default()));
                        out.len() - 1
                    }
                };
                let cols = &mut out[i].1;
                if e.insert && !e.upsert {
                    cols.inserted
                        .extend(e.sets.iter().map(|a| a.column.clone()));
                } else if e.sets.is_empty() {
                    cols.opaque = true;
                } else {
                    cols.updated.extend(e.sets.iter().map(|a| a.column.clone()));
                }
            }
            out
        });
        let mut matching = tables
            .iter()
            .filter(|(t, _)| query::same_state(Some(t), Some(table)))
            .peekable();
        matching.peek().is_some()
            && matching
                .clone()
                .any(|(_, c)| c.inserted.iter().any(|x| x == column))
            && !matching.any(|(_, c)| c.opaque || c.updated.iter().any(|x| x == column))
    }

    /// Whether some write of the crate stores a response in `table` (`UPDATE idempotency
    /// SET response_body = $2 ..`): the table keeps the answers to requests.
    pub fn stores_response(&self, table: &str) -> bool {
        let tables = self.responses.get_or_init(|| {
            let mut out: Vec<Name> = Vec::new();
            for e in self.direct_effects() {
                if matches!(e.kind, EffectKind::Write | EffectKind::Claim)
                    && e.sets.iter().any(|a| is_response_column(&a.column))
                    && let Some(t) = &e.table
                    && !out.contains(t)
                {
                    out.push(t.clone());
                }
            }
            out
        });
        tables
            .iter()
            .any(|t| query::same_state(Some(t), Some(table)))
    }
}

/// Every call site of the crate grouped by callee, in one flat list: a body's sites are
/// `sites[start..start + len]` with `(start, len)` its span.
pub(crate) struct Callers {
    span: PerBody<(u32, u32)>,
    sites: Vec<(BodyId, u32)>,
}

impl Callers {
    /// Counted, then filled in place (no list per callee, no map).
    fn of_crate(krate: &CrateView<'_>) -> Callers {
        let mut span = krate.effects.map(|_| (0u32, 0u32));
        let mut total = 0usize;
        for (caller, _) in krate.facts.all_bodies() {
            for callees in krate.effects[&caller].callees.iter() {
                for c in callees {
                    if let Some(s) = span.get_mut(c) {
                        s.1 += 1;
                        total += 1;
                    }
                }
            }
        }
        let mut next = 0u32;
        for (id, _) in krate.facts.all_bodies() {
            if let Some(s) = span.get_mut(&id) {
                let count = s.1;
                *s = (next, 0);
                next += count;
            }
        }
        let mut sites = vec![(BodyId { file: 0, body: 0 }, 0u32); total];
        for (caller, _) in krate.facts.all_bodies() {
            for (i, callees) in krate.effects[&caller].callees.iter().enumerate() {
                for c in callees {
                    if let Some(s) = span.get_mut(c) {
                        sites[(s.0 + s.1) as usize] = (caller, i as u32);
                        s.1 += 1;
                    }
                }
            }
        }
        Callers { span, sites }
    }

    fn of(&self, id: BodyId) -> &[(BodyId, u32)] {
        match self.span.get(&id) {
            Some(&(start, len)) => &self.sites[start as usize..(start + len) as usize],
            None => &[],
        }
    }
}

/// What a call site says of a question about every call of a body (see `RuleCx::every_call`).
enum Site {
    Covers,
    Fails,
    AskCallers,
}

/// One body under check: its trace, its effects, and the shared questions about them
/// (computed on first use).
pub(crate) struct RuleCx<'a> {
    pub krate: &'a CrateView<'a>,
    pub id: BodyId,
    pub body: &'a Body,
    effects: Effects<'a>,
    kinds: KindSet,
    states: OnceCell<Vec<State>>,
    enter_of: OnceCell<Vec<Option<u32>>>,
    handler: OnceCell<Option<crate::handlers::Evidence>>,
    /// The body's own types name only SQLite (see [`crate::facts::Facts::body_dialects`]).
    sqlite_body: OnceCell<bool>,
}

impl<'a> RuleCx<'a> {
    pub fn new(krate: &'a CrateView<'a>, id: BodyId) -> Self {
        let effects = krate.effects_of(id);
        RuleCx {
            krate,
            id,
            body: krate.body(id),
            effects,
            kinds: KindSet::of(effects),
            states: OnceCell::new(),
            enter_of: OnceCell::new(),
            handler: OnceCell::new(),
            sqlite_body: OnceCell::new(),
        }
    }

    /// The effect kinds the body has (own and gained).
    pub fn kinds(&self) -> KindSet {
        self.kinds
    }

    pub fn effects(&self) -> Effects<'a> {
        self.effects
    }

    /// The live locks and transactions before each event.
    pub fn states(&self) -> &[State] {
        self.states
            .get_or_init(|| query::states(self.body, self.effects))
    }

    pub fn state(&self, i: u32) -> &State {
        &self.states()[i as usize]
    }

    /// Why the body handles a message from outside, when it does (see
    /// [`crate::handlers::message_handler`]); asked once per body, whichever rule asks.
    pub fn message_handler(&self) -> Option<&crate::handlers::Evidence> {
        self.handler
            .get_or_init(|| crate::handlers::message_handler(self.krate, self.id))
            .as_ref()
    }

    /// For each `Leave`, the index of its `Enter`.
    pub fn enter_of(&self) -> &[Option<u32>] {
        self.enter_of.get_or_init(|| query::enter_of(self.body))
    }

    /// The body reaches the store through a pool or a client of its own, not a transaction, a
    /// connection or an executor its caller hands in (a caller may hold a transaction, and rows
    /// locked, in those).
    pub fn own_connection(&self) -> bool {
        let b = &self.effects.body;
        b.tx_param.is_none() && !b.conn_param && !b.tx_holder
    }

    /// Whether event `i` runs detached (in a spawned or delayed closure).
    pub fn detached(&self, i: u32) -> bool {
        self.effects.detached(i)
    }

    pub fn callees(&self, i: u32) -> &'a [BodyId] {
        self.effects.callees(i)
    }

    /// What fixes of this body edit by (empty when it has none).
    pub fn fix_anchors(&self) -> &'a crate::ir::FixAnchors {
        static NONE: std::sync::LazyLock<crate::ir::FixAnchors> =
            std::sync::LazyLock::new(crate::ir::FixAnchors::default);
        let anchors = self.krate.fix_anchors[self.id.file as usize];
        match anchors.binary_search_by_key(&self.id.body, |a| a.body) {
            Ok(k) => &anchors[k],
            Err(_) => &NONE,
        }
    }

    pub fn path(&self) -> &str {
        self.krate.paths[self.id.file as usize]
    }

    pub fn span(&self, sp: Sp) -> Span {
        to_span(self.path(), self.krate.lines[self.id.file as usize], sp)
    }

    pub fn ev_span(&self, i: u32) -> Span {
        self.span(self.body.events[i as usize].sp)
    }

    pub fn label(&self, i: u32, message: impl Into<String>) -> Label {
        Label {
            span: self.ev_span(i),
            message: message.into(),
        }
    }

    /// The effects of event `i`.
    pub fn effs(&self, i: u32) -> impl Iterator<Item = &'a Effect> + Clone {
        self.effects.at(i)
    }

    pub fn has(&self, i: u32, kind: EffectKind) -> bool {
        self.effects.find(i, kind).is_some()
    }

    pub fn eff(&self, i: u32, kind: EffectKind) -> Option<&'a Effect> {
        self.effects.find(i, kind)
    }

    /// The read of `table`'s state at event `i`, when the event reads several (a helper that
    /// looks in a cache first, then in the table).
    pub fn read_of(&self, i: u32, table: Option<&str>) -> Option<&'a Effect> {
        self.effs(i)
            .find(|e| e.kind == EffectKind::Read && query::same_state(e.table.as_deref(), table))
    }

    /// Is an exclusive lock (a mutex guard, a write guard: not a read guard) taken before event
    /// `r` still held at event `w`? Every actor that takes it runs `r..=w` alone, so what `r`
    /// read is still current at `w` for them (the outer `mutation_lock` around a cache's read,
    /// merge and write-back).
    pub fn held_across(&self, r: u32, w: u32) -> bool {
        let at_w = &self.state(w).locks;
        self.state(r)
            .locks
            .iter()
            .any(|l| at_w.contains(l) && self.exclusive(l.event))
    }

    /// Does the lock taken at event `l` exclude every other holder: a lock of a known place
    /// taken here (not one a crate fn hands out, such as a pooled connection's guard), and not a
    /// read guard?
    fn exclusive(&self, l: u32) -> bool {
        let named = self.effs(l).any(|e| {
            e.kind == EffectKind::Lock
                && e.via.is_none()
                && e.table.as_deref().is_some_and(|t| !t.is_empty())
        });
        if !named {
            return false;
        }
        match &self.body.events.get(l as usize).map(|e| &e.kind) {
            Some(EventKind::Call(c)) => !c
                .steps
                .iter()
                .any(|s| crate::apis::READ_GUARD_STEPS.contains(&s.name.as_str())),
            _ => false,
        }
    }

    /// Does every call of this body in the crate run under an exclusive lock its caller holds
    /// (or in a caller that is itself only called so, a few calls up)? Then two runs of the body
    /// never overlap within the process: `update_nags` holding a process-wide mutex over the
    /// command handlers it dispatches to. A body the crate never calls is not covered.
    pub fn callers_hold_lock(&self) -> bool {
        self.every_call(3, &|cx, site| {
            if cx.detached(site) {
                Site::Fails
            } else if cx.state(site).locks.iter().any(|l| cx.exclusive(l.event)) {
                Site::Covers
            } else {
                Site::AskCallers
            }
        })
    }

    /// Does this body run only once, as a program starts: every call of it in the crate is made
    /// by `main` (or by a body itself only called so, a few calls up), from no loop, no closure
    /// and no spawned task? Nothing else of the process runs beside it then: a startup migration, a
    /// seed, a recovery pass before the server is up. A body the crate never calls, and a
    /// routed handler, are not covered.
    pub fn runs_once_at_startup(&self) -> bool {
        !self.body.routed
            && self.every_call(4, &|cx, site| {
                // A loop, or a closure handed to a scheduler or a router, runs it again.
                let repeated = cx
                    .enclosing_regions(site)
                    .any(|(_, r)| matches!(r, Region::Loop | Region::Closure { .. }));
                if cx.detached(site) || repeated {
                    Site::Fails
                } else if cx.body.ident == "main" && cx.body.self_ty.is_none() {
                    Site::Covers
                } else {
                    Site::AskCallers
                }
            })
    }

    /// Does every call of this body in the crate hold no transaction and no lock at its site,
    /// on a connection of the caller's own (or one its callers hand in, likewise, a few calls
    /// up)? Then nothing the callers read before the call was read under a lock that the
    /// statements this body runs on the connection they hand in still hold. A body the crate
    /// never calls does not pass.
    pub fn called_outside_transactions(&self) -> bool {
        self.every_call(3, &|cx, site| {
            let state = cx.state(site);
            if !state.txs.is_empty() || !state.locks.is_empty() {
                Site::Fails
            } else if cx.own_connection() {
                Site::Covers
            } else {
                Site::AskCallers
            }
        })
    }

    /// Does every call of this body in the crate pass `judge` at its site, where a site that
    /// asks its callers passes when every call of its own body does, up to `depth` calls up? A
    /// body the crate never calls does not pass.
    fn every_call(&self, depth: u8, judge: &dyn Fn(&RuleCx<'_>, u32) -> Site) -> bool {
        fn covered(
            krate: &CrateView<'_>,
            id: BodyId,
            depth: u8,
            judge: &dyn Fn(&RuleCx<'_>, u32) -> Site,
            seen: &mut Vec<BodyId>,
        ) -> bool {
            if depth == 0 || seen.contains(&id) {
                return false;
            }
            seen.push(id);
            let sites = krate.call_sites(id);
            let all = !sites.is_empty()
                && sites.iter().all(|&(caller, site)| {
                    let cx = RuleCx::new(krate, caller);
                    match judge(&cx, site) {
                        Site::Covers => true,
                        Site::Fails => false,
                        Site::AskCallers => covered(krate, caller, depth - 1, judge, seen),
                    }
                });
            seen.pop();
            all
        }
        covered(self.krate, self.id, depth, judge, &mut Vec::new())
    }

    /// Do the events `r` and `w` both run in one `SERIALIZABLE` transaction (set anywhere from
    /// its `BEGIN` on)? Conflicting transactions then abort instead of racing. A read before the
    /// transaction is not covered by it.
    pub fn serializable_together(&self, r: u32, w: u32) -> bool {
        let Some(tx) = self.state(w).txs.last() else {
            return false;
        };
        self.state(r).txs.contains(tx) && self.serializable(tx.first_event(), w)
    }

    /// Is a transaction open over events `from..to` serializable: set so (`SERIALIZABLE`
    /// anywhere in the range), or an SQLite one (the package names no other SQL database, or
    /// the body's own types and its struct's fields name only SQLite: the SQLite store of a
    /// package that has a PostgreSQL one too)? SQLite runs every transaction serializably: of
    /// two that read and then write, the second to write gets `SQLITE_BUSY` instead of acting
    /// on what it read.
    pub fn serializable(&self, from: u32, to: u32) -> bool {
        query::serializable(self.body, from, to)
            || self.krate.facts.dialects(self.id.file).sqlite_only()
            || *self
                .sqlite_body
                .get_or_init(|| self.krate.facts.body_dialects(self.id).sqlite_only())
    }

    /// Index (exclusive) up to which events may run after event `i` on the same path: the end
    /// of the innermost diverging branch around `i`, or the end of the body.
    pub fn reach_end(&self, i: u32) -> u32 {
        let enter_of = self.enter_of();
        let mut depth = 0i32;
        let after = (i as usize + 1..).zip(&self.body.events[i as usize + 1..]);
        for (j, ev) in after {
            match &ev.kind {
                EventKind::Enter(_) => depth += 1,
                EventKind::Leave => {
                    if depth == 0 {
                        if let Some(e) = enter_of[j]
                            && matches!(
                                self.body.events[e as usize].kind,
                                EventKind::Enter(Region::Branch { diverges: true, .. })
                            )
                        {
                            return j as u32;
                        }
                    } else {
                        depth -= 1;
                    }
                }
                EventKind::Exit if depth == 0 => return j as u32,
                _ => {}
            }
        }
        self.body.events.len() as u32
    }

    /// The event ranges (inclusive) that cannot run on a path through event `i`: the other arms
    /// of each `match` an arm of which holds `i`, and the other block of each `if` / `else`.
    /// (Arms are alternatives; the lowering lays them out one after another.)
    pub fn alternatives_of(&self, i: u32) -> Vec<(u32, u32)> {
        let evs = &self.body.events;
        let mut out = Vec::new();
        let mut depth = 0u32;
        for j in (0..i as usize).rev() {
            match &evs[j].kind {
                EventKind::Leave => depth += 1,
                EventKind::Enter(r) if depth == 0 => {
                    if !matches!(r, Region::Branch { .. }) {
                        continue;
                    }
                    // Back to the first arm, then every arm but this one.
                    let mut first = j;
                    while first > 0
                        && matches!(evs[first - 1].kind, EventKind::Leave)
                        && let Some(s) = self.enter_of()[first - 1]
                        && matches!(
                            evs[s as usize].kind,
                            EventKind::Enter(Region::Branch { .. })
                        )
                    {
                        first = s as usize;
                    }
                    out.extend(
                        self.arms_from(first as u32)
                            .into_iter()
                            .filter(|&(start, _)| start != j as u32),
                    );
                }
                EventKind::Enter(_) => depth -= 1,
                _ => {}
            }
        }
        out
    }

    /// The index of the `Leave` that closes the region opened at `enter` (the body's length when
    /// it is not closed).
    pub fn region_end(&self, enter: u32) -> u32 {
        let enter_of = self.enter_of();
        (enter as usize + 1..self.body.events.len())
            .find(|&j| enter_of[j] == Some(enter))
            .unwrap_or(self.body.events.len()) as u32
    }

    /// The branch that takes the `Err` of the call at `r`, tested on the call's own result (not
    /// a value made from it later): a `match` arm `Err(..)`, the block of `if let Err(..)`, the
    /// `else` of `let Ok(..) = .. else`.
    pub fn error_branch(&self, r: u32) -> Option<u32> {
        use crate::ir::TestRole;
        let has = |p: &[Name], v: &str| p.iter().any(|n| n == v);
        let bound = &query::binders(self.body)[r as usize];
        query::tests_of(self.body, r).into_iter().find_map(|t| {
            let EventKind::Cond(test) = &self.body.events[t as usize].kind else {
                return None;
            };
            let own = test.calls.contains(&r)
                || test.calls.is_empty()
                    && !test.deps.is_empty()
                    && test.deps.iter().all(|d| bound.contains(d));
            if !own {
                return None;
            }
            let branches = self.following_branches(t);
            match test.role {
                TestRole::Match => branches
                    .iter()
                    .zip(test.pats.iter())
                    .find(|(_, p)| has(p, "Err"))
                    .map(|(&b, _)| b),
                TestRole::If if test.pats.first().is_some_and(|p| has(p, "Err")) => {
                    branches.first().copied()
                }
                TestRole::LetElse if test.pats.first().is_some_and(|p| has(p, "Ok")) => {
                    branches.first().copied()
                }
                _ => None,
            }
        })
    }

    /// The `Enter` events of the branches right after test `t`: an `if`'s then and else
    /// blocks, a `match`'s arms, a `let .. else`'s else block.
    pub fn following_branches(&self, t: u32) -> Vec<u32> {
        self.arms_from(t + 1)
            .into_iter()
            .map(|(start, _)| start)
            .collect()
    }

    /// Is event `w` inside one of the branches the test at `c` opens (`if limited { .. } else {
    /// send(..) }`, a `match`'s arms)? The sub-tests of the same condition come first.
    pub fn in_branches_of(&self, c: u32, w: u32) -> bool {
        let events = &self.body.events;
        let last_test = (c..w)
            .take_while(|&i| matches!(events[i as usize].kind, EventKind::Cond(_)))
            .last()
            .unwrap_or(c);
        self.following_branches(last_test)
            .into_iter()
            .any(|b| b < w && w < self.region_end(b))
    }

    /// The branches laid out one after another from event `first` (a `match`'s arms, an `if`'s
    /// blocks): each one's `Enter` and the `Leave` that closes it.
    fn arms_from(&self, first: u32) -> Vec<(u32, u32)> {
        let evs = &self.body.events;
        let mut out = Vec::new();
        let mut i = first;
        while let Some(EventKind::Enter(Region::Branch { .. })) =
            evs.get(i as usize).map(|e| &e.kind)
        {
            let end = self.region_end(i);
            out.push((i, end));
            i = end + 1;
        }
        out
    }

    /// The regions event `t` is in, innermost first: the event of each `Enter` and its region.
    pub fn enclosing_regions(&self, t: u32) -> impl Iterator<Item = (u32, &'a Region)> + 'a {
        let events = &self.body.events;
        let mut i = t;
        let mut depth = 0u32;
        std::iter::from_fn(move || {
            while i > 0 {
                i -= 1;
                match &events[i as usize].kind {
                    EventKind::Leave => depth += 1,
                    EventKind::Enter(_) if depth > 0 => depth -= 1,
                    EventKind::Enter(r) => return Some((i, r)),
                    _ => {}
                }
            }
            None
        })
    }

    /// The innermost branch that event `t` is in (a guard's match arm).
    pub fn enclosing_branch(&self, t: u32) -> Option<u32> {
        self.enclosing_regions(t)
            .next()
            .and_then(|(i, r)| matches!(r, Region::Branch { .. }).then_some(i))
    }

    /// The `[start, end)` event ranges of the closures and async blocks handed to call `s`
    /// (lowered right after it).
    pub fn closures_of(&self, s: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let evs = &self.body.events;
        let mut i = s as usize + 1;
        while let Some(EventKind::Enter(Region::Closure { call: Some(c) })) =
            evs.get(i).map(|e| &e.kind)
            && *c == s
        {
            let end = self.region_end(i as u32);
            out.push((i as u32 + 1, end));
            i = end as usize + 1;
        }
        out
    }

    /// Notes naming the summary chain behind an effect obtained through a call.
    pub fn chain_notes(&self, eff: &Effect) -> Vec<String> {
        let mut notes = Vec::new();
        let mut via = eff.via;
        let mut guard = 0;
        while let (Some(c), true) = (via, guard < 6) {
            guard += 1;
            let body = self.krate.body(c);
            let Some(entry) = self
                .krate
                .summary(c)
                .and_then(|s| s.evidence(eff.kind, eff.token))
            else {
                break;
            };
            let ev = &body.events[entry.at as usize];
            let path = self.krate.paths[c.file as usize];
            match entry.callee {
                None => {
                    notes.push(format!(
                        "`{}` {} at {}:{}",
                        body.name(),
                        entry.effect.what,
                        path,
                        ev.sp.line
                    ));
                    break;
                }
                Some(next) => {
                    notes.push(format!(
                        "`{}` calls `{}` at {}:{}",
                        body.name(),
                        self.krate.body(next).name(),
                        path,
                        ev.sp.line
                    ));
                    via = Some(next);
                }
            }
        }
        notes
    }

    /// A finding of `rule` at event `primary`, for the rule to fill in.
    pub fn diag(&self, rule: &Rule, primary: u32, message: String) -> Diagnostic {
        Diagnostic {
            rule: rule.meta.name,
            level: rule.meta.default_level,
            message,
            primary: self.ev_span(primary),
            primary_label: None,
            labels: Vec::new(),
            help: None,
            notes: Vec::new(),
            function: Some(self.body.name().to_string()),
            suggestions: Vec::new(),
        }
    }

    /// A label on the body's signature: the transaction handed in as a parameter.
    pub fn tx_param_label(&self) -> Label {
        Label {
            span: self.span(self.body.sp),
            message: "the transaction is passed in here".to_string(),
        }
    }
}

pub(crate) fn to_span(file: &str, lines: &Lines, sp: Sp) -> Span {
    Span {
        file: file.to_string(),
        start: Position {
            line: sp.line,
            column: sp.col,
        },
        end: Position {
            line: sp.end_line,
            column: sp.end_col,
        },
        byte_start: lines.byte(sp.line, sp.col) as usize,
        byte_end: lines.byte(sp.end_line, sp.end_col) as usize,
    }
}
