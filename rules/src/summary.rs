//! Crate-wide function summaries: what each body does when called (remote I/O, state reads and
//! writes, token operations, locks and transactions it hands back), propagated along the call
//! graph to a fixpoint, with the evidence chain kept for diagnostic notes; then, once, what each
//! call site gains from its callees' summaries ([`widen`]).

use crate::apis::GUARD_RETURN_WORDS;
use crate::effects::{
    AllBodyEffects, Assigned, AssignedValue, BodyEffects, CALLER_FIELDS, CallSiteEffects, Effect,
    EffectKind, set_field,
};
use crate::facts::{BodyId, Facts, PerBody};
use crate::fxhash::FxHashSet;
use crate::ir::{Body, Call, EventKind};
use crate::name::Name;
use crate::par::par_map;

/// One effect a body has when called, with its evidence.
#[derive(Debug, Clone)]
pub(crate) struct Exported {
    pub effect: Effect,
    /// The event of this body that shows it.
    pub at: u32,
    /// When that event is a call to another crate fn, the callee it comes from.
    pub callee: Option<BodyId>,
}

impl Exported {
    /// Effects with the same key are one effect to a caller. A key-value store's entry and a
    /// table's row are two states (a cache looked up, then the table on a miss).
    fn same_key(&self, e: &Effect) -> bool {
        let mine = &self.effect;
        mine.kind == e.kind
            && mine.token == e.token
            && mine.delete == e.delete
            && mine.in_memory == e.in_memory
            && mine.kv == e.kv
            && mine.lease == e.lease
            && mine.attempt == e.attempt
    }

    /// Does this entry stand for `e` to a caller: the same key, and not a remote call that only
    /// reads where `e` changes something there (the write outweighs the read)?
    fn covers(&self, e: &Effect) -> bool {
        self.same_key(e) && !outweighs(e, &self.effect)
    }
}

/// Does effect `new` outweigh `old` of the same key: a remote call that changes something over
/// one that only reads (a `GET` before the `POST`)? The caller must see the write.
fn outweighs(new: &Effect, old: &Effect) -> bool {
    old.read_only() && !new.read_only()
}

/// The effects a body has when called, one per kind / token / delete / in-memory / key-value key.
#[derive(Debug, Clone, Default)]
pub(crate) struct Summary {
    pub effects: Vec<Exported>,
}

impl Summary {
    pub fn has(&self, kind: EffectKind) -> bool {
        self.effects.iter().any(|e| e.effect.kind == kind)
    }

    /// Reads state that is not a token.
    pub fn reads_state(&self) -> bool {
        self.effects
            .iter()
            .any(|e| e.effect.kind == EffectKind::Read && !e.effect.token)
    }

    /// The evidence for an effect of `kind` (and, when there is one, of the same token-ness).
    pub fn evidence(&self, kind: EffectKind, token: bool) -> Option<&Exported> {
        let of_kind = |e: &&Exported| e.effect.kind == kind;
        self.effects
            .iter()
            .filter(of_kind)
            .find(|e| e.effect.token == token)
            .or_else(|| self.effects.iter().find(of_kind))
    }

    fn holds(&self, e: &Effect) -> bool {
        self.effects.iter().any(|x| x.covers(e))
    }

    fn add(&mut self, effect: &Effect, at: u32, callee: Option<BodyId>) -> bool {
        if let Some(x) = self.effects.iter_mut().find(|x| x.same_key(effect)) {
            if outweighs(effect, &x.effect) {
                *x = Exported {
                    effect: effect.clone(),
                    at,
                    callee,
                };
                return true;
            }
            return false;
        }
        self.effects.push(Exported {
            effect: effect.clone(),
            at,
            callee,
        });
        true
    }
}

/// Which direct effects a body exports to its callers.
fn exported(kind: EffectKind, body: &Body, facts: &Facts) -> bool {
    // The return type only matters for locks and transactions; build its text only then.
    let ret = || {
        let mut ret = body.ret.join(" ").to_ascii_lowercase();
        for t in &body.ret {
            if let Some(target) = facts.aliases.get(t.rsplit(':').next().unwrap_or(t)) {
                ret.push(' ');
                ret.push_str(&target.join(" ").to_ascii_lowercase());
            }
        }
        ret
    };
    match kind {
        EffectKind::Remote
        | EffectKind::Read
        | EffectKind::Write
        | EffectKind::Claim
        | EffectKind::Sleep => true,
        EffectKind::Lock => {
            let ret = ret();
            GUARD_RETURN_WORDS.iter().any(|w| ret.contains(w))
        }
        EffectKind::TxBegin => ret().contains("transaction") || returns_tx_holder(body, facts),
        _ => false,
    }
}

