//! Questions the rules share, answered over one body's trace and its classified effects:
//! which lock guards and transactions are live at an event, which events run detached (spawned
//! or delayed), which locals derive from a read, whether a write's result is checked.

use crate::apis::{GUARD_RELEASE_STEPS, RESULT_CHECK_STEPS, SERIALIZABLE_STEPS};
use crate::effects::{Effect, EffectKind, Effects, Sparse};
use crate::fxhash::FxHashSet;
use crate::ir::{Body, EventKind, Region, Test, TestRole};
use crate::name::Name;

/// A live lock or transaction: the event that opened it and the local holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub event: u32,
    pub name: Option<Name>,
}

impl Open {
    /// The first event the transaction or lock covers: the one that opened it, or the body's
    /// start for a transaction received as a parameter.
    pub fn first_event(&self) -> u32 {
        if self.event == TX_PARAM {
            0
        } else {
            self.event
        }
    }
}

/// The `Open::event` of a transaction received as a parameter.
pub const TX_PARAM: u32 = u32::MAX;

/// What is live just before an event.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub locks: Vec<Open>,
    pub txs: Vec<Open>,
}

/// For each call event, the names its result is bound to (`let tx = pool.begin().await?`).
pub fn binders(body: &Body) -> Vec<Vec<Name>> {
    let mut out = vec![Vec::new(); body.events.len()];
    for ev in &body.events {
        if let EventKind::Bind(b) = &ev.kind
            && let Some(&last) = b.calls.last()
            && out[last as usize].is_empty()
        {
            out[last as usize] = b.names.to_vec();
        }
    }
    out
}

fn is_detaching(effects: &Sparse<Effect>, call: u32) -> bool {
    effects[call as usize]
        .iter()
        .any(|e| matches!(e.kind, EffectKind::Spawn | EffectKind::Schedule))
}

/// Which events run detached from the body's flow (inside a closure or async block handed to
/// a spawn or a schedule), from the body's own effects: call sites gain neither from their
/// callees, so this is computed once, at classification.
pub fn detached(body: &Body, effects: &Sparse<Effect>) -> Vec<bool> {
    let mut out = vec![false; body.events.len()];
    let mut stack: Vec<bool> = Vec::new();
    let mut cur = false;
    for (i, ev) in body.events.iter().enumerate() {
        match &ev.kind {
            EventKind::Enter(r) => {
                stack.push(cur);
                if let Region::Closure { call: Some(c) } = r
                    && is_detaching(effects, *c)
                {
                    cur = true;
                }
            }
            EventKind::Leave => cur = stack.pop().unwrap_or(false),
            _ => {}
        }
        out[i] = cur;
    }
    out
}

