//! `timeout-without-operation-id`: a delayed task or timer whose payload carries a resource id
//! but no operation identity, and whose action writes state without comparing one (ABA).

use super::RuleCx;
use crate::apis::QUEUE_POLL_STEPS;
use crate::diagnostic::Diagnostic;
use crate::effects::{AssignedValue, Effect, EffectKind, Effects};
use crate::facts::BodyId;
use crate::fxhash::FxHashSet;
use crate::ir::{EventKind, Region};
use crate::kb::names::{
    is_operation_identity, is_progress_flag, is_resource_id, is_state_column, is_time_column,
};
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a delayed task — a spawned task that sleeps (in its own body, or through a crate
    /// helper that only waits: a helper that works and pauses inside, a throttled batch, is the
    /// action started at once), a `DelayQueue` entry, a delayed job —
    /// whose payload (captured variables, or the job struct's fields, resolved across files)
    /// names the resource (`seat_id`) but not the operation that scheduled it (reservation,
    /// attempt, generation, version, lease, token, operation id), and whose action moves the
    /// record without comparing such an identity: it sets a state column or a column to a
    /// constant (`status = 'free'`, `locked = false`, `held_by = NULL`), or deletes the row by
    /// its key. An action that only appends a row, calls out or fills a cache undoes nothing a
    /// newer operation decided.
    ///
    /// Also flags a sweep acting on a snapshot: rows selected by state (a read of many rows —
    /// `fetch_all`, `.all(db)`, a crate helper declared to return a `Vec` — filtered beyond the
    /// key: `WHERE status = 'active' AND ends_at < now()`), then written one by one by the ids
    /// it returned, with no predicate of their own, after a wait — the sweep's own tick inside
    /// its loop, a sleep, or a remote call made since the selection (a mail, a provider call):
    /// each row's state may have changed since it was selected. Not when the write sits in a
    /// branch of what a remote call made since the selection answered about those rows
    /// (`match mint.are_spent(&proofs).await { Ok(true) => mark_spent(&ids) }`): the state was
    /// asked again of the side that holds it, and the write records the answer — unless it
    /// saves back a copy of a row as read. Nor when the write only stamps times (`SET
    /// reminded_at = now()`): it records when the sweep passed.
    ///
    /// ### Why is this bad?
    ///
    /// A timeout is a message from the past. By the time it fires the resource may belong to a
    /// new round:
    ///
    /// ```text
    /// t0   user A reserves seat 7; a 10-minute "release seat 7" timer is scheduled
    /// t5   user A cancels; user B reserves seat 7
    /// t10  the timer fires: UPDATE seats SET status = 'free' WHERE id = 7
    ///      <- user B's live reservation is released (ABA)
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(HOLD).await;
    ///     sqlx::query("UPDATE seats SET status = 'free' WHERE id = $1").bind(seat_id).execute(&pool).await
    /// });
    /// ```
    ///
    /// ### Use instead
    ///
    /// Carry the operation identity in the payload and compare it when the timer fires, in Rust
    /// or in the write's `WHERE`:
    ///
    /// ```rust,ignore
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(HOLD).await;
    ///     sqlx::query("UPDATE seats SET status = 'free' WHERE id = $1 AND reservation_id = $2")
    ///         .bind(seat_id).bind(reservation_id).execute(&pool).await
    /// });
    /// ```
    ///
    /// `#[staleguard::fenced(..)]` on the timer's handler generates the lock → re-read → verify
    /// identity sequence.
    ///
    /// ### Known problems
    ///
    /// Identities are recognised by name (`reservation_id`, `attempt`, `generation`, `version`,
    /// `lease`, `token`, ..). A sweep is recognised only when the selection, the wait and the
    /// write are in one function (or its helpers): a snapshot handed to another function that
    /// writes it is not followed, nor a write whose only wait is other database work. A
    /// `DelayQueue` consumer or job handler that the crate does not define is not judged: what
    /// it does when it fires is unknown.
    pub(crate) static RULE = {
        name: "timeout-without-operation-id",
        level: Error,
        summary: "delayed task carries only the resource id and acts without checking the operation identity",
        applies: applies,
        check: check,
    };
}

