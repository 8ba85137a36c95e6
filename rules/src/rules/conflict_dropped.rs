//! `conflict-dropped`: a message handler that meets a conflict (a lock held by someone else)
//! and answers as if it had done its work, with no durable retry.

use super::RuleCx;
use crate::apis::{ACK_STEPS, RETRY_STEPS};
use crate::diagnostic::Diagnostic;
use crate::effects::{AssignedValue, Effect, EffectKind};
use crate::handlers::Evidence;
use crate::ir::{EventKind, Region};
use crate::kb::names::{is_done_value, is_state_column, is_work};
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a message handler (a webhook or callback route, a broker or queue consumer, a job;
    /// see `blind-callback-write`) where a lock attempt fails — `try_lock` / `try_acquire`
    /// returns nothing, a Redis `SET lock:.. NX` returns false, `pg_try_advisory_lock` returns
    /// false — and the branch that takes that outcome neither fails (an `Err`, `?`, a 409 /
    /// 503, a panic) nor leaves a durable way back: no nack or requeue, no job scheduled again,
    /// no failed or retry state written, no message to the sender. The handler then answers as
    /// if the work was done (`Ok(())`, a 200, an ack of the message), and the work is lost.
    ///
    /// Also flags, in any function, the work itself failing and the work item consumed anyway:
    /// a remote call that does the work (an HTTP request that changes something, a message
    /// sent, a crate helper that makes one) fails, the branch that takes the failure only logs
    /// it and goes on, and the flow then consumes the item — an ack of the message, or a delete
    /// (or a write of a done state: `completed`, `sent`, ..) of the row of a work table (jobs,
    /// tasks, a queue, an outbox, deliveries, notifications) that the function read or claimed
    /// before the call, keyed by what that read returned. The same when the work is the
    /// message's handling written to a database (the first durable write at the body's top
    /// level: `UPDATE orders SET status = 'shipped' ..` for a delivery) and the flow then acks
    /// the message.
    ///
    /// And, in a webhook route or a queue consumer (where the answer is the acknowledgement:
    /// the sender does not deliver a message answered 200 again, a consumer's return acks the
    /// job), the handling of the message failing and the failure only logged: the first call
    /// at the body's top level (in a function that takes messages from a subscription in a
    /// loop, or from a broker consumer it is handed, known by its type: rdkafka's
    /// `StreamConsumer`, at the top level of that loop) that writes or calls another service
    /// is the handling (with no such call at that level, the first awaited call at any depth —
    /// an arm of a match over the message or its kind, a task the route spawns before it
    /// answers — that is handed the message or what was decoded from it, a parameter the
    /// framework fills from a route's request body included, and reaches a store or another
    /// service; when its failure is also followed by the ack, the ack's finding below is the
    /// one), and the
    /// branch that takes its `Err` neither fails (an `Err`, an error status, also built by a
    /// snake-case builder such as `internal_error(..)`) nor records or requeues, nor makes its
    /// answer from the error (`(status_for(&e), "rejected")`: the sender is told). The same
    /// when the handling's `Result` is thrown away — `let _ = handle(msg).await`, `.ok()`,
    /// `.unwrap_or(())`, `.unwrap_or_else(|e| warn!(..))` — and nothing durable follows it (a
    /// raw copy of the event written best effort before the real handling is not the handling).
    ///
    /// It stays silent when the branch returns an error or an error status, requeues or
    /// reschedules (`nack`, `requeue`, `retry`, `schedule`, an insert into a queue), records
    /// the failure (a write in the branch: a failed state, a dead letter, an outbox row), or
    /// tells the sender (a remote call in the branch); for an atomic claim of a message
    /// identity (a `SET NX` of a key that is not a lock: a duplicate is meant to be dropped);
    /// and outside message handlers (a periodic tick tries again on its next run).
    ///
    /// ### Why is this bad?
    ///
    /// Safety and liveness are separate questions. Refusing to act under contention keeps the
    /// record safe; answering "done" loses the action for ever, because nobody will send the
    /// message again:
    ///
    /// ```text
    /// t0  the "refund approved" job starts, tries lock:order:42: held by the nightly export
    /// t1  the job logs "busy" and returns Ok(()) -> the queue deletes the job
    /// t2  the export ends; nothing ever refunds order 42
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let got: bool = con.set_nx(format!("lock:order:{id}"), me).await?;
    /// if !got {
    ///     tracing::info!("order {id} is busy, skipping");
    ///     return Ok(());
    /// }
    /// ```
    ///
    /// ### Use instead
    ///
    /// Give the message back, or record it for a retry: return an error the queue retries with
    /// back-off (or `nack` / requeue it), answer 409 / 503 to a caller that retries by
    /// contract, or write the failure durably (a `retry_at`, an outbox row a sweeper retries,
    /// a dead letter). Keep refusing to act (that is the safety half).
    ///
    /// ### Known problems
    ///
    /// A failed handling that is only logged is reported only when the function itself then
    /// consumes the work item (the ack, the delete or the done state in the same function):
    /// a handler that returns `Ok` and leaves the ack to its framework (a job runner that
    /// deletes the job on `Ok`, an HTTP 200) is not, because without seeing the ack the
    /// analyzer cannot tell it from a best-effort call (a metric, a courtesy e-mail). A remote
    /// client known only by its name (`self.gateway`) does not count as the work. Serialization
    /// failures (40001) and failed optimistic checks are not reported. A durable retry outside the handler — a periodic
    /// job that re-derives the work from the database — is not seen. Handlers are recognised
    /// as `blind-callback-write` recognises them.
    pub(crate) static RULE = {
        name: "conflict-dropped",
        level: Warning,
        summary: "lock contention or a failed remote call answered as done (Ok, an ack, the job deleted) with no durable retry",
        applies: applies,
        check: check,
    };
}

