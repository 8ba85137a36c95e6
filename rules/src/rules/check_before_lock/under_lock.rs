//! The shape with a lock or transaction: the state was read and tested before the lock was
//! taken (or the transaction begun) and is not read again under it.

use super::{Reported, Verdict, Write, deciding_check};
use crate::effects::EffectKind;
use crate::facts::BodyId;
use crate::ir::EventKind;
use crate::query::{self, TX_PARAM};
use crate::rules::RuleCx;

/// Judges a write under a lock, a transaction or a temporary guard against every read before
/// the protection.
pub(super) fn judge(cx: &RuleCx<'_>, write: &Write<'_>, reported: &mut Reported) -> Verdict {
    let (w, effect) = (write.at, write.effect);
    // A model saved back through an upsert is judged by the no-lock shape only.
    if effect.insert {
        return Verdict::Clean;
    }
    let st = cx.state(w);
    let temp = effect.temporary();
    let mut protections: Vec<(u32, &str)> = Vec::new();
    for l in &st.locks {
        protections.push((l.event, "lock taken here"));
    }
    for t in &st.txs {
        if t.event != TX_PARAM {
            protections.push((t.event, "transaction begun here"));
        }
    }
    if temp {
        protections.push((w, "lock taken here"));
    }
    let wtable = effect.table.as_deref();
    for &(p, plabel) in &protections {
        let reread = (p + u32::from(!temp)..w).any(|r| {
            !cx.detached(r)
                && cx.effs(r).any(|e| {
                    e.kind == EffectKind::Read
                        && query::same_state(e.table.as_deref(), wtable)
                        && query::result_used(cx.body, r)
                })
        });
        if reread || tested_through_guard(cx, p, w) {
            continue;
        }
        for r in (0..p).rev() {
            if cx.detached(r) {
                continue;
            }
            let Some(read) = cx.read_of(r, wtable) else {
                continue;
            };
            // The read must be able to reach the write (not on a path that always returns).
            if !query::same_state(read.table.as_deref(), wtable) || cx.reach_end(r) <= w {
                continue;
            }
            // In-memory state: the same lock's place, and not a cache fill (an `insert(k, v)`
            // of a freshly computed value, the same whichever racer wins).
            if (effect.in_memory || read.in_memory)
                && (read.via.is_some() && !own_accessor(cx, read, wtable)
                    || wtable.is_none()
                    || read.table.as_deref() != wtable
                    || is_fill(cx, w, r))
            {
                continue;
            }
            let Some(c) = deciding_check(cx, r, w) else {
                continue;
            };
            if super::only_skips_unchanged(cx, r, w) {
                continue;
            }
            if callee_retests(cx, w, r, effect.via)
                || cx.held_across(r, w)
                || rechecked_under_held_lock(cx, r, w, wtable)
                || effect.in_memory
                    && read.via.is_none()
                    && looked_up_again(cx, w)
                    && super::presence_test(cx, c, r)
            {
                continue;
            }
            if !reported.first(r) {
                return Verdict::Reported;
            }
            let mut d = cx.diag(
                &super::RULE,
                w,
                format!(
                    "state read before the {} is written under it without a re-read",
                    kind_word(plabel)
                ),
            );
            d.primary_label = Some("written here without re-reading".into());
            d.labels.push(cx.label(r, "state read here"));
            d.labels.push(cx.label(c, "checked here"));
            d.labels.push(cx.label(p, plabel));
            d.help = Some(format!(
                "re-read the state after the {} and verify it (or `SELECT .. FOR UPDATE`, or a conditional `UPDATE .. WHERE status = ..` with the rows affected checked); `#[staleguard::fenced(..)]` generates this shape",
                kind_word(plabel)
            ));
            d.notes.extend(cx.chain_notes(read));
            d.notes.extend(cx.chain_notes(effect));
            return Verdict::Stale(Box::new(d));
        }
    }
    Verdict::Clean
}

/// Was the state read at `r` read again, and the new value used, after `r` and under an
/// exclusive lock still held at the write `w` (the double-checked form across two locks: look,
/// take the connect lock, look again, then take the slot's own lock to store)? The write then
/// acts on what was read under the lock that serialises the writers, not on the first look.
fn rechecked_under_held_lock(cx: &RuleCx<'_>, r: u32, w: u32, wtable: Option<&str>) -> bool {
    (r + 1..w).any(|r2| {
        !cx.detached(r2)
            && cx.effs(r2).any(|e| {
                e.kind == EffectKind::Read && query::same_state(e.table.as_deref(), wtable)
            })
            && query::result_used(cx.body, r2)
            && cx.held_across(r2, w)
    })
}

/// Is the write a keyed lookup under the lock that hands out the entry as it is now
/// (`if let Some(job) = jobs.get_mut(&id) { .. }`), its answer tested for presence? When the
/// look before the lock only asked whether the entry was there (`contains_key`), the write acts
/// on the entry found again under the lock, or on nothing: the presence is re-read. (A crate
/// helper's answer may be a value of the entry: `is_banned(id)` is not presence.)
fn looked_up_again(cx: &RuleCx<'_>, w: u32) -> bool {
    let events = &cx.body.events;
    let EventKind::Call(call) = &events[w as usize].kind else {
        return false;
    };
    if call.steps.last().is_none_or(|s| s.name != "get_mut") {
        return false;
    }
    events[w as usize + 1..].iter().take(2).any(|e| {
        matches!(&e.kind, EventKind::Cond(t) if t.calls.contains(&w)
            && t.pats.iter().flatten().any(|v| v == "Some" || v == "None"))
    })
}