/// A spawned or scheduled task, or a body that reads and writes with a wait or a remote call
/// (a sweep).
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Spawn)
        || k.has(EffectKind::Schedule)
        || (k.has(EffectKind::Sleep) || k.has(EffectKind::Remote))
            && k.has(EffectKind::Read)
            && k.has(EffectKind::Write)
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    sweeps(cx, out);
    let n = cx.body.events.len() as u32;
    for s in 0..n {
        if cx.has(s, EffectKind::Spawn) {
            spawned(cx, s, out);
        } else if let Some(eff) = cx.eff(s, EffectKind::Schedule) {
            scheduled(cx, s, eff, out);
        }
    }
}

/// What a delayed task carries.
struct Payload {
    /// Field and captured names (last path segments).
    names: Vec<Name>,
    ty: Option<Name>,
}

/// Where a delayed task's action is.
enum Action {
    /// Events `[start, end)` of this body.
    Region(u32, u32),
    /// Crate functions (job handlers, spawned helpers, queue consumers).
    Bodies(Vec<BodyId>),
}

/// The payload of a closure region: captured locals of the enclosing body (a captured local
/// holding a struct literal contributes its fields).
fn captured(cx: &RuleCx<'_>, start: u32, end: u32) -> Payload {
    let evs = &cx.body.events;
    let mut outer: Vec<&str> = cx.body.params.iter().map(|(n, _)| n.as_str()).collect();
    let mut lits: Vec<(&str, &crate::ir::StructLit)> = Vec::new();
    for ev in &evs[..start as usize] {
        if let EventKind::Bind(b) = &ev.kind {
            outer.extend(b.names.iter().map(Name::as_str));
            if let (Some(l), [n]) = (b.lit(), b.names.as_slice()) {
                lits.push((n.as_str(), l));
            }
        }
    }
    let mut inner: FxHashSet<&str> = FxHashSet::default();
    let mut used: Vec<&str> = Vec::new();
    for ev in &evs[start as usize..end as usize] {
        match &ev.kind {
            EventKind::Bind(b) => {
                used.extend(b.deps.iter().map(Name::as_str));
                inner.extend(b.names.iter().map(Name::as_str));
            }
            EventKind::Cond(t) => used.extend(t.deps.iter().map(Name::as_str)),
            EventKind::Assign(a) => used.extend(a.deps.iter().map(Name::as_str)),
            EventKind::Call(c) => {
                if let Some(r) = c.recv.first() {
                    used.push(r.as_str());
                }
                for a in c.all_args() {
                    used.extend(a.paths.iter().map(Name::as_str));
                }
            }
            _ => {}
        }
    }
    let mut payload = Payload {
        names: Vec::new(),
        ty: None,
    };
    for p in used {
        let r = query::first(p);
        if r == "self" || inner.contains(r) || !outer.contains(&r) {
            continue;
        }
        if let Some((_, l)) = lits.iter().rev().find(|(n, _)| *n == r) {
            payload.ty = Some(l.ty.clone());
            for f in &l.fields {
                push(&mut payload.names, f);
            }
        }
        push(&mut payload.names, query::last(p));
    }
    payload
}

fn push(v: &mut Vec<Name>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(Name::new(s));
    }
}