/// A lock taken or claimed, a remote call (whose failure may be swallowed), or a write (a
/// handler's handling).
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Claim)
        || k.has(EffectKind::Lock)
        || k.has(EffectKind::Remote)
        || k.has(EffectKind::Write)
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    // The message's handling, found once for both forms that judge it.
    let handled = handling(cx);
    let consumed = swallowed_then_consumed(cx, handled, out);
    let Some(handler) = cx.message_handler() else {
        return;
    };
    match handler {
        Evidence::Routed(_) | Evidence::Consumer | Evidence::Subscribed => {
            // A handling already reported with the ack that follows its failure is one finding.
            let handling = handled
                .or_else(|| handed_message(cx))
                .filter(|(r, _)| !consumed.contains(r));
            handling_swallowed(cx, handling, out)
        }
        _ => {}
    }
    for r in 0..cx.body.events.len() as u32 {
        let Some(e) = lock_attempt(cx, r) else {
            continue;
        };
        let dropped = failure_branch(cx, r, |b| drops(cx, b));
        if let Some(b) = dropped {
            out.push(report(cx, r, b, e));
        }
    }
}

/// The lock attempt event `r` makes, which may find the lock held: a Redis lock claim, a
/// `try_lock` / `try_acquire`, a `pg_try_advisory_lock`. (A failed handling swallowed — `if let
/// Err(e) = handle(msg).await { warn!(..) }` — is the other half of the hazard, reported where
/// the answer is the acknowledgement: `handling_swallowed`.)
fn lock_attempt<'a>(cx: &RuleCx<'a>, r: u32) -> Option<&'a Effect> {
    cx.effs(r)
        .find(|e| e.attempt && matches!(e.kind, EffectKind::Lock | EffectKind::Claim))
}

/// Does the call acknowledge a message (`ack`, `basic_ack`, `commit_message`, ..)?
fn acks(call: &crate::ir::Call) -> bool {
    call.steps
        .iter()
        .any(|s| ACK_STEPS.contains(&s.name.as_str()))
}