/// Is the state tested again through the guard the lock at `p` returned, before the write at
/// `w` (`let mut g = slot.write().await; if let Some(c) = g.as_ref() { return .. }`, or handed
/// to a check: `if let Some(v) = self.validate(g.as_ref())`)? The double-checked form: what was
/// read before the lock is looked at again under it.
fn tested_through_guard(cx: &RuleCx<'_>, p: u32, w: u32) -> bool {
    let events = &cx.body.events;
    let guards: Vec<&str> = events[p as usize..w as usize]
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Bind(b) if b.calls.contains(&p) => Some(b.names.iter()),
            _ => None,
        })
        .flatten()
        .map(|n| n.as_str())
        .collect();
    if guards.is_empty() {
        return false;
    }
    let on_guard = |d: &str| guards.contains(&query::first(d));
    // A field of the guarded value (`g.stage`), or the guarded `Option` matched (`if let
    // Some(c) = g.as_ref()`); a lock claim's own answer tested (`if !got`) is not the state.
    let optional = |t: &crate::ir::Test| {
        t.values
            .iter()
            .chain(t.pats.iter().flatten())
            .any(|v| v == "Some" || v == "None")
    };
    events[p as usize + 1..w as usize]
        .iter()
        .any(|e| match &e.kind {
            EventKind::Cond(t) => {
                t.deps
                    .iter()
                    .any(|d| on_guard(d) && (d.contains('.') || optional(t)))
                    || t.calls.iter().any(|&k| {
                        matches!(&events[k as usize].kind, EventKind::Call(c)
                        if c.recv.first().is_some_and(|r| on_guard(r))
                            || c.all_args().any(|a| a.paths.iter().any(|x| on_guard(x))))
                    })
            }
            _ => false,
        })
}

/// The write is a crate method called on the guard (`holder.write().await.commit_stage(key)`)
/// that itself tests the state the stale read fetched: the read's getter or field
/// (`holder.read().await.stage()`) is tested again in the method (`if self.stage >= ..`,
/// `match self.stage()`), so the check is repeated under the lock. A method that tests
/// something else (`if let Some(n) = self.counts.get_mut(k)`) does not count.
pub(super) fn callee_retests(cx: &RuleCx<'_>, w: u32, r: u32, via: Option<BodyId>) -> bool {
    let EventKind::Call(read) = &cx.body.events[r as usize].kind else {
        return false;
    };
    let Some(got) = read
        .steps
        .last()
        .map(|s| s.name.trim_start_matches('.'))
        .filter(|n| !n.is_empty())
    else {
        return false;
    };
    // The method run on the guard: the callee the write came through, the resolved callees, or,
    // when the guard's target type is unknown, the crate's `&mut self` methods of that name.
    let by_name: Vec<BodyId>;
    let callees: &[crate::facts::BodyId] = match &via {
        Some(c) => std::slice::from_ref(c),
        None if !cx.callees(w).is_empty() => cx.callees(w),
        None => {
            let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
                return false;
            };
            let Some(method) = call.steps.last() else {
                return false;
            };
            by_name = cx
                .krate
                .facts
                .methods_named
                .get(method.name.as_str())
                .into_iter()
                .flatten()
                .copied()
                .filter(|c| *c != cx.id && cx.krate.facts.mut_self.contains(c))
                .collect();
            &by_name
        }
    };
    callees.iter().any(|&c| {
        let body = cx.krate.body(c);
        body.self_ty.is_some()
            && body.events.iter().any(|e| {
                let EventKind::Cond(t) = &e.kind else {
                    return false;
                };
                let (deps, calls) = (&t.deps, &t.calls);
                deps.iter().any(|d| {
                    d.strip_prefix("self.")
                        .and_then(|f| f.split('.').next())
                        .is_some_and(|f| f == got)
                }) || calls.iter().any(|&i| {
                    matches!(&body.events.get(i as usize).map(|e| &e.kind),
                        Some(EventKind::Call(call)) if call.recv.first().is_some_and(|x| x == "self")
                            && call.steps.iter().any(|s| s.name == got))
                })
            })
    })
}

pub(super) fn kind_word(label: &str) -> &'static str {
    if label.starts_with("transaction") {
        "transaction"
    } else {
        "lock"
    }
}

/// A read through a method of the same type that reads the same `self.` place itself (a getter
/// like `self.balance_of(user)` taking and dropping the read guard): the place is the one the
/// caller writes, not a lookalike reached through a long chain.
pub(super) fn own_accessor(
    cx: &RuleCx<'_>,
    read: &crate::effects::Effect,
    wtable: Option<&str>,
) -> bool {
    let (Some(c), Some(t)) = (read.via, wtable) else {
        return false;
    };
    if !t.starts_with("self.") || read.table.as_deref() != Some(t) {
        return false;
    }
    let callee = cx.krate.body(c);
    callee.self_ty.is_some()
        && callee.self_ty == cx.body.self_ty
        && cx.krate.summary(c).is_some_and(|s| {
            s.effects.iter().any(|e| {
                e.effect.kind == EffectKind::Read
                    && e.callee.is_none()
                    && e.effect.table.as_deref() == Some(t)
            })
        })
}

/// `map.insert(key, value)` (an LRU's `put`) where the value does not come from the read:
/// filling a cache.
pub(super) fn is_fill(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    match &cx.body.events[w as usize].kind {
        EventKind::Call(c) => {
            c.steps
                .last()
                .is_some_and(|s| matches!(s.name.as_str(), "insert" | "put") && s.args.len() == 2)
                && !query::depends_on(cx.body, w, r)
        }
        _ => false,
    }
}