fn spawned(cx: &RuleCx<'_>, s: u32, out: &mut Vec<Diagnostic>) {
    // `tokio::spawn(async move { .. })`; a delayed closure (`run_later`) needs no sleep inside.
    let delayed = cx.eff(s, EffectKind::Spawn).is_some_and(|e| e.delayed);
    for (start, end) in cx.closures_of(s) {
        let payload = captured(cx, start, end);
        judge(cx, s, &payload, &Action::Region(start, end), !delayed, out);
    }
    let EventKind::Call(call) = &cx.body.events[s as usize].kind else {
        return;
    };
    for arg in call.all_args() {
        let Some(j) = arg.ev else { continue };
        let EventKind::Call(inner) = &cx.body.events[j as usize].kind else {
            continue;
        };
        let callees = &cx.callees(j);
        if !callees.is_empty() {
            // `tokio::spawn(worker::release_after(db, ReleaseSeat { .. }, HOLD))`
            let mut payload = Payload {
                names: Vec::new(),
                ty: None,
            };
            for a in inner.all_args() {
                if let Some(l) = a.lit() {
                    payload.ty = Some(l.ty.clone());
                    for f in &l.fields {
                        push(&mut payload.names, f);
                    }
                }
                for p in &a.paths {
                    push(&mut payload.names, query::last(p));
                }
            }
            struct_fields(cx, &mut payload);
            judge(
                cx,
                s,
                &payload,
                &Action::Bodies(callees.to_vec()),
                true,
                out,
            );
        } else if let [name] = inner.func.as_slice() {
            // `let run = move || async move { .. }; tokio::spawn(run());`
            let bind = cx.body.events[..s as usize]
                .iter()
                .rev()
                .find_map(|e| match &e.kind {
                    EventKind::Bind(b) if b.names.len() == 1 && &b.names[0] == name => Some(b),
                    _ => None,
                });
            if let Some(enter) = bind.and_then(|b| b.closure()) {
                let end = cx.region_end(enter);
                let payload = captured(cx, enter + 1, end);
                judge(cx, s, &payload, &Action::Region(enter + 1, end), true, out);
            }
        }
    }
}

/// Does crate fn `h` only wait (`async fn pause(d) { sleep(d).await }`), with no state read or
/// written and no remote call of its own?
fn waits_only(cx: &RuleCx<'_>, h: crate::facts::BodyId) -> bool {
    cx.krate.summary(h).is_some_and(|s| {
        s.effects.iter().all(|x| {
            !matches!(
                x.effect.kind,
                EffectKind::Read | EffectKind::Write | EffectKind::Remote
            )
        })
    })
}

/// Adds the fields of a payload struct defined in the crate.
fn struct_fields(cx: &RuleCx<'_>, payload: &mut Payload) {
    if let Some(t) = &payload.ty
        && let Some(fields) = cx.krate.facts.structs.get(t.as_str())
    {
        for (f, _) in fields.iter() {
            push(&mut payload.names, f);
        }
    }
}

fn scheduled(cx: &RuleCx<'_>, s: u32, eff: &Effect, out: &mut Vec<Diagnostic>) {
    let mut payload = Payload {
        names: Vec::new(),
        ty: eff.payload.as_ref().and_then(|p| p.ty.clone()),
    };
    for p in eff.payload.iter().flat_map(|p| &p.names) {
        push(&mut payload.names, query::last(p));
    }
    struct_fields(cx, &mut payload);
    let mut handlers: Vec<BodyId> = Vec::new();
    let facts = cx.krate.facts;
    if let Some(t) = &payload.ty {
        // Job handlers: methods of the payload type, or fns taking it.
        for id in facts.by_type().get(t.as_str()).into_iter().flatten() {
            if cx.krate.body(*id).params.iter().any(|(n, _)| n == "self") {
                handlers.push(*id);
            }
        }
        handlers.extend(
            facts
                .taking()
                .get(t.as_str())
                .into_iter()
                .flatten()
                .copied(),
        );
        handlers.sort();
        handlers.dedup();
    }
    if handlers.is_empty()
        && let Some(queue) = &eff.table
    {
        // A `DelayQueue` consumer: a fn of the same type (or this fn) polling the same queue.
        let parts: Vec<&str> = queue.split('.').collect();
        let owners: Vec<BodyId> = match (parts.first(), &cx.body.self_ty) {
            (Some(&"self"), Some(t)) => {
                facts.by_type().get(t.as_str()).cloned().unwrap_or_default()
            }
            _ => vec![cx.id],
        };
        for id in owners {
            let b = cx.krate.body(id);
            let polls = b.events.iter().any(|e| match &e.kind {
                EventKind::Call(c) => {
                    c.recv.iter().map(Name::as_str).eq(parts.iter().copied())
                        && c.steps
                            .iter()
                            .any(|st| QUEUE_POLL_STEPS.contains(&st.name.as_str()))
                }
                _ => false,
            });
            if polls {
                handlers.push(id);
            }
        }
    }
    judge(cx, s, &payload, &Action::Bodies(handlers), false, out);
}