/// Per event: is it inside a branch that leaves with a failure or with nothing (see
/// [`crate::ir::Region::Branch`])?
fn rejecting_events(body: &Body) -> Vec<bool> {
    use crate::ir::Region;
    let mut stack: Vec<bool> = Vec::new();
    body.events
        .iter()
        .map(|ev| {
            let inside = stack.last().copied().unwrap_or(false);
            match &ev.kind {
                EventKind::Enter(r) => {
                    let rejects = matches!(
                        r,
                        Region::Branch { fails: true, .. } | Region::Branch { nothing: true, .. }
                    );
                    stack.push(inside || rejects);
                }
                EventKind::Leave => {
                    stack.pop();
                }
                _ => {}
            }
            inside
        })
        .collect()
}

/// Returns a crate struct that owns a transaction (a unit of work: `UnitOfWork { tx }`).
fn returns_tx_holder(body: &Body, facts: &Facts) -> bool {
    body.ret.iter().any(|t| {
        let name = t.rsplit(':').next().unwrap_or(t);
        facts.structs.get(name).is_some_and(|fields| {
            fields.iter().any(|(_, ty)| {
                ty.iter()
                    .any(|p| p.rsplit(':').next().unwrap_or(p).ends_with("Transaction"))
            })
        })
    })
}

/// A commit of a transaction the body was handed (`self.tx.commit()`, `tx.commit()` on a
/// parameter): calling the body ends the caller's transaction.
fn commits_handed_tx(e: &Effect, body: &Body) -> bool {
    e.kind == EffectKind::TxCommit
        && e.tx_local().is_some_and(|on| {
            let root = on.split('.').next().unwrap_or(on);
            root == "self" || body.params.iter().any(|(n, _)| n == root)
        })
}

/// Computes every body's summary: direct effects first (each body on its own, on up to
/// `threads` threads), then callee effects along call edges with a worklist until nothing
/// changes.
pub(crate) fn summarize(
    facts: &Facts,
    ids: &[BodyId],
    bodies: &PerBody<&Body>,
    effects: &AllBodyEffects,
    threads: usize,
) -> PerBody<Summary> {
    let direct = par_map(ids, threads, |id: &BodyId| {
        let body = bodies[id];
        let own = &effects[id];
        let mut s = Summary::default();
        let rejecting = own
            .direct
            .iter()
            .flatten()
            .any(|e| e.token && e.delete)
            .then(|| rejecting_events(body));
        for (i, effs) in own.direct.iter().enumerate() {
            if own.detached(i) {
                continue;
            }
            for e in effs {
                // A token deleted on a path that answers the caller with an error or nothing
                // (an expired code cleaned up, then `Ok(None)`) is not consumed for the caller:
                // it gets nothing to act on.
                if e.token && e.delete && rejecting.as_ref().is_some_and(|r| r[i]) {
                    continue;
                }
                if exported(e.kind, body, facts) || commits_handed_tx(e, body) {
                    s.add(e, i as u32, None);
                }
            }
        }
        // Call edges (caller event -> callee), outside detached regions.
        let mut out = Vec::new();
        for (i, callees) in own.callees.iter().enumerate() {
            if own.detached(i) {
                continue;
            }
            for c in callees {
                if c != id {
                    out.push((i as u32, *c));
                }
            }
        }
        (s, out)
    });
    let (direct_sums, out_edges): (Vec<Summary>, Vec<Vec<(u32, BodyId)>>) =
        direct.into_iter().unzip();
    let mut sums = PerBody::new_like(bodies, direct_sums);
    let mut callers: PerBody<Vec<BodyId>> = bodies.map(|_| Vec::new());
    for (id, out) in ids.iter().zip(&out_edges) {
        for &(_, c) in out {
            if let Some(v) = callers.get_mut(&c) {
                v.push(*id);
            }
        }
    }
    let edges = PerBody::new_like(bodies, out_edges);
    let mut work: Vec<BodyId> = ids
        .iter()
        .copied()
        .filter(|id| edges.get(id).is_some_and(|e| !e.is_empty()))
        .collect();
    let mut queued: FxHashSet<BodyId> = work.iter().copied().collect();
    let mut steps = 0usize;
    let limit = ids.len().saturating_mul(16).max(1024);
    while let Some(id) = work.pop() {
        queued.remove(&id);
        steps += 1;
        if steps > limit {
            break;
        }
        let body = bodies[&id];
        let mut add: Vec<Exported> = Vec::new();
        let own = &sums[&id];
        for (i, c) in edges.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(cs) = sums.get(c) {
                for e in &cs.effects {
                    // What the summary already holds (or this round already adds) is not
                    // copied again.
                    if own.holds(&e.effect) || add.iter().any(|a| a.covers(&e.effect)) {
                        continue;
                    }
                    let kind = e.effect.kind;
                    let ok = if matches!(kind, EffectKind::Lock | EffectKind::TxBegin) {
                        exported(kind, bodies[c], facts) && exported(kind, body, facts)
                    } else {
                        exported(kind, body, facts)
                    };
                    if ok {
                        let mut effect = e.effect.clone();
                        if let EventKind::Call(call) = &body.events[*i as usize].kind {
                            pass_arguments(&mut effect, bodies[c], body, *i as usize, call);
                            // Passed in here: this body's own call site shows it, not its
                            // callers'.
                            effect.passed = false;
                        }
                        add.push(Exported {
                            effect,
                            at: *i,
                            callee: Some(*c),
                        });
                    }
                }
            }
        }
        let s = sums.get_mut(&id).expect("summary exists");
        let mut changed = false;
        for a in add {
            changed |= s.add(&a.effect, a.at, a.callee);
        }
        if changed {
            for caller in callers.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
                if queued.insert(*caller) {
                    work.push(*caller);
                }
            }
        }
    }
    // Kept until the rules are done: without the spare capacity the pushes left.
    for s in sums.values_mut() {
        s.effects.shrink_to_fit();
    }
    sums
}