/// Does the branch entered at `b` swallow the failure: it does not fail, and nothing in it
/// requeues, reschedules, records the failure or tells the sender?
fn drops(cx: &RuleCx<'_>, b: u32) -> bool {
    if matches!(
        cx.body.events[b as usize].kind,
        EventKind::Enter(Region::Branch { fails: true, .. })
    ) {
        return false;
    }
    let end = cx.region_end(b);
    !(b + 1..end).any(|i| match &cx.body.events[i as usize].kind {
        // An ack is the message's end, not a way back; unless it says the opposite
        // (JetStream's `ack_with(AckKind::Nak(..))`: redeliver).
        EventKind::Call(c) if acks(c) => c.all_args().any(|a| {
            a.paths.iter().chain(a.calls().iter()).any(|p| {
                let last = p.rsplit("::").next().unwrap_or(p);
                matches!(last, "Nak" | "Nack")
            })
        }),
        EventKind::Call(c) => {
            c.steps
                .iter()
                .any(|s| RETRY_STEPS.iter().any(|r| s.name.contains(r)))
                || cx.effs(i).any(|e| {
                    matches!(
                        e.kind,
                        EffectKind::Write
                            | EffectKind::Claim
                            | EffectKind::Schedule
                            | EffectKind::Remote
                    ) && !e.in_memory
                })
        }
        // A nested branch that fails (`return Err(..)` inside).
        EventKind::Enter(Region::Branch { fails: true, .. }) => true,
        _ => false,
    })
}

/// The work item's own failure swallowed: a remote call that does the work (an HTTP request
/// that changes something, a message sent, a crate helper that makes one) fails, the branch
/// that takes the failure only logs it, and the flow goes on to consume the item it was
/// working on — a delete of the row it read or claimed, a write of a done state to that table,
/// an ack of the message. Nobody will do the work again. Returns the work calls reported.
fn swallowed_then_consumed<'a>(
    cx: &RuleCx<'a>,
    handled: Option<(u32, &'a Effect)>,
    out: &mut Vec<Diagnostic>,
) -> Vec<u32> {
    let mut reported: Vec<u32> = Vec::new();
    let mut works: Vec<u32> = Vec::new();
    // The message's handling, when it is a durable write (`UPDATE orders ..` for a delivery):
    // its failure swallowed and the message then acked loses the message as surely as a failed
    // remote call does. Only the handling: a best-effort write elsewhere (an audit row) is not.
    let handled_by_write =
        handled.filter(|(_, e)| matches!(e.kind, EffectKind::Write | EffectKind::Claim));
    for r in 0..cx.body.events.len() as u32 {
        if cx.detached(r) || query::read_only_request(cx.body, r) {
            continue;
        }
        // A client known by its name only is too weak a sign that the work was remote.
        let work = match cx
            .effs(r)
            .find(|e| e.kind == EffectKind::Remote && !e.by_name)
        {
            Some(e) => e,
            None => match handled_by_write {
                Some((h, e)) if h == r => e,
                _ => continue,
            },
        };
        let failed = failure_branch(cx, r, |b| falls_through(cx, b) && drops(cx, b));
        let Some(b) = failed else {
            continue;
        };
        let Some(c) = consumed_after(cx, r, cx.region_end(b)) else {
            continue;
        };
        // A failed write's item is consumed by an ack of the message, not by the delete of a
        // row of the same database the write just failed on.
        if work.kind != EffectKind::Remote
            && !matches!(&cx.body.events[c as usize].kind, EventKind::Call(call) if acks(call))
        {
            continue;
        }
        if reported.contains(&c) {
            continue;
        }
        reported.push(c);
        works.push(r);
        out.push(report_swallowed(cx, r, b, c, work));
    }
    works
}

/// A webhook route or a queue consumer whose handling of the message fails, and the failure
/// is only logged: the route answers as if done (for a webhook the answer is the
/// acknowledgement; for a consumer, returning is). The handling is the first call at the
/// body's top level that writes or calls another service; a best-effort call after it (an
/// audit line, a notification) is not.
fn handling_swallowed(cx: &RuleCx<'_>, handled: Option<(u32, &Effect)>, out: &mut Vec<Diagnostic>) {
    let Some((r, work)) = handled else {
        return;
    };
    let swallowed = cx
        .error_branch(r)
        .filter(|&b| drops(cx, b) && !answers_error(cx, b));
    let message = match swallowed {
        Some(_) => {
            "a failed handling of the message is only logged, and the handler answers as if done"
        }
        None if discarded(cx, r) => {
            "the handling's failure is thrown away, and the handler answers as if done"
        }
        None => return,
    };
    let mut d = cx.diag(&RULE, r, message.to_string());
    d.primary_label = Some(this_call(cx, "the handling", work));
    match swallowed {
        Some(b) => d.labels.push(cx.label(
            b,
            "its failure is swallowed here (no error status, nack, requeue or recorded failure)",
        )),
        None => d.notes.push(
            "its `Result` is dropped (`let _ =`, `.ok()`, `.unwrap_or(())`, a closure that only logs): no error status, nack, requeue or recorded failure follows".to_string(),
        ),
    }
    if let Some(h) = cx.message_handler() {
        d.notes.push(format!(
            "this is a message handler ({}): its normal answer tells the sender the message was handled",
            h.describe(cx.krate)
        ));
    }
    d.notes.extend(cx.chain_notes(work));
    d.help = Some(
        "answer the failure with an error status (a 5xx the sender retries) or an error the queue retries with back-off, or keep the message durably (an inbox row a worker retries, a dead letter) before answering"
            .to_string(),
    );
    out.push(d);
}

