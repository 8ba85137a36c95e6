//! `check-before-lock`: state read and tested before the lock / transaction / row lock, then
//! written under it without a re-read (TOCTOU); also a plain SELECT inside a transaction, a branch
//! on it, and an unguarded UPDATE of the same row.

use super::RuleCx;
use crate::apis::{MANY_ROWS_STEPS, SERIALIZABLE_STEPS};
use crate::diagnostic::Diagnostic;
use crate::effects::EffectKind;
use crate::ir::{Ev, Region};
use crate::name::Name;
use crate::query::{self, TX_PARAM};

declare_rule! {
    /// ### What it does
    ///
    /// Flags a write done under a lock, a transaction or a row lock when the state that decided
    /// the write was read and tested *before* the lock was taken and is not read again under it.
    /// Also flags a plain `SELECT` inside a transaction, a branch on its result, then an `UPDATE`
    /// of the same row that neither locks the row (`FOR UPDATE`) nor guards itself
    /// (`WHERE status = ..` with the rows affected checked). And the shape before any lock was
    /// added: one row read with no lock and no transaction, a value of it tested, and the row
    /// written back by key with a value computed from the read (a lost update).
    ///
    /// The check must decide the write: it stops the flow, the write sits in its branch, or the
    /// written value comes from the read. One stale read is reported once, at its first write.
    ///
    /// ### Why is this bad?
    ///
    /// The lock only serialises what happens *inside* it. A message that read the state before
    /// the lock decides with facts that may already be stale:
    ///
    /// ```text
    /// t0  payment callback reads order 42: status = pending
    /// t1  cancel request locks order 42, sets status = cancelled, unlocks
    /// t2  payment callback takes the lock (legally, it is free now)
    /// t3  payment callback writes status = paid      <- a cancelled order is now paid
    /// ```
    ///
    /// Under `READ COMMITTED` the same happens inside one transaction when the row is read
    /// without `FOR UPDATE`: two transactions both see `open` and both act.
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let order = sqlx::query_as::<_, Order>("SELECT * FROM orders WHERE id = $1")
    ///     .bind(id).fetch_one(&pool).await?;
    /// if order.status != "pending" { return Ok(()); }
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
    ///     .bind(id).execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Take the lock, re-read, verify, then write — or let the write carry the check:
    ///
    /// ```rust,ignore
    /// let mut tx = pool.begin().await?;
    /// let order = sqlx::query_as::<_, Order>("SELECT * FROM orders WHERE id = $1 FOR UPDATE")
    ///     .bind(id).fetch_one(&mut *tx).await?;
    /// if order.status != "pending" { return Ok(()); }
    /// sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
    ///     .bind(id).execute(&mut *tx).await?;
    /// tx.commit().await?;
    ///
    /// // or: a conditional update whose result is checked
    /// let done = sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'")
    ///     .bind(id).execute(&pool).await?;
    /// if done.rows_affected() == 0 { return Ok(Stale); }
    /// ```
    ///
    /// Or generate that shape: `#[staleguard::fenced(..)]` on the handler takes the lock,
    /// re-reads the state under it, verifies the operation identity and only then runs the body.
    ///
    /// ### Known problems
    ///
    /// The analysis is syntactic: it matches the read and the write by table (SQL text, diesel
    /// and sea-orm entity names) or by place, not by row. A re-read hidden behind a function the
    /// crate does not define is not seen; a read of a different row of the same table counts as
    /// a re-read. Test code (`#[test]`, `#[tokio::test]`, `#[cfg(test)]`) is not analysed. The
    /// no-lock form needs the written value to come from the read and a test of a read value, so
    /// a status flip decided by a stale read with no lock at all is not reported; batch passes
    /// over many rows (`.all()`, `fetch_all`, `load`) are left out of it. A method of the crate
    /// called on the write guard (`holder.write().await.advance_from(stage)`) counts as the
    /// re-read when it tests the same getter or field the caller checked (`self.stage`); the
    /// analysis does not prove that its test is the same condition.
    pub(crate) static RULE = {
        name: "check-before-lock",
        level: Error,
        summary: "state read and tested before the lock or transaction, not re-read after it",
        applies: applies,
        check: check,
    };
}