/// Does the write move the record a timer speaks of: a state column set, a column set to a
/// constant (`plan = 'free'`, `locked = false`, `held_by = NULL`), or the row removed by its
/// key? That is the step a newer operation on the same resource can have taken back in the
/// meantime. A write of a cache, a log or a derived value (a comment posted, an index evicted,
/// an audit listed) moves no record: firing late changes nothing another operation decided.
fn moves_record(e: &Effect) -> bool {
    if e.kind != EffectKind::Write || e.in_memory || e.insert && !e.upsert {
        return false;
    }
    if e.delete {
        return e.filtered && !e.purge;
    }
    crate::state_writes::moved_state(e).is_some()
        || e.sets
            .iter()
            .any(|a| a.value.constant().is_some() || is_state_column(&a.column))
}

/// Decides and reports. `needs_sleep`: a spawned task is a timer only if it waits.
fn judge(
    cx: &RuleCx<'_>,
    s: u32,
    payload: &Payload,
    action: &Action,
    needs_sleep: bool,
    out: &mut Vec<Diagnostic>,
) {
    let res: Vec<&str> = payload
        .names
        .iter()
        .map(Name::as_str)
        .filter(|p| is_resource_id(p))
        .collect();
    if res.is_empty() {
        return;
    }
    let ids: Vec<&str> = payload
        .names
        .iter()
        .map(Name::as_str)
        .filter(|p| is_operation_identity(p))
        .collect();
    let mut labels = Vec::new();
    let mut notes = Vec::new();
    match action {
        Action::Region(start, end) => {
            let sleep = if needs_sleep {
                // The task's own wait (`sleep(HOLD).await` in the closure, or a crate helper
                // the closure calls to wait): a callee that also does other work and waits
                // somewhere inside (a throttled reindex, a retry's back-off) is the action, not
                // the timer.
                match (*start..*end).find(|&i| {
                    cx.effs(i).any(|e| {
                        e.kind == EffectKind::Sleep && e.via.is_none_or(|h| waits_only(cx, h))
                    })
                }) {
                    Some(s) => s,
                    None => return,
                }
            } else {
                *start
            };
            // A periodic task (the wait inside a loop) is a heartbeat or a sweep, not a timeout.
            let periodic = (*start..sleep).any(|j| {
                matches!(
                    cx.body.events[j as usize].kind,
                    EventKind::Enter(Region::Loop)
                ) && cx.region_end(j) > sleep
            });
            if periodic {
                return;
            }
            let Some(write) = (sleep..*end).find(|&i| cx.effs(i).any(moves_record)) else {
                return;
            };
            if !ids.is_empty() && region_compares(cx, *start, *end, &ids)
                || (*start..*end).any(|i| references_payload(cx.effs(i), &payload.names))
            {
                return;
            }
            labels.push(cx.label(sleep, "waits here"));
            labels.push(cx.label(write, "writes state here when it fires"));
            if let Some(w) = cx.eff(write, EffectKind::Write) {
                notes.extend(cx.chain_notes(w));
            }
        }
        Action::Bodies(bodies) => {
            let writers: Vec<BodyId> = bodies
                .iter()
                .copied()
                .filter(|b| cx.krate.effects_of(*b).any_order().any(moves_record))
                .collect();
            if needs_sleep
                && !bodies.iter().any(|b| {
                    cx.krate
                        .summary(*b)
                        .is_some_and(|s| s.has(EffectKind::Sleep))
                })
            {
                return;
            }
            // No action in the crate (what it would do is unknown), or none that moves a record.
            if writers.is_empty() {
                return;
            }
            if !ids.is_empty() && writers.iter().any(|b| body_compares(cx, *b, &ids)) {
                return;
            }
            let referenced = writers
                .iter()
                .any(|b| references_payload(cx.krate.effects_of(*b).all(), &payload.names));
            if referenced {
                return;
            }
            let b = cx.krate.body(writers[0]);
            notes.push(format!(
                "`{}` runs when it fires and writes state ({}:{})",
                b.name(),
                cx.krate.paths[writers[0].file as usize],
                b.sp.line
            ));
        }
    }
    let mut d = cx.diag(
        &RULE,
        s,
        "delayed task carries the resource id but acts without checking the operation identity"
            .to_string(),
    );
    d.primary_label = Some("delayed task scheduled here".to_string());
    d.labels = labels;
    let what = match &payload.ty {
        Some(t) => format!("the payload `{t}` carries"),
        None => "the task captures".to_string(),
    };
    if ids.is_empty() {
        d.notes.push(format!(
            "{what} `{}` but no reservation / attempt / generation / version id",
            res.join("`, `")
        ));
    } else {
        d.notes.push(format!(
            "{what} `{}` but the action never compares it",
            ids.join("`, `")
        ));
    }
    d.notes.extend(notes);
    d.help = Some(help());
    out.push(d);
}