/// The live locks and transactions before each event.
pub fn states(body: &Body, effects: Effects<'_>) -> Vec<State> {
    let bind = binders(body);
    let mut out = Vec::with_capacity(body.events.len());
    let mut cur = State::default();
    if let Some(p) = &effects.body.tx_param {
        // The transaction is open for the whole body; `TX_PARAM` marks it.
        cur.txs.push(Open {
            event: TX_PARAM,
            name: Some(Name::clone(p)),
        });
    }
    let mut stack: Vec<(State, bool)> = Vec::new();
    for (i, ev) in body.events.iter().enumerate() {
        out.push(cur.clone());
        match &ev.kind {
            EventKind::Enter(r) => {
                let saved = cur.clone();
                match r {
                    Region::Branch { diverges, .. } => stack.push((saved, *diverges)),
                    Region::Loop => stack.push((saved, false)),
                    Region::Closure { call } => {
                        stack.push((saved, true));
                        if let Some(c) = call {
                            if is_detaching(&effects.body.direct, *c) {
                                cur = State::default();
                            } else if effects.at(*c).any(|e| e.kind == EffectKind::TxClosure) {
                                cur.txs.push(Open {
                                    event: *c,
                                    name: None,
                                });
                            }
                        }
                    }
                }
            }
            EventKind::Leave => {
                if let Some((saved, true)) = stack.pop() {
                    cur = saved;
                }
            }
            EventKind::Drop { name } => {
                cur.locks.retain(|o| o.name.as_deref() != Some(name));
                cur.txs.retain(|o| o.name.as_deref() != Some(name));
            }
            EventKind::Call(_) => {
                let names = &bind[i];
                let held = names.first().filter(|n| n.as_str() != "_").cloned();
                for e in effects.at(i as u32) {
                    match e.kind {
                        EffectKind::Lock if held.is_some() => cur.locks.push(Open {
                            event: i as u32,
                            name: held.clone(),
                        }),
                        EffectKind::Claim if held.is_some() && e.lock_claim => {
                            cur.locks.push(Open {
                                event: i as u32,
                                name: held.clone(),
                            })
                        }
                        EffectKind::TxBegin => cur.txs.push(Open {
                            event: i as u32,
                            name: held.clone(),
                        }),
                        EffectKind::TxCommit | EffectKind::TxRollback => {
                            let on = e.tx_local().and_then(|s| s.split('.').next());
                            if let Some(pos) = cur.txs.iter().rposition(|o| o.name.as_deref() == on)
                            {
                                cur.txs.remove(pos);
                            } else if e.tx_local().is_none() || on.is_some_and(|n| !n.is_empty()) {
                                cur.txs.pop();
                            }
                        }
                        _ => {}
                    }
                }
                // `ledger.post(tx, ..)`: a transaction this body began, moved into a callee,
                // is the callee's to commit or drop (unless handed back under its name:
                // `let tx = stage(tx).await?`).
                if let EventKind::Call(c) = &ev.kind
                    && cur
                        .txs
                        .iter()
                        .any(|o| o.event != TX_PARAM && o.name.is_some())
                {
                    let moved: Vec<&str> = c
                        .all_args()
                        .filter(|a| a.moved && !a.closure)
                        .filter_map(|a| a.paths.first().map(|p| p.as_str()))
                        .collect();
                    if !moved.is_empty() {
                        cur.txs.retain(|o| {
                            o.event == TX_PARAM
                                || !o.name.as_deref().is_some_and(|n| {
                                    moved.contains(&n) && !names.iter().any(|b| b == n)
                                })
                        });
                    }
                }
                // `locks.unlock(&guard)` / `lease.release(guard)` ends a guard's life.
                if let EventKind::Call(c) = &ev.kind
                    && c.steps
                        .iter()
                        .any(|s| GUARD_RELEASE_STEPS.contains(&s.name.as_str()))
                {
                    let args: Vec<&str> = c
                        .all_args()
                        .flat_map(|a| a.paths.iter().map(|p| first(p)))
                        .collect();
                    cur.locks
                        .retain(|o| !o.name.as_deref().is_some_and(|n| args.contains(&n)));
                }
                // An un-bound redis lock (`SET lock:x NX`) holds until the end of the body.
                if held.is_none()
                    && effects
                        .at(i as u32)
                        .any(|e| e.kind == EffectKind::Claim && e.lock_claim)
                {
                    cur.locks.push(Open {
                        event: i as u32,
                        name: None,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// The last `let` before event `before` that binds `name` (what the local holds there).
pub fn binding<'b>(body: &'b Body, before: u32, name: &str) -> Option<&'b crate::ir::Bind> {
    body.events[..before as usize]
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Bind(b) if b.names.iter().any(|n| n == name) => Some(&**b),
            _ => None,
        })
}

/// Methods that put a value into the collection they are called on.
const FILL_STEPS: &[&str] = &[
    "push",
    "push_back",
    "push_front",
    "insert",
    "extend",
    "append",
];

/// The local a call fills with a value of `set` (`by_prio.entry(p).or_default().push(row)`,
/// `picked.insert(id, row)`): the collection then holds that value. A value a call made of
/// one (`futures.push(run(idx))`) is not it.
fn filled<'e>(ev: &'e crate::ir::Event, set: &FxHashSet<Name>) -> Option<&'e Name> {
    let EventKind::Call(c) = &ev.kind else {
        return None;
    };
    let last = c.steps.last()?;
    (c.func.is_empty()
        && FILL_STEPS.contains(&last.name.as_str())
        && last.args.iter().any(|a| {
            // The value itself, not something a call made of it (`futures.push(run(idx))`).
            a.ev.is_none() && a.paths.iter().any(|p| set.contains(first(p)))
        }))
    .then(|| c.recv.first())
    .flatten()
}

/// Locals whose value derives from the result of call event `from` (bound from it, or from a
/// local that is).
pub fn derived(body: &Body, from: u32) -> FxHashSet<Name> {
    let mut set: FxHashSet<Name> = FxHashSet::default();
    for ev in &body.events[from as usize..] {
        if let EventKind::Bind(b) = &ev.kind {
            derive_step(&mut set, b, from);
        }
    }
    set
}

/// One binding's part in [`derived`]: its names join the set when bound from call `from` or
/// from a local in the set, and leave it when shadowed by a value that does not come from it.
fn derive_step(set: &mut FxHashSet<Name>, b: &crate::ir::Bind, from: u32) {
    let direct = b.calls.contains(&from);
    let via = b.deps.iter().any(|d| set.contains(first(d)));
    if direct || via {
        set.extend(b.names.iter().filter(|n| n.as_str() != "_").cloned());
    } else {
        for n in &b.names {
            set.remove(n);
        }
    }
}

/// [`derived`] as it stands at event `to`: a local bound inside a branch that always leaves
/// (`if let Some(hit) = cached { let body = hit.body; return Ok(body) }`) and that branch closed
/// before `to` cannot reach it, so what was bound (or shadowed) in there is undone at its end:
/// a later, unrelated `body` is not taken for one derived from the read.
pub fn derived_before(body: &Body, from: u32, to: u32) -> FxHashSet<Name> {
    derived_until(body, from, to, false)
}

/// [`derived_before`], and with `fill` also the collections filled with such a value
/// (`by_prio.entry(p).or_default().push(row)`: a later `by_prio.get(..)` holds the row).
fn derived_until(body: &Body, from: u32, to: u32, fill: bool) -> FxHashSet<Name> {
    let mut set: FxHashSet<Name> = FxHashSet::default();
    // Per open region: for a branch that always leaves, what was changed in it (the name and
    // whether it was in the set before), to undo at its end.
    let mut undo: Vec<Option<Vec<(Name, bool)>>> = Vec::new();
    let end = (to as usize).min(body.events.len());
    for ev in body.events.get(from as usize..end).unwrap_or_default() {
        match &ev.kind {
            EventKind::Enter(Region::Branch { diverges: true, .. }) => undo.push(Some(Vec::new())),
            EventKind::Enter(_) => undo.push(None),
            EventKind::Leave => {
                if let Some(Some(log)) = undo.pop() {
                    for (n, was) in log.into_iter().rev() {
                        if was {
                            set.insert(n);
                        } else {
                            set.remove(&n);
                        }
                    }
                }
            }
            EventKind::Call(_) if fill => {
                if let Some(root) = filled(ev, &set).filter(|r| !set.contains(*r)) {
                    set.insert(root.clone());
                    if let Some(log) = undo.iter_mut().rev().find_map(|l| l.as_mut()) {
                        log.push((root.clone(), false));
                    }
                }
            }
            EventKind::Bind(b) => {
                let direct = b.calls.contains(&from);
                let via = b.deps.iter().any(|d| set.contains(first(d)));
                let log = undo.iter_mut().rev().find_map(|l| l.as_mut());
                let mut changes: Vec<(Name, bool)> = Vec::new();
                for n in b.names.iter().filter(|n| n.as_str() != "_") {
                    let was = set.contains(n);
                    if direct || via {
                        set.insert(n.clone());
                    } else {
                        // Shadowed by a value that does not come from the read.
                        set.remove(n);
                    }
                    changes.push((n.clone(), was));
                }
                if let Some(log) = log {
                    log.extend(changes);
                }
            }
            _ => {}
        }
    }
    set
}

/// The first segment of a dotted place (`order` of `order.id`).
pub fn first(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// The last segment of a dotted place (`id` of `order.id`).
pub fn last(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// Events (after `from`) that test the result of call `from`: conditions on a derived local, or
/// conditions whose own calls include it (`if q.execute().await?.rows_affected() == 0`).
pub fn tests_of(body: &Body, from: u32) -> Vec<u32> {
    // The locals derived from the result as they stand at each test: a later binding of the
    // same name (`.map_err(|e| ..)` after `if e.is_unique_violation()`) shadows it only from
    // there on.
    let mut set: FxHashSet<Name> = FxHashSet::default();
    let mut out = Vec::new();
    for (i, ev) in body.events.iter().enumerate().skip(from as usize) {
        match &ev.kind {
            EventKind::Bind(b) => derive_step(&mut set, b, from),
            EventKind::Cond(t)
                if t.calls.contains(&from) || t.deps.iter().any(|d| set.contains(first(d))) =>
            {
                out.push(i as u32);
            }
            _ => {}
        }
    }
    // `?` on the write itself with a rows-affected or optional-row check in the chain.
    if let EventKind::Call(c) = &body.events[from as usize].kind
        && c.steps
            .iter()
            .any(|s| RESULT_CHECK_STEPS.contains(&s.name.as_str()))
    {
        out.push(from);
    }
    out
}

/// Is the result of call `from` handed to a later fallible call whose error is propagated
/// (`ensure_affected_rows(&res, 1)?`, `check_updated(&done)?`)? For a conditional write, that is
/// a check of what it changed made by a helper.
pub fn checked_by_call(body: &Body, from: u32) -> bool {
    let set = derived(body, from);
    !set.is_empty()
        && body.events[from as usize + 1..].iter().any(|ev| {
            matches!(&ev.kind, EventKind::Call(c)
                if c.steps.last().is_some_and(|s| s.tried)
                    && c.all_args()
                        .chain(c.steps.iter().flat_map(|s| s.args.iter()))
                        .any(|a| a.paths.iter().any(|p| set.contains(p))))
        })
}

/// For each `Leave` event, the index of its `Enter`.
pub fn enter_of(body: &Body) -> Vec<Option<u32>> {
    let mut out = vec![None; body.events.len()];
    let mut stack = Vec::new();
    for (i, ev) in body.events.iter().enumerate() {
        match ev.kind {
            EventKind::Enter(_) => stack.push(i as u32),
            EventKind::Leave => out[i] = stack.pop(),
            _ => {}
        }
    }
    out
}

/// Two tables (or keys, or places) that may be the same state: equal, one a dotted prefix of
/// the other, or either unknown.
pub fn same_state(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            a == b
                || a.strip_prefix(b).is_some_and(|r| r.starts_with('.'))
                || b.strip_prefix(a).is_some_and(|r| r.starts_with('.'))
        }
        _ => true,
    }
}

/// [`same_state`], also across a table prefix: `fang_tasks` is the table of a `Task` (a
/// model's table is often its name with the application's prefix).
pub fn same_table_prefixed(a: Option<&str>, b: Option<&str>) -> bool {
    same_state(a, b)
        || match (a, b) {
            (Some(a), Some(b)) => {
                a.strip_suffix(b).is_some_and(|p| p.ends_with('_'))
                    || b.strip_suffix(a).is_some_and(|p| p.ends_with('_'))
            }
            _ => false,
        }
}

/// Does event `b` (after `a`) run whenever the body goes on past `a`: not inside a branch,
/// loop or closure that `a` is not in? The regions between them are all closed again.
pub fn same_block(body: &Body, a: u32, b: u32) -> bool {
    let mut depth = 0i32;
    for ev in body
        .events
        .get(a as usize + 1..b as usize)
        .unwrap_or_default()
    {
        match ev.kind {
            EventKind::Enter(_) => depth += 1,
            EventKind::Leave => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    a < b && depth == 0
}

/// Whether the result of call event `r` is used: bound to a name, or tested.
pub fn result_used(body: &Body, r: u32) -> bool {
    body.events.iter().any(|e| {
        matches!(&e.kind, EventKind::Bind(b) if b.calls.contains(&r) && b.names.iter().any(|n| n != "_"))
    }) || !tests_of(body, r).is_empty()
}

/// Does event `w` (a call or an assignment) use a value derived from the result of call `r`?
pub fn depends_on(body: &Body, w: u32, r: u32) -> bool {
    uses_at(body, w, &derived_before(body, r, w))
}

/// [`depends_on`], also through a collection the rows were put in and taken from again
/// (`for row in rows { by_prio.entry(p).or_default().push(row) }`, then `by_prio.get(..)`):
/// does the write at `w` act on what the read at `r` returned?
pub fn acts_on(body: &Body, w: u32, r: u32) -> bool {
    uses_at(body, w, &derived_until(body, r, w, true))
}

/// Does the assignment or call at `w` use one of `derived`?
fn uses_at(body: &Body, w: u32, derived: &FxHashSet<Name>) -> bool {
    let uses = |p: &Name| derived.contains(first(p));
    match &body.events[w as usize].kind {
        EventKind::Assign(a) => a.deps.iter().any(uses),
        EventKind::Call(c) => c.all_args().any(|a| a.paths.iter().any(uses)),
        _ => false,
    }
}

/// Is the transaction between events `from` and `to` `SERIALIZABLE` (`SET TRANSACTION ..`,
/// `BEGIN ISOLATION LEVEL ..`, diesel's `.serializable()`)? Conflicting transactions then abort
/// instead of racing.
pub fn serializable(body: &Body, from: u32, to: u32) -> bool {
    (from..to).any(|i| match &body.events[i as usize].kind {
        EventKind::Call(c) => {
            c.sql().is_some_and(|s| s.serializable)
                || c.steps
                    .iter()
                    .any(|s| SERIALIZABLE_STEPS.contains(&s.name.as_str()))
                || c.all_args().any(|a| {
                    a.strs()
                        .iter()
                        .any(|s| s.to_ascii_lowercase().contains("serializable"))
                })
        }
        _ => false,
    })
}

/// Is call event `r` a request that changes nothing: an HTTP `get` / `head` builder, with no
/// writing step?
pub fn read_only_request(body: &Body, r: u32) -> bool {
    let EventKind::Call(call) = &body.events[r as usize].kind else {
        return false;
    };
    let step = |names: &[&str]| call.steps.iter().any(|s| names.contains(&s.name.as_str()));
    step(crate::apis::READ_ONLY_HTTP_STEPS) && !step(crate::apis::WRITING_HTTP_STEPS)
}

/// The branches after test `t` of an attempt's answer (a lock attempt, a call's `Result`) that
/// run when it failed: the lock was not taken, the call returned an error or a failure. A
/// pattern's innermost value decides (`Ok(false)` is not taken, `Ok(true)` taken): `false`,
/// `None`, `Right` (sqlx's `try_acquire`) or `Err` is not taken; `true`, `Some`, `Left` or
/// `Ok` is taken.
pub(crate) fn not_acquired(cx: &crate::rules::RuleCx<'_>, t: u32, test: &Test) -> Vec<u32> {
    /// `Some(true)` when the pattern says the lock was not taken, `Some(false)` when taken.
    fn fails(pat: &[Name]) -> Option<bool> {
        for v in pat.iter().rev() {
            match v.as_str() {
                "false" | "None" | "Right" | "Err" => return Some(true),
                "true" | "Some" | "Left" | "Ok" => return Some(false),
                _ => {}
            }
        }
        None
    }
    let branches = cx.following_branches(t);
    match test.role {
        TestRole::Match => branches
            .iter()
            .zip(test.pats.iter())
            .filter(|(_, p)| fails(p) == Some(true))
            .map(|(&b, _)| b)
            .collect(),
        TestRole::If => {
            let then_fails = match test.pats.first() {
                Some(p) => match fails(p) {
                    Some(f) => f,
                    None => return Vec::new(),
                },
                None if test.values.iter().any(|v| v == "Err") => !test.negated,
                None if test.values.iter().any(|v| v == "Ok") => test.negated,
                // A test of the attempt's own answer (`if !got`, `if acquired`).
                None => test.negated,
            };
            branches
                .get(usize::from(!then_fails))
                .copied()
                .into_iter()
                .collect()
        }
        TestRole::LetElse if test.pats.first().and_then(|p| fails(p)) == Some(false) => {
            branches.first().copied().into_iter().collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(src: &str) -> Body {
        let lines = crate::parse::LineIndex::new(src);
        let mut ir = crate::lower::parse_and_lower(src, &lines, &crate::Knowledge::default())
            .expect("the source parses");
        ir.bodies.remove(0)
    }

    fn call_named(b: &Body, name: &str) -> u32 {
        b.events
            .iter()
            .position(|e| matches!(&e.kind, EventKind::Call(c) if c.head() == name))
            .expect("the call") as u32
    }

    #[test]
    fn a_local_bound_in_a_branch_that_leaves_does_not_reach_past_it() {
        let b = body(
            "fn f(cache: &Cache, key: &str, v: u32) {
                 let hit = cache.load(key);
                 if let Some(h) = hit {
                     let v = h.value;
                     return;
                 }
                 cache.store(key, v);
             }",
        );
        let (load, store) = (call_named(&b, "load"), call_named(&b, "store"));
        assert!(
            derived(&b, load).contains("v"),
            "the whole-body view keeps it"
        );
        assert!(!depends_on(&b, store, load));
        let kept = body(
            "fn f(cache: &Cache, key: &str) {
                 let hit = cache.load(key);
                 let v = hit.value;
                 if v > 3 {
                     return;
                 }
                 cache.store(key, v);
             }",
        );
        let (load, store) = (call_named(&kept, "load"), call_named(&kept, "store"));
        assert!(depends_on(&kept, store, load));
    }
}