/// Every shape needs a write and a read before it, and something to be stale against: a lock,
/// a transaction, a claim, a temporary guard, or a persisted read (the no-lock form).
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Write)
        && k.has(EffectKind::Read)
        && (k.has(EffectKind::Lock)
            || k.has(EffectKind::TxBegin)
            || k.has(EffectKind::TxClosure)
            || k.has(EffectKind::Claim)
            || cx.effects().body.tx_param.is_some()
            || cx.effects().all().any(|e| {
                e.kind == EffectKind::Read && !e.in_memory
                    || e.kind == EffectKind::Write && e.temporary()
            }))
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    let n = cx.body.events.len() as u32;
    // One finding per stale read: later writes from the same read are the same bug.
    let mut reported_reads: Vec<u32> = Vec::new();
    for w in 0..n {
        if cx.detached(w) {
            continue;
        }
        let Some(write) = cx.eff(w, EffectKind::Write) else {
            continue;
        };
        // A deleted token is another rule's business; an INSERT creates a row, it does not
        // update the one that was read.
        // In-memory effects are judged only where they happen, not through helpers.
        if write.token && write.delete || write.insert || write.in_memory && write.via.is_some() {
            continue;
        }
        let checked = !query::tests_of(cx.body, w).is_empty();
        if write.conditional && checked {
            continue;
        }
        // A helper that reads and writes re-reads for itself.
        if write.via.is_some()
            && cx
                .effs(w)
                .any(|e| e.kind == EffectKind::Read && e.via == write.via)
        {
            continue;
        }
        // A method of the crate called on the guard that reads the state itself before it
        // writes (`holder.write().await.commit_stage(key)` re-checking the stage under the
        // write guard): the check is repeated under the lock.
        if write.via.is_none()
            && cx
                .callees(w)
                .iter()
                .any(|c| cx.krate.summaries.get(c).is_some_and(|s| s.reads_state()))
        {
            continue;
        }
        let st = &cx.state(w);
        let temp = write.temporary();
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
        let wtable = write.table.as_deref();
        let mut reported = false;
        // Read before the protection, tested, not re-read after it.
        for &(p, plabel) in &protections {
            if reported {
                break;
            }
            let reread = (p + usize::from(!temp) as u32..w).any(|r| {
                !cx.detached(r)
                    && cx.effs(r).any(|e| {
                        e.kind == EffectKind::Read
                            && query::same_state(e.table.as_deref(), wtable)
                            && bound_or_tested(cx, r)
                    })
            });
            if reread {
                continue;
            }
            for r in (0..p).rev() {
                if cx.detached(r) {
                    continue;
                }
                let Some(read) = cx.eff(r, EffectKind::Read) else {
                    continue;
                };
                // The read must be able to reach the write (not on a path that always returns).
                if !query::same_state(read.table.as_deref(), wtable) || cx.reach_end(r) <= w {
                    continue;
                }
                // In-memory state: the same lock's place, and not a cache fill (an `insert(k, v)`
                // of a freshly computed value, the same whichever racer wins).
                if (write.in_memory || read.in_memory)
                    && (read.via.is_some() && !own_accessor(cx, read, wtable)
                        || wtable.is_none()
                        || read.table.as_deref() != wtable
                        || is_fill(cx, w, r))
                {
                    continue;
                }
                let tests = query::tests_of(cx.body, r);
                let Some(&c) = tests
                    .iter()
                    .find(|&&c| c > r && c < w && tests_read(cx, c, r) && decides(cx, c, r, w))
                else {
                    continue;
                };
                if callee_retests(cx, w, r, write.via) {
                    continue;
                }
                if reported_reads.contains(&r) {
                    reported = true;
                    break;
                }
                reported_reads.push(r);
                let mut d = cx.diag(
                    &RULE,
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
                d.notes.extend(cx.chain_notes(write));
                out.push(d);
                reported = true;
                break;
            }
        }
        if reported {
            continue;
        }
        // No lock and no transaction at all: a persisted value read, tested and written back
        // from what was read (a lost update, the shape before any lock was added).
        if st.txs.is_empty() && st.locks.is_empty() && !temp {
            if !(write.conditional && checked)
                && let Some(d) = unprotected(cx, w, write, &mut reported_reads)
            {
                out.push(d);
            }
            continue;
        }
        // A plain SELECT inside the transaction, tested, then an unguarded write of the same row.
        let Some(tx) = st.txs.last() else { continue };
        if write.conditional && checked {
            continue;
        }
        if write.table.is_none() || write.insert {
            continue;
        }
        let from = if tx.event == TX_PARAM { 0 } else { tx.event };
        let locked = (from..w).any(|r| {
            cx.effs(r).any(|e| {
                (e.kind == EffectKind::Read && e.locking || e.kind == EffectKind::Lock)
                    && query::same_state(e.table.as_deref(), wtable)
            })
        });
        if locked || !st.locks.is_empty() || serializable(cx, from, w) {
            continue;
        }
        let first = if tx.event == TX_PARAM {
            0
        } else {
            tx.event + 1
        };
        for r in (first..w).rev() {
            if cx.detached(r) {
                continue;
            }
            let Some(read) = cx.eff(r, EffectKind::Read) else {
                continue;
            };
            // A token row is state like any other: a use count read without a row lock and
            // written back is a lost update (deleting the token is the token rule's business).
            if read.locking
                || read.table.is_none()
                || !query::same_state(read.table.as_deref(), wtable)
            {
                continue;
            }
            if !cx.state(r).locks.is_empty() {
                continue;
            }
            let tests = query::tests_of(cx.body, r);
            if tests
                .iter()
                .any(|&c| c > r && c < w && sets_compared_value(cx, c, r, w))
            {
                continue;
            }
            let Some(&c) = tests
                .iter()
                .find(|&&c| c > r && c < w && tests_read(cx, c, r) && decides(cx, c, r, w))
            else {
                continue;
            };
            if reported_reads.contains(&r) {
                break;
            }
            reported_reads.push(r);
            let mut d = cx.diag(&RULE, w, "row read inside the transaction without `FOR UPDATE` is updated from a stale check".to_string());
            d.primary_label = Some("written here without a row lock or a guard".into());
            d.labels
                .push(cx.label(r, "state read here without `FOR UPDATE`"));
            d.labels.push(cx.label(c, "checked here"));
            if tx.event == TX_PARAM {
                d.labels.push(cx.tx_param_label());
            } else {
                d.labels.push(cx.label(tx.event, "transaction begun here"));
            }
            d.help = Some(
                "read the row with `SELECT .. FOR UPDATE`, or make the write conditional (`WHERE status = ..`) and check the rows affected; `#[staleguard::fenced(..)]` generates this shape"
                    .to_string(),
            );
            out.push(d);
            break;
        }
    }
}