/// Is one of `ids` compared in events `[start, end)`: tested, or passed to a write or a helper?
fn region_compares(cx: &RuleCx<'_>, start: u32, end: u32, ids: &[&str]) -> bool {
    (start..end).any(|i| events_compare(cx.body, cx.effects(), i, ids))
}

fn body_compares(cx: &RuleCx<'_>, id: BodyId, ids: &[&str]) -> bool {
    let body = cx.krate.body(id);
    let effects = cx.krate.effects_of(id);
    (0..body.events.len() as u32).any(|i| events_compare(body, effects, i, ids))
}

fn events_compare(body: &crate::ir::Body, effects: Effects<'_>, i: u32, ids: &[&str]) -> bool {
    let named = |p: &Name| ids.contains(&query::last(p));
    match &body.events[i as usize].kind {
        EventKind::Cond(t) => t.deps.iter().any(named),
        EventKind::Call(c) => {
            let passes =
                c.all_args().any(|a| a.paths.iter().any(named)) || c.recv.iter().any(named);
            passes
                && (effects.at(i).any(|e| {
                    matches!(
                        e.kind,
                        EffectKind::Write | EffectKind::Read | EffectKind::Claim
                    )
                }) || !effects.callees(i).is_empty())
                || effects.at(i).any(|e| e.ident_guard)
        }
        _ => false,
    }
}

fn help() -> String {
    "carry the operation identity (reservation / attempt / generation id) in the payload and compare it when the timer fires, in code or in the write's `WHERE`; `#[staleguard::fenced(..)]` generates the re-read and check".to_string()
}

/// A write filtered on a column that *refers to* a payload id (`open_invoice_id = $2` for the
/// payload's `invoice_id`): the operation's identity is compared even without an identity word.
/// A column equal to the payload name (`seat_id = $1`) is the row key, not an identity.
fn references_payload<'e>(effs: impl IntoIterator<Item = &'e Effect>, payload: &[Name]) -> bool {
    effs.into_iter()
        .filter(|e| e.kind == EffectKind::Write)
        .any(|e| {
            e.where_cols.iter().any(|c| {
                payload
                    .iter()
                    .any(|p| is_resource_id(p) && c != p && c.ends_with(&format!("_{p}")))
            })
        })
}

