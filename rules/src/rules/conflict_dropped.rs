//! `conflict-dropped`: a message handler that meets a conflict (a lock held by someone else)
//! and answers as if it had done its work, with no durable retry.

use super::RuleCx;
use crate::apis::{ACK_STEPS, RETRY_STEPS};
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::{EventKind, Region};
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
    /// Only lock contention is checked: a failed handling that is only logged (`if let Err(e) =
    /// handle(msg).await { warn!(..) }` and then an ack) is the same loss, but without seeing
    /// the ack or the redelivery around it the analyzer cannot tell it from a best-effort call
    /// (a metric, a courtesy e-mail), and it is not reported; nor are serialization failures
    /// (40001) or failed optimistic checks. A durable retry outside the handler — a periodic
    /// job that re-derives the work from the database — is not seen. Handlers are recognised
    /// as `blind-callback-write` recognises them.
    pub(crate) static RULE = {
        name: "conflict-dropped",
        level: Warning,
        summary: "a message handler that finds a lock held answers as done (returns Ok, acks the message) with no durable retry",
        applies: applies,
        check: check,
    };
}

/// A lock taken or claimed.
fn applies(cx: &RuleCx<'_>) -> bool {
    cx.kinds().has(EffectKind::Claim) || cx.kinds().has(EffectKind::Lock)
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced || cx.message_handler().is_none() {
        return;
    }
    for r in 0..cx.body.events.len() as u32 {
        let Some(e) = lock_attempt(cx, r) else {
            continue;
        };
        let dropped = query::tests_of(cx.body, r).into_iter().find_map(|t| {
            let EventKind::Cond(test) = &cx.body.events[t as usize].kind else {
                return None;
            };
            query::not_acquired(cx, t, test)
                .into_iter()
                .find(|&b| drops(cx, b))
        });
        if let Some(b) = dropped {
            out.push(report(cx, r, b, e));
        }
    }
}

/// The lock attempt event `r` makes, which may find the lock held: a Redis lock claim, a
/// `try_lock` / `try_acquire`, a `pg_try_advisory_lock`. (A failed handling swallowed — `if let
/// Err(e) = handle(msg).await { warn!(..) }` — is the other half of the hazard; without
/// evidence of the ack or redelivery around it, it is too often a best-effort call to report.)
fn lock_attempt<'a>(cx: &RuleCx<'a>, r: u32) -> Option<&'a Effect> {
    cx.effs(r)
        .find(|e| e.attempt && matches!(e.kind, EffectKind::Lock | EffectKind::Claim))
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
        // An ack is the message's end, not a way back.
        EventKind::Call(c) if c.steps.iter().any(|s| ACK_STEPS.contains(&s.name.as_str())) => false,
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