/// The write is a crate method called on the guard (`holder.write().await.commit_stage(key)`)
/// that itself tests the state the stale read fetched: the read's getter or field
/// (`holder.read().await.stage()`) is tested again in the method (`if self.stage >= ..`,
/// `match self.stage()`), so the check is repeated under the lock. A method that tests
/// something else (`if let Some(n) = self.counts.get_mut(k)`) does not count.
fn callee_retests(cx: &RuleCx<'_>, w: u32, r: u32, via: Option<crate::facts::BodyId>) -> bool {
    let Ev::Call(read) = &cx.body.events[r as usize].kind else {
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
    let by_name: Vec<crate::facts::BodyId>;
    let callees: &[crate::facts::BodyId] = match &via {
        Some(c) => std::slice::from_ref(c),
        None if !cx.callees(w).is_empty() => cx.callees(w),
        None => {
            let Ev::Call(call) = &cx.body.events[w as usize].kind else {
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
                let Ev::Cond(t) = &e.kind else {
                    return false;
                };
                let (deps, calls) = (&t.deps, &t.calls);
                deps.iter().any(|d| {
                    d.strip_prefix("self.")
                        .and_then(|f| f.split('.').next())
                        .is_some_and(|f| f == got)
                }) || calls.iter().any(|&i| {
                    matches!(&body.events.get(i as usize).map(|e| &e.kind),
                        Some(Ev::Call(call)) if call.recv.first().is_some_and(|x| x == "self")
                            && call.steps.iter().any(|s| s.name == got))
                })
            })
    })
}

fn kind_word(label: &str) -> &'static str {
    if label.starts_with("transaction") {
        "transaction"
    } else {
        "lock"
    }
}

/// A read whose result is used (bound or tested), so it counts as a re-read.
fn bound_or_tested(cx: &RuleCx<'_>, r: u32) -> bool {
    cx.body.events.iter().any(|e| matches!(&e.kind, Ev::Bind(b) if b.calls.contains(&r) && b.names.iter().any(|n| n != "_")))
        || !query::tests_of(cx.body, r).is_empty()
}

/// Does event `w` (a write) use a value derived from the result of call `r`?
fn depends_on(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    let derived = query::derived(cx.body, r);
    let uses = |p: &Name| derived.contains(query::first(p));
    match &cx.body.events[w as usize].kind {
        Ev::Assign(a) => a.deps.iter().any(uses),
        Ev::Call(c) => c.all_args().any(|a| a.paths.iter().any(uses)),
        _ => false,
    }
}

