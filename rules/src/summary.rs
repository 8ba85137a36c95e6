//! Crate-wide function summaries: what each body does (remote I/O, state reads and writes, token
//! operations, locks and transactions it hands back), propagated along the call graph to a
//! fixpoint, with the evidence chain kept for diagnostic notes.

use crate::facts::BodyId;
use crate::ir::Body;
use crate::kb::{BodyEffects, Eff, K};
use crate::query;
use std::collections::HashMap;

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

    fn add(
        &mut self,
        kind: K,
        token: bool,
        delete: bool,
        event: u32,
        via: Option<BodyId>,
        eff: &Eff,
    ) -> bool {
        if self
            .effects
            .iter()
            .any(|e| e.0 == kind && e.1 == token && e.2 == delete)
        {
            return false;
        }
        self.effects
            .push((kind, token, delete, event, via, eff.clone()));
        true
    }
}

/// Which direct effects a body exports to its callers.
fn exported(kind: K, body: &Body) -> bool {
    let ret = body.ret.join(" ").to_ascii_lowercase();
    match kind {
        K::Remote | K::Read | K::Write | K::Claim | K::Sleep => true,
        K::Lock => ["guard", "lock", "lease", "permit"]
            .iter()
            .any(|w| ret.contains(w)),
        K::TxBegin => ret.contains("transaction"),
        _ => false,
    }
}

/// Computes every body's summary.
pub fn summarize(
    ids: &[BodyId],
    bodies: &HashMap<BodyId, &Body>,
    effects: &HashMap<BodyId, BodyEffects>,
) -> HashMap<BodyId, Summary> {
    let mut sums: HashMap<BodyId, Summary> = HashMap::new();
    for id in ids {
        let body = bodies[id];
        let fx = &effects[id];
        let detached = query::detached(body, fx);
        let mut s = Summary::default();
        for (i, effs) in fx.effs.iter().enumerate() {
            if detached[i] {
                continue;
            }
            for e in effs {
                if exported(e.kind, body) {
                    s.add(e.kind, e.token, e.delete, i as u32, None, e);
                }
            }
        }
        sums.insert(*id, s);
    }
    // Fixpoint over call edges; bounded by the number of (body, effect) pairs.
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 64 {
        changed = false;
        rounds += 1;
        for id in ids {
            let body = bodies[id];
            let fx = &effects[id];
            let detached = query::detached(body, fx);
            let mut add: Vec<(K, bool, bool, u32, BodyId, Eff)> = Vec::new();
            for (i, callees) in fx.callees.iter().enumerate() {
                if detached[i] {
                    continue;
                }
                for c in callees {
                    if c == id {
                        continue;
                    }
                    if let Some(cs) = sums.get(c) {
                        for e in &cs.effects {
                            if exported(e.0, body)
                                || matches!(e.0, K::Lock | K::TxBegin)
                                    && exported(e.0, bodies[c])
                                    && exported(e.0, body)
                            {
                                add.push((e.0, e.1, e.2, i as u32, *c, e.5.clone()));
                            }
                        }
                    }
                }
            }
            let s = sums.get_mut(id).expect("summary exists");
            for (k, t, d, i, c, e) in add {
                changed |= s.add(k, t, d, i, Some(c), &e);
            }
        }
    }
    sums
}
