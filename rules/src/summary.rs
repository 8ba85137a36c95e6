//! Crate-wide function summaries: what each body does (remote I/O, state reads and writes, token
//! operations, locks and transactions it hands back), propagated along the call graph to a
//! fixpoint, with the evidence chain kept for diagnostic notes.

use crate::facts::{BodyId, Facts, PerBody};
use crate::fxhash::FxHashSet;
use crate::ir::Body;
use crate::kb::{BodyEffects, Eff, K};
use crate::query;

/// The effects a body has when called, each with the event that shows it.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Effect kind and token-ness, with its evidence: the event in this body and, when the
    /// event is a call to another crate fn, that callee.
    pub effects: Vec<(K, bool, bool, u32, Option<BodyId>, Eff)>,
}

impl Summary {
    pub fn has(&self, kind: K) -> bool {
        self.effects.iter().any(|e| e.0 == kind)
    }

    /// Writes persisted state (not only in-memory maps behind a lock).
    pub fn persists(&self) -> bool {
        self.effects.iter().any(|e| e.0 == K::Write && !e.5.mem)
    }

    fn holds(&self, kind: K, token: bool, delete: bool, mem: bool) -> bool {
        self.effects
            .iter()
            .any(|e| e.0 == kind && e.1 == token && e.2 == delete && e.5.mem == mem)
    }

    fn add(
        &mut self,
        kind: K,
        token: bool,
        delete: bool,
        event: u32,
        via: Option<BodyId>,
        eff: &Eff,
    ) -> bool {
        if self.holds(kind, token, delete, eff.mem) {
            return false;
        }
        self.effects
            .push((kind, token, delete, event, via, eff.clone()));
        true
    }
}

/// Which direct effects a body exports to its callers.
fn exported(kind: K, body: &Body, facts: &Facts) -> bool {
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
        K::Remote | K::Read | K::Write | K::Claim | K::Sleep => true,
        K::Lock => {
            let ret = ret();
            ["guard", "lock", "lease", "permit"]
                .iter()
                .any(|w| ret.contains(w))
        }
        K::TxBegin => ret().contains("transaction") || returns_tx_holder(body, facts),
        _ => false,
    }
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
fn commits_handed_tx(e: &Eff, body: &Body) -> bool {
    e.kind == K::TxCommit
        && e.on.as_deref().is_some_and(|on| {
            let root = on.split('.').next().unwrap_or(on);
            root == "self" || body.params.iter().any(|(n, _)| n == root)
        })
}

/// Computes every body's summary: direct effects first (each body on its own, on up to
/// `threads` threads), then callee effects along call edges with a worklist until nothing
/// changes.
pub fn summarize(
    facts: &Facts,
    ids: &[BodyId],
    bodies: &PerBody<&Body>,
    effects: &PerBody<BodyEffects>,
    threads: usize,
) -> PerBody<Summary> {
    let direct = crate::par::par_map(ids, threads, |id: &BodyId| {
        let body = bodies[id];
        let fx = &effects[id];
        let detached = query::detached(body, fx);
        let mut s = Summary::default();
        for (i, effs) in fx.effs.iter().enumerate() {
            if detached[i] {
                continue;
            }
            for e in effs {
                if exported(e.kind, body, facts) || commits_handed_tx(e, body) {
                    s.add(e.kind, e.token, e.delete, i as u32, None, e);
                }
            }
        }
        // Call edges (caller event -> callee), outside detached regions.
        let mut out = Vec::new();
        for (i, callees) in fx.callees.iter().enumerate() {
            if detached[i] {
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
        let mut add: Vec<(K, bool, bool, u32, BodyId, Eff)> = Vec::new();
        let own = &sums[&id];
        for (i, c) in edges.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(cs) = sums.get(c) {
                for e in &cs.effects {
                    // What the summary already holds (or this round already adds) is not
                    // copied again.
                    if own.holds(e.0, e.1, e.2, e.5.mem)
                        || add
                            .iter()
                            .any(|a| a.0 == e.0 && a.1 == e.1 && a.2 == e.2 && a.5.mem == e.5.mem)
                    {
                        continue;
                    }
                    let ok = if matches!(e.0, K::Lock | K::TxBegin) {
                        exported(e.0, bodies[c], facts) && exported(e.0, body, facts)
                    } else {
                        exported(e.0, body, facts)
                    };
                    if ok {
                        add.push((e.0, e.1, e.2, *i, *c, e.5.clone()));
                    }
                }
            }
        }
        let s = sums.get_mut(&id).expect("summary exists");
        let mut changed = false;
        for (k, t, d, i, c, e) in add {
            changed |= s.add(k, t, d, i, Some(c), &e);
        }
        if changed {
            for caller in callers.get(&id).map(Vec::as_slice).unwrap_or(&[]) {
                if queued.insert(*caller) {
                    work.push(*caller);
                }
            }
        }
    }
    sums
}