/// The unprotected read-modify-write: a persisted row read (no lock, no transaction), tested,
/// and written back with a value computed from the read, by key only.
fn unprotected(
    cx: &RuleCx<'_>,
    w: u32,
    write: &crate::effects::Effect,
    reported_reads: &mut Vec<u32>,
) -> Option<Diagnostic> {
    if write.in_memory || write.insert || write.delete || write.token || write.table.is_none() {
        return None;
    }
    let wtable = write.table.as_deref();
    for r in (0..w).rev() {
        if cx.detached(r) || reported_reads.contains(&r) {
            continue;
        }
        let Some(read) = cx.eff(r, EffectKind::Read) else {
            continue;
        };
        let st = &cx.state(r);
        if read.in_memory
            || read.locking
            || read.table.as_deref() != wtable
            || !st.txs.is_empty()
            || !st.locks.is_empty()
            || cx.reach_end(r) <= w
            || many_rows(cx, r)
            || !writes_from(cx, w, r)
        {
            continue;
        }
        // The test looks at a value read (`balance < amount`, `flight.seats_left == 0`), not
        // only at whether the row exists (`let Some(row) = find(..) else { return 404 }`).
        let derived = query::derived(cx.body, r);
        let tests = query::tests_of(cx.body, r);
        let Some(&c) = tests.iter().find(|&&c| {
            c > r
                && c < w
                && tests_read(cx, c, r)
                && matches!(&cx.body.events[c as usize].kind, Ev::Cond(t)
                    if t.deps.iter().any(|d| derived.contains(query::first(d))))
        }) else {
            continue;
        };
        // Re-read between the test and the write: the later read is the one that counts.
        if (r + 1..w).any(|x| {
            cx.effs(x)
                .any(|e| e.kind == EffectKind::Read && e.table.as_deref() == wtable)
        }) {
            return None;
        }
        reported_reads.push(r);
        let mut d = cx.diag(
            &RULE,
            w,
            "state read and tested, then written back from the stale value without a lock"
                .to_string(),
        );
        d.primary_label = Some("written here from the value read before".into());
        d.labels.push(cx.label(r, "state read here"));
        d.labels.push(cx.label(c, "checked here"));
        d.help = Some(
            "take a row lock (`SELECT .. FOR UPDATE` in a transaction) and re-read, or make the write conditional (`UPDATE .. SET x = x - $1 WHERE id = $2 AND x >= $1`) and check the rows affected; `#[staleguard::fenced(..)]` generates this shape"
                .to_string(),
        );
        d.notes.extend(cx.chain_notes(read));
        d.notes.extend(cx.chain_notes(write));
        return Some(d);
    }
    None
}

/// A read of many rows (`.all(db)`, `fetch_all`, `load`): a batch rewrite (a migration, a
/// re-encryption pass) walking a snapshot, not one row's read-modify-write.
fn many_rows(cx: &RuleCx<'_>, r: u32) -> bool {
    matches!(&cx.body.events[r as usize].kind, Ev::Call(c)
        if c.steps.iter().any(|s| MANY_ROWS_STEPS.contains(&s.name.as_str())))
}

/// Is the value written at `w` computed from the read at `r` (its arguments, or its receiver:
/// an ORM model converted from the row read)?
fn writes_from(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    if depends_on(cx, w, r) {
        return true;
    }
    // `model.seats_left = Set(left - 1); model.update(db)`: an ORM model whose assigned field
    // comes from the read (fields left unset are not written).
    let derived = query::derived(cx.body, r);
    let Ev::Call(c) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let Some(root) = c.recv.first() else {
        return false;
    };
    cx.body.events[r as usize..w as usize].iter().any(|e| {
        matches!(&e.kind, Ev::Assign(a)
            if query::first(&a.target) == root.as_str()
                && a.deps.iter().any(|d| query::first(d) != root.as_str() && derived.contains(query::first(d))))
    })
}