/// A periodic sweep: a loop that waits for a tick, selects rows by their state
/// (`WHERE status = 'held' AND expires_at < now()`), then writes each one by id alone. A row
/// confirmed between the SELECT and the write is overwritten.
fn sweeps(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let n = cx.body.events.len() as u32;
    let mut reported: Vec<u32> = Vec::new();
    for l in 0..n {
        if !matches!(
            cx.body.events[l as usize].kind,
            EventKind::Enter(Region::Loop)
        ) {
            continue;
        }
        let end = cx.region_end(l);
        let Some(tick) = (l + 1..end).find(|&i| cx.has(i, EffectKind::Sleep)) else {
            continue;
        };
        for r in tick + 1..end {
            if let Some(w) = snapshot_write(cx, r, end, |_, _| true) {
                reported.push(r);
                out.push(sweep_report(
                    cx,
                    w,
                    r,
                    tick,
                    "waits for the tick here",
                    "sweep writes rows selected at tick start without re-checking the state it selected on",
                ));
                break;
            }
        }
    }
    // The same sweep whose tick is elsewhere (a scheduler runs it, a caller loops): rows
    // selected by state, then written by id one at a time after a remote call or a sleep
    // made since the selection, so the snapshot is older with every row.
    for r in 0..n {
        if reported.contains(&r)
            || !many_rows(cx, r)
            || cx
                .effs(r)
                .any(|e| e.kind == EffectKind::Read && e.in_memory)
        {
            continue;
        }
        let slow = |from: u32, to: u32| {
            (from + 1..to).find(|&g| {
                cx.has(g, EffectKind::Sleep)
                    || cx
                        .effs(g)
                        .any(|e| e.kind == EffectKind::Remote && !e.by_name)
            })
        };
        // In a loop, what runs after the write in one pass runs before it in the next.
        let gap = std::cell::Cell::new(None);
        let found = snapshot_write(cx, r, n, |r, w| {
            let until = enclosing_loop_end(cx, r, w).unwrap_or(w);
            match slow(r, until) {
                Some(g) => {
                    gap.set(Some(g));
                    true
                }
                None => false,
            }
        });
        if let (Some(w), Some(g)) = (found, gap.get()) {
            out.push(sweep_report(
                cx,
                w,
                r,
                g,
                "the rows selected wait here (a remote call or a sleep) before the write",
                "rows selected by state are written by id after a wait, without re-checking the state they were selected on",
            ));
        }
    }
}

/// The first write after the read at `r` (and before `end`) of rows that read selected by
/// state: a persisted read filtered beyond the key (the selection predicate), not locking, and
/// a write of the same table by values the read returned (an id), with no predicate of its
/// own, not an insert, for which `gap(r, w)` holds.
fn snapshot_write(
    cx: &RuleCx<'_>,
    r: u32,
    end: u32,
    gap: impl Fn(u32, u32) -> bool,
) -> Option<u32> {
    let read = cx.eff(r, EffectKind::Read)?;
    // Selected by state: a filter beyond the key, or one on a state, flag or time column.
    let by_state = read.conditional
        || read
            .where_cols
            .iter()
            .any(|c| is_state_column(c) || is_progress_flag(c) || is_time_column(c));
    if !by_state || read.locking || read.table.is_none() {
        return None;
    }
    if !cx.state(r).txs.is_empty() && cx.serializable(0, end) {
        return None;
    }
    let derived = query::derived(cx.body, r);
    (r + 1..end).find(|&w| {
        cx.eff(w, EffectKind::Write).is_some_and(|e| {
            !e.conditional && !e.insert && !e.in_memory && e.table == read.table && !stamps_only(e)
        }) && match &cx.body.events[w as usize].kind {
            EventKind::Call(c) => {
                c.all_args()
                    .chain(c.steps.iter().flat_map(|s| s.args.iter()))
                    .any(|a| a.paths.iter().any(|p| derived.contains(query::first(p))))
                    || c.recv
                        .first()
                        .is_some_and(|root| derived.contains(root.as_str()))
            }
            _ => false,
        } && gap(r, w)
            && !recorded_answer(cx, r, w, &derived)
    })
}

/// Does the write only stamp times (`SET last_notified_at = now(), updated_at = now()`)? It
/// records when the sweep passed, and takes back nothing a newer operation decided.
fn stamps_only(e: &Effect) -> bool {
    !e.delete
        && !e.sets.is_empty()
        && e.sets
            .iter()
            .all(|a| a.value == AssignedValue::Now || is_time_column(&a.column))
}