/// Is the result of the handling call at `r` thrown away: bound to `_` as it came, or ended by
/// `.ok()`, `.unwrap_or(())`, `.unwrap_or_default()` or `.unwrap_or_else(..)` with a closure
/// that only logs (a macro, no call), and not used? `.map_err(..)` / `.inspect_err(..)` may
/// come between. A handling is only the message's work when nothing else durable follows it:
/// a best-effort write thrown away before the real handling (a raw copy of the event, then the
/// dispatch to the event's handler) is not.
fn discarded(cx: &RuleCx<'_>, r: u32) -> bool {
    let events = &cx.body.events;
    let EventKind::Call(call) = &events[r as usize].kind else {
        return false;
    };
    let Some(last) = call.steps.iter().rposition(|s| s.awaited) else {
        return false;
    };
    let rest = &call.steps[last + 1..];
    let (kept, tail) = match rest.split_last() {
        Some((t, kept)) => (kept, Some(t)),
        None => (rest, None),
    };
    if call.steps.iter().any(|s| s.tried)
        || !kept
            .iter()
            .all(|s| matches!(s.name.as_str(), "map_err" | "inspect_err"))
    {
        return false;
    }
    let thrown = match tail {
        // `let _ = handle(..).await;`
        None => events.iter().any(|e| {
            matches!(&e.kind, EventKind::Bind(b) if b.calls.as_slice() == [r] && b.names.is_empty())
        }),
        Some(t) => {
            let only_logs = || {
                events.get(r as usize + 1).is_some_and(|e| {
                    matches!(&e.kind, EventKind::Enter(Region::Closure { call: Some(c) }) if *c == r)
                }) && {
                    let end = cx.region_end(r + 1);
                    !(r + 2..end).any(|i| matches!(events[i as usize].kind, EventKind::Call(_)))
                }
            };
            let unit = |a: &crate::ir::Arg| a.paths.is_empty() && a.extra.is_none() && a.ev.is_none();
            let ends = match t.name.as_str() {
                "ok" | "unwrap_or_default" => t.args.is_empty(),
                "unwrap_or" => t.args.len() == 1 && unit(&t.args[0]),
                "unwrap_or_else" => t.args.len() == 1 && only_logs(),
                _ => false,
            };
            ends && !query::result_used(cx.body, r)
        }
    };
    thrown
        && !(r + 1..events.len() as u32).any(|i| {
            !cx.detached(i)
                && cx.effs(i).any(|e| {
                    matches!(
                        e.kind,
                        EffectKind::Write | EffectKind::Claim | EffectKind::Remote
                    ) && !e.in_memory
                })
        })
}

/// The handling of the message: the first call at the body's top level that writes durably
/// or calls another service (a lock attempt that fails is the other form: `lock_attempt`); in
/// a function that takes its messages from a subscription in a loop, the first such call at
/// the top level of that loop, for each message.
fn handling<'a>(cx: &RuleCx<'a>) -> Option<(u32, &'a Effect)> {
    let scope = crate::handlers::subscription_receipt(cx.krate, cx.id).and_then(|c| {
        cx.enclosing_regions(c)
            .find(|(_, r)| matches!(r, Region::Loop))
            .map(|(e, _)| e)
    });
    (0..cx.body.events.len() as u32).find_map(|r| {
        let work = handles(cx, r, false)?;
        let mut around = cx.enclosing_regions(r).map(|(e, _)| e);
        let at_top = match scope {
            None => around.next().is_none(),
            Some(l) => around.next() == Some(l),
        };
        at_top.then_some((r, work))
    })
}