/// A read through a method of the same type that reads the same `self.` place itself (a getter
/// like `self.balance_of(user)` taking and dropping the read guard): the place is the one the
/// caller writes, not a lookalike reached through a long chain.
fn own_accessor(cx: &RuleCx<'_>, read: &crate::effects::Effect, wtable: Option<&str>) -> bool {
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

/// `if row.yanked != wanted { model.yanked = Set(wanted); model.update(..) }`: the test only
/// skips a write that would change nothing, and the write sets the very value it was compared
/// with (not one computed from the read). Racing writers both store the wanted value; the test
/// adds no stale decision.
fn sets_compared_value(cx: &RuleCx<'_>, c: u32, r: u32, w: u32) -> bool {
    let Ev::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let deps = &t.deps;
    let derived = query::derived(cx.body, r);
    let wanted: Vec<&Name> = deps
        .iter()
        .filter(|d| !derived.contains(query::first(d)))
        .collect();
    if wanted.is_empty() || depends_on(cx, w, r) {
        return false;
    }
    let Ev::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let in_args = |v: &Name| call.all_args().any(|a| a.paths.iter().any(|p| p == v));
    let root = call.recv.first().map(Name::as_str);
    let assigned = |v: &Name| {
        cx.body.events[c as usize..w as usize].iter().any(|e| {
            matches!(&e.kind, Ev::Assign(a)
                if Some(query::first(&a.target)) == root
                    && a.deps.iter().all(|d| !derived.contains(query::first(d)) || query::first(d) == query::first(&a.target))
                    && a.deps.contains(v))
        })
    };
    wanted.iter().all(|v| in_args(v) || assigned(v))
}

/// Does the condition at `c` look at the value read at `r` itself? Not when the read value only
/// goes into an awaited call whose answer is what the condition tests
/// (`match authorize(.., session_id, ..).await`, `if let Ok(dns) = discover(&config).await`):
/// that answer is fresh, not the state read before.
fn tests_read(cx: &RuleCx<'_>, c: u32, r: u32) -> bool {
    let Ev::Cond(t) = &cx.body.events[c as usize].kind else {
        return true;
    };
    let (deps, calls) = (&t.deps, &t.calls);
    if calls.contains(&r) {
        return true;
    }
    let derived = query::derived(cx.body, r);
    let asked: Vec<&str> = calls
        .iter()
        .filter_map(|&k| match &cx.body.events[k as usize].kind {
            Ev::Call(call) if call.awaited() => Some(call),
            _ => None,
        })
        .flat_map(|call| {
            call.all_args()
                .flat_map(|a| a.paths.iter().map(|p| query::first(p)))
        })
        .collect();
    deps.iter().any(|d| {
        let root = query::first(d);
        derived.contains(root) && !asked.contains(&root)
    }) || deps.is_empty()
}

/// Does the check at `c` (on the read at `r`) decide the write at `w`? The write's value comes
/// from the read; or the check stops the flow (an assertion, `?`, `let else`, a branch that
/// returns or breaks between them); or the write sits in a branch opened by the check, or uses
/// a local assigned in one. A `match` whose arms all fall through to the same write (logging the
/// error, say) does not make the write depend on what was read.
fn decides(cx: &RuleCx<'_>, c: u32, r: u32, w: u32) -> bool {
    if depends_on(cx, w, r) {
        return true;
    }
    let events = &cx.body.events;
    // The event after the test (past the sub-tests of the same condition) opens its branch;
    // anything else is an assertion or a `?` that stops the flow.
    let after = events[c as usize + 1..]
        .iter()
        .find(|e| !matches!(e.kind, Ev::Cond(_)));
    if !matches!(
        after.map(|e| &e.kind),
        Some(Ev::Enter(Region::Branch { .. }))
    ) {
        return true;
    }
    let mut depth = 0i32;
    let mut assigned: Vec<&str> = Vec::new();
    for ev in &events[c as usize + 1..w as usize] {
        match &ev.kind {
            Ev::Enter(Region::Branch { diverges: true }) | Ev::Exit => return true,
            Ev::Enter(_) => depth += 1,
            Ev::Leave => depth = (depth - 1).max(0),
            Ev::Assign(a) if depth > 0 => assigned.push(query::first(&a.target)),
            _ => {}
        }
    }
    if depth > 0 {
        return true;
    }
    let uses = |p: &Name| assigned.contains(&query::first(p));
    match &events[w as usize].kind {
        Ev::Assign(a) => a.deps.iter().any(uses),
        Ev::Call(call) => {
            call.all_args().any(|a| a.paths.iter().any(uses)) || call.recv.first().is_some_and(uses)
        }
        _ => false,
    }
}

/// Is the transaction `SERIALIZABLE` (`SET TRANSACTION ..`, `BEGIN ISOLATION LEVEL ..`,
/// diesel's `.serializable()`)? Conflicting transactions then abort instead of racing.
fn serializable(cx: &RuleCx<'_>, from: u32, to: u32) -> bool {
    (from..to).any(|i| match &cx.body.events[i as usize].kind {
        Ev::Call(c) => {
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

/// `map.insert(key, value)` where the value does not come from the read: filling a cache.
fn is_fill(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    match &cx.body.events[w as usize].kind {
        Ev::Call(c) => {
            c.steps
                .last()
                .is_some_and(|s| s.name == "insert" && s.args.len() == 2)
                && !depends_on(cx, w, r)
        }
        _ => false,
    }
}