/// What each call site gains from its callees, computed once after the summaries: the
/// callees' exported effects (each marked `via` its callee; a lock or transaction only where
/// the call's result is bound, so it can be held), and a transaction closure where a closure is
/// handed to one of the crate's own transaction helpers (a fn that hands a closure to a
/// transaction).
/// Does the body hand one of its parameters to a transaction-closure method
/// (`self.conn.transaction(callback).await`)? A wrapper like that runs the closure its caller
/// gives it in a transaction.
fn hands_param_to_tx(body: &Body) -> bool {
    body.events.iter().any(|ev| {
        matches!(&ev.kind, EventKind::Call(c) if c.func.is_empty() && c.steps.iter().any(|s| {
            crate::apis::TX_CLOSURE_STEPS.contains(&s.name.as_str())
                && s.name != "run"
                && s.args.iter().any(|a| {
                    a.paths.len() == 1
                        && body
                            .params
                            .iter()
                            .any(|(p, _)| p != "self" && a.paths.first().is_some_and(|x| x == p))
                })
        }))
    })
}

/// Does the body begin a transaction and then call one of its parameters (`let mut tx =
/// pool.begin().await?; let out = f(&mut tx).await?; tx.commit().await?`)? The closure a caller
/// hands it runs inside that transaction.
fn runs_param_in_tx(body: &Body, effects: &BodyEffects) -> bool {
    let Some(begin) = (0..body.events.len()).find(|&i| {
        effects.direct[i]
            .iter()
            .any(|e| e.kind == EffectKind::TxBegin)
    }) else {
        return false;
    };
    body.events[begin + 1..].iter().any(|ev| {
        matches!(&ev.kind, EventKind::Call(c)
            if c.func.len() == 1
                && body.params.iter().any(|(p, _)| p != "self" && *p == c.func[0]))
    })
}

pub(crate) fn widen(
    ids: &[BodyId],
    bodies: &PerBody<&Body>,
    effects: &AllBodyEffects,
    summaries: &PerBody<Summary>,
    threads: usize,
) -> PerBody<CallSiteEffects> {
    let tx_helpers: FxHashSet<BodyId> = ids
        .iter()
        .copied()
        .filter(|id| {
            effects[id]
                .direct
                .all()
                .any(|e| e.kind == EffectKind::TxClosure)
                || runs_param_in_tx(bodies[id], &effects[id])
                || hands_param_to_tx(bodies[id])
        })
        .collect();
    let gained = par_map(ids, threads, |id| {
        let own = &effects[id];
        let body = bodies[id];
        let mut gained: Vec<(u32, Effect)> = Vec::new();
        for (i, callees) in own.callees.iter().enumerate() {
            let at = gained.len();
            let closure_arg = matches!(&body.events[i].kind, EventKind::Call(c) if c.all_args().any(|a| a.closure));
            if closure_arg && let Some(helper) = callees.iter().find(|c| tx_helpers.contains(c)) {
                let mut e = Effect::new(
                    EffectKind::TxClosure,
                    "runs a transaction closure (through a crate helper)",
                );
                e.via = Some(*helper);
                gained.push((i as u32, e));
            }
            for c in callees {
                let Some(s) = summaries.get(c) else { continue };
                for exp in &s.effects {
                    let e = &exp.effect;
                    let seen = gained[at..].iter().position(|(_, a)| {
                        a.kind == e.kind
                            && a.token == e.token
                            && a.in_memory == e.in_memory
                            && a.kv == e.kv
                    });
                    // One per kind (and kind of store) at a call site; a remote call that
                    // changes something outweighs one that only reads there.
                    let replaces = seen.filter(|&p| outweighs(e, &gained[at + p].1));
                    if seen.is_some() && replaces.is_none()
                        || matches!(e.kind, EffectKind::Lock | EffectKind::TxBegin)
                            && !bound(body, i)
                    {
                        continue;
                    }
                    let mut e = e.clone();
                    e.via = Some(*c);
                    if let EventKind::Call(call) = &body.events[i].kind {
                        pass_arguments(&mut e, bodies[c], body, i, call);
                    }
                    match replaces {
                        Some(p) => gained[at + p] = (i as u32, e),
                        None => gained.push((i as u32, e)),
                    }
                }
            }
        }
        CallSiteEffects::new(gained)
    });
    PerBody::new_like(bodies, gained)
}