/// In a webhook route or a consumer with no handling at its top level: the first awaited call,
/// at any depth (an arm of a match over the decoded message, a task the route spawns), that is
/// handed the message or what was decoded from it and reaches a store or another service (a
/// lookup too: its failure ends the handling as surely). The handler answers or acks anyway,
/// so that call's failure decides whether the message is lost.
fn handed_message<'a>(cx: &RuleCx<'a>) -> Option<(u32, &'a Effect)> {
    let mut message = crate::handlers::route_messages(cx.krate, cx.id);
    (0..cx.body.events.len() as u32).find_map(|r| {
        let EventKind::Call(call) = &cx.body.events[r as usize].kind else {
            return None;
        };
        if !call.awaited() {
            return None;
        }
        message.advance(r);
        let handed = call.recv.first().is_some_and(|n| message.holds(n)) || message.passed_to(call);
        if !handed {
            return None;
        }
        handles(cx, r, true).map(|e| (r, e))
    })
}

/// The effect of call `r` that makes it the handling of a message: a durable write or claim,
/// or a call to another service that may change something there (not a lock attempt, a
/// lease, a client known by its name only, a `GET`); with `lookups`, a durable read too.
fn handles<'a>(cx: &RuleCx<'a>, r: u32, lookups: bool) -> Option<&'a Effect> {
    cx.effs(r)
        .filter(|e| !e.attempt && !e.lease && !e.in_memory)
        .find(|e| match e.kind {
            EffectKind::Write | EffectKind::Claim => true,
            EffectKind::Read => lookups,
            EffectKind::Remote => !e.by_name && !query::read_only_request(cx.body, r),
            _ => false,
        })
}

/// Does the branch entered at `b` make its answer from the error it took (`(status_for(&e),
/// "rejected")`, `Reply { text: err.to_string() }`)? Then the sender is told what failed; a
/// branch that only logs the error (a macro, not an event) does not use it.
fn answers_error(cx: &RuleCx<'_>, b: u32) -> bool {
    let end = cx.region_end(b);
    let Some(EventKind::Bind(bind)) = cx.body.events.get(b as usize + 1).map(|e| &e.kind) else {
        return false;
    };
    let error = &bind.names;
    (b + 2..end).any(|i| match &cx.body.events[i as usize].kind {
        EventKind::Call(c) => {
            c.recv.first().is_some_and(|n| error.contains(n))
                || c.all_args()
                    .flat_map(|a| &a.paths)
                    .any(|p| error.iter().any(|n| query::first(p) == n.as_str()))
        }
        _ => false,
    })
}

/// The first branch, among those that take the failure of the attempt or call at `r` (a lock
/// not acquired, an `Err`), that `keep` accepts.
fn failure_branch(cx: &RuleCx<'_>, r: u32, keep: impl Fn(u32) -> bool) -> Option<u32> {
    query::tests_of(cx.body, r).into_iter().find_map(|t| {
        let EventKind::Cond(test) = &cx.body.events[t as usize].kind else {
            return None;
        };
        query::not_acquired(cx, t, test)
            .into_iter()
            .find(|&b| keep(b))
    })
}

/// Does the branch entered at `b` end by going on after it (no `return`, `break`, `continue`
/// or `?` inside it at its own level)?
fn falls_through(cx: &RuleCx<'_>, b: u32) -> bool {
    !matches!(
        cx.body.events[b as usize].kind,
        EventKind::Enter(Region::Branch { diverges: true, .. })
    )
}