/// Does the write at `w` sit in a branch of an answer that a remote call made since the read
/// at `r` gave about the rows it selected (`match mint.are_spent(&proofs).await { Ok(true) =>
/// mark_spent(ids) }`)? The state is checked again, with the side that holds it, and the write
/// records that answer. Not when it passes back a row of the read as it was (`let updated =
/// row.clone(); .. save(&updated)`): that writes the snapshot, whatever the answer was.
fn recorded_answer(cx: &RuleCx<'_>, r: u32, w: u32, derived: &FxHashSet<Name>) -> bool {
    let EventKind::Call(write) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let row_copy = |p: &str| {
        derived.contains(p)
            && query::binding(cx.body, w, p)
                .is_some_and(|b| b.calls.is_empty() && b.deps.iter().all(|d| !d.contains('.')))
    };
    if write
        .all_args()
        .chain(write.steps.iter().flat_map(|s| s.args.iter()))
        .any(|a| a.paths.iter().any(|p| row_copy(p)))
    {
        return false;
    }
    (r + 1..w)
        .filter(|&g| {
            cx.effs(g)
                .any(|e| e.kind == EffectKind::Remote && !e.by_name)
                && matches!(&cx.body.events[g as usize].kind, EventKind::Call(c)
                    if c.all_args()
                        .chain(c.steps.iter().flat_map(|s| s.args.iter()))
                        .any(|a| a.paths.iter().any(|p| derived.contains(query::first(p)))))
        })
        .any(|g| {
            query::tests_of(cx.body, g)
                .into_iter()
                .any(|t| t < w && cx.in_branches_of(t, w))
        })
}

/// The end of the innermost loop that holds event `w` and begins after event `r`.
fn enclosing_loop_end(cx: &RuleCx<'_>, r: u32, w: u32) -> Option<u32> {
    let mut depth = 0u32;
    for i in (r + 1..w).rev() {
        match &cx.body.events[i as usize].kind {
            EventKind::Leave => depth += 1,
            EventKind::Enter(region) if depth == 0 => {
                if matches!(region, Region::Loop) {
                    return Some(cx.region_end(i));
                }
            }
            EventKind::Enter(_) => depth -= 1,
            _ => {}
        }
    }
    None
}

/// A read of many rows (`fetch_all`, `.all(db)`, `load`): a selection, not one row's lookup.
fn many_rows(cx: &RuleCx<'_>, r: u32) -> bool {
    matches!(&cx.body.events[r as usize].kind, EventKind::Call(c)
        if c.steps.iter().any(|s| crate::apis::MANY_ROWS_STEPS.contains(&s.name.as_str())))
        || cx
            .effs(r)
            .any(|e| e.kind == EffectKind::Read && e.via.is_some() && returns_many(cx, e))
}

/// A crate helper that reads many rows (its own read is one), or declares it returns a list
/// (`-> Result<Vec<Self>, E>`).
fn returns_many(cx: &RuleCx<'_>, e: &Effect) -> bool {
    e.via.is_some_and(|h| {
        let body = cx.krate.body(h);
        body.ret
            .iter()
            .any(|t| matches!(t.as_str(), "Vec" | "VecDeque"))
            || body.events.iter().any(|ev| {
                matches!(&ev.kind, EventKind::Call(c)
            if c.steps.iter().any(|s| crate::apis::MANY_ROWS_STEPS.contains(&s.name.as_str())))
            })
    })
}

fn sweep_report(
    cx: &RuleCx<'_>,
    w: u32,
    r: u32,
    wait: u32,
    wait_label: &str,
    message: &str,
) -> Diagnostic {
    let mut d = cx.diag(&RULE, w, message.to_string());
    d.primary_label = Some("written by id alone".to_string());
    d.labels.push(cx.label(wait, wait_label));
    d.labels.push(cx.label(r, "rows selected by state here"));
    d.help = Some(
        "repeat the selection predicate in the write's `WHERE` (`.. AND status = 'held' AND expires_at < now()`) and count the rows it changed, or lock the rows with `FOR UPDATE SKIP LOCKED`".to_string(),
    );
    d
}