/// Gives a callee's effect the values its caller passes: a set whose value is the callee's
/// parameter (`AssignedValue::Param`) takes the call's argument for it — a constant
/// (`update_state(id, State::Running)`), or the caller's own parameter, for the caller's
/// callers. Arguments count from the callee's first parameter, `self` included for a path
/// call (`Self::update(self, ..)`, `Type::update(conn, ..)`), after it for a method call.
pub(crate) fn pass_arguments(e: &mut Effect, callee: &Body, caller: &Body, at: usize, call: &Call) {
    if !e
        .sets
        .iter()
        .any(|a| matches!(a.value, AssignedValue::Param(_)))
    {
        return;
    }
    let Some(step) = call.steps.first() else {
        return;
    };
    let skip = usize::from(
        call.func.is_empty() && callee.params.first().is_some_and(|(n, _)| n == "self"),
    );
    let mut sets = e.sets.to_vec();
    // The model handed in takes the fields the caller set on its argument (`p.status =
    // Set(Failed)` before `db.update_payment(p)`), or stays the caller's parameter's.
    if let Some(marker) = sets.iter().position(|a| a.column == CALLER_FIELDS)
        && let AssignedValue::Param(k) = sets[marker].value
    {
        sets.remove(marker);
        let arg = (k as usize)
            .checked_sub(skip)
            .and_then(|i| step.args.get(i))
            .and_then(|a| match (a.paths.as_slice(), a.calls().is_empty()) {
                ([one], true) => Some(one),
                _ => None,
            });
        if let Some(local) = arg {
            let set_by_caller = caller_model_fields(caller, at, local);
            if set_by_caller.is_empty() {
                if let AssignedValue::Param(j) = AssignedValue::param_of(caller, local) {
                    sets.push(Assigned {
                        column: Name::new(CALLER_FIELDS),
                        value: AssignedValue::Param(j),
                    });
                }
            } else {
                for a in set_by_caller {
                    sets.retain(|s| s.column != a.column);
                    sets.push(a);
                }
            }
        }
    }
    for a in &mut sets {
        if a.column == CALLER_FIELDS {
            continue;
        }
        let AssignedValue::Param(k) = a.value else {
            continue;
        };
        let arg = (k as usize)
            .checked_sub(skip)
            .and_then(|i| step.args.get(i));
        a.value = match arg {
            Some(arg) if arg.value().is_some() => {
                e.passed = true;
                AssignedValue::Const(arg.value().cloned().unwrap_or_default())
            }
            Some(arg) => match (arg.paths.as_slice(), arg.calls().is_empty()) {
                ([one], true) => AssignedValue::param_of(caller, one),
                _ => AssignedValue::Unknown,
            },
            None => AssignedValue::Unknown,
        };
    }
    e.sets = sets.into();
}

/// The fields `caller` assigns on its local `local` (`local.status = Set(Status::Failed)`)
/// before its event `at`, since the local was last bound: the last assignment of each.
fn caller_model_fields(caller: &Body, at: usize, local: &str) -> Vec<Assigned> {
    let mut out: Vec<Assigned> = Vec::new();
    for ev in caller.events.iter().take(at) {
        let a = match &ev.kind {
            EventKind::Assign(a) => a,
            EventKind::Bind(b) if b.names.iter().any(|n| n == local) => {
                out.clear();
                continue;
            }
            _ => continue,
        };
        let Some(field) = a
            .target
            .strip_prefix(local)
            .and_then(|r| r.strip_prefix('.'))
            .filter(|f| !f.contains('.'))
        else {
            continue;
        };
        set_field(&mut out, field, a.value.as_ref());
    }
    out
}

/// Whether the result of call event `call` is bound to a local (a guard or a transaction
/// handed back can then be held).
fn bound(body: &Body, call: usize) -> bool {
    body.events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Bind(b) if b.calls.last() == Some(&(call as u32))))
}