/// The first event after `from` (the end of the branch that swallowed the failure of call
/// `r`) that consumes the work item: an ack of a message, or a delete (or a write of a done
/// state) of a row of a work table (jobs, tasks, an outbox, deliveries) that the body read or
/// claimed before `r`, keyed by what that read returned. It must run on the path that goes on
/// from the branch: not inside a branch opened after it, not past a `return`.
fn consumed_after(cx: &RuleCx<'_>, r: u32, from: u32) -> Option<u32> {
    let taken: Vec<(u32, &str)> = (0..r)
        .flat_map(|i| cx.effs(i).map(move |e| (i, e)))
        .filter(|(_, e)| matches!(e.kind, EffectKind::Read | EffectKind::Claim) && !e.in_memory)
        .filter_map(|(i, e)| e.table.as_deref().map(|t| (i, t)))
        .filter(|(_, t)| is_work_item_table(t))
        .collect();
    let mut depth = 0i32;
    for c in from + 1..cx.body.events.len() as u32 {
        match &cx.body.events[c as usize].kind {
            EventKind::Enter(_) => depth += 1,
            EventKind::Leave => depth -= 1,
            EventKind::Exit if depth <= 0 => return None,
            EventKind::Call(call) if depth <= 0 => {
                if acks(call) {
                    return Some(c);
                }
                let consumes = |e: &Effect| {
                    e.kind == EffectKind::Write
                        && !e.in_memory
                        && !e.insert
                        && (e.delete || e.sets.iter().any(|a| {
                            is_state_column(&a.column)
                                && matches!(&a.value, AssignedValue::Const(v) if is_done_value(v))
                        }))
                        && taken.iter().any(|&(i, t)| {
                            e.table.as_deref() == Some(t) && query::depends_on(cx.body, c, i)
                        })
                };
                if cx.effs(c).any(consumes) {
                    return Some(c);
                }
            }
            _ => {}
        }
    }
    None
}

/// A table of units of work handed out to be done once: jobs, tasks, queue entries, an
/// outbox, deliveries, notifications to send.
fn is_work_item_table(table: &str) -> bool {
    is_work(table)
        || table.split(['_', '.']).any(|w| {
            matches!(
                w.trim_end_matches('s'),
                "outbox" | "delivery" | "deliverie" | "notification" | "webhook" | "mail" | "email"
            )
        })
}

fn report_swallowed(cx: &RuleCx<'_>, r: u32, b: u32, c: u32, work: &Effect) -> Diagnostic {
    let message = if work.kind == EffectKind::Remote {
        "a failed remote call is only logged, then its work item is consumed as done"
    } else {
        "a failed handling of the message is only logged, then the message is acked as done"
    }
    .to_string();
    let mut d = cx.diag(&RULE, c, message);
    d.primary_label = Some("the work item is consumed here although its work failed".to_string());
    d.labels.push(cx.label(r, this_call(cx, "the work", work)));
    d.labels.push(cx.label(
        b,
        "its failure is swallowed here (no error, nack, requeue or recorded failure)",
    ));
    d.notes.extend(cx.chain_notes(work));
    d.help = Some(
        "keep the work item when its work failed: return the error so the queue retries it with back-off (or nack / requeue it), or record the failure durably (a retry_at, an attempts count, a dead letter) before consuming it"
            .to_string(),
    );
    d
}

/// "`what` is this call (`helper` sends an HTTP request)": the label on a call, naming the
/// crate fn the effect comes through.
fn this_call(cx: &RuleCx<'_>, what: &str, e: &Effect) -> String {
    match e.via {
        Some(helper) => format!(
            "{what} is this call (`{}` {})",
            cx.krate.body(helper).name(),
            e.what
        ),
        None => format!("{what} is this call ({})", e.what),
    }
}

fn report(cx: &RuleCx<'_>, r: u32, b: u32, e: &Effect) -> Diagnostic {
    let message = "a lock held by someone else makes this handler drop its message".to_string();
    let label = format!(
        "{}: when it is not acquired, the branch below answers as if done",
        e.what
    );
    let mut d = cx.diag(&RULE, r, message);
    d.primary_label = Some(label);
    d.labels.push(cx.label(
        b,
        "this branch neither fails nor leaves a retry (no error, nack, requeue or recorded failure)",
    ));
    d.notes.extend(cx.chain_notes(e));
    d.help = Some(
        "return an error the queue retries with back-off (or nack / requeue the message), answer 409 / 503 to a caller that retries, or record the failure durably (a retry_at, an outbox row, a dead letter); keep refusing to act"
            .to_string(),
    );
    d
}
