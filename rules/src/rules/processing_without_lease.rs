//! `processing-without-lease`: a record claimed as in progress (status PROCESSING / RUNNING /
//! LOCKED / .., or a `locked` flag) with no lease expiry and no owner written with it, and no
//! reaper in the crate that frees stale claims.

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::kb::names::{
    is_claim_word, is_expiry_column, is_in_progress_value, is_owner_column, is_progress_flag,
    is_state_column, is_work,
};
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a write that claims a record as in progress — a state column set to `PROCESSING`,
    /// `IN_PROGRESS`, `RUNNING`, `LOCKED`, `CLAIMED` (or the like), or a boolean `locked` /
    /// `in_progress` / `is_running` flag set to true, by SQL (`UPDATE` or `INSERT`), diesel,
    /// sea-orm or a Redis `SET` — when the same statement does not also write a lease expiry
    /// (`lease_expires_at`, `locked_until`, `visible_at`, `vt`, `heartbeat_at`, a TTL) *and* an
    /// owner (`owner`, `worker_id`, `locked_by`, `runner_id`).
    ///
    /// `RUNNING`, `STARTED` and `LOCKED` count on a table of work (jobs, tasks, builds, runs, a
    /// queue): elsewhere they describe a resting state (a server that is up, funds locked in
    /// escrow).
    ///
    /// It stays silent when the expiry and the owner are written with the claim (in the same
    /// statement, or by another write to the same table in the same transaction), when a Redis
    /// claim sets a TTL, and when the crate has a **reaper** for the claim: a statement that
    /// updates or deletes rows of the same table filtered on the claimed column and a time
    /// column (`UPDATE jobs SET status = 'queued' WHERE status = 'running' AND heartbeat_at <
    /// now() - interval '1 minute'`), or a statement of the claiming function that, before the
    /// claim, moves the record's earlier claims on (`UPDATE builds SET status = 'failure' WHERE
    /// release_id = $1 AND status = 'in_progress'`): the next attempt ends a stranded one.
    ///
    /// ### Why is this bad?
    ///
    /// PROCESSING is a temporary hold on the record, and a hold needs an end. Without an expiry
    /// a crashed worker holds it for ever; without an owner a takeover cannot fence the old
    /// holder out:
    ///
    /// ```text
    /// t0  worker A: UPDATE jobs SET status = 'running' WHERE id = 7
    /// t1  A's process is killed (deploy, OOM)
    /// t2  every retry of job 7 sees `running` and leaves it alone   <- stuck for ever
    ///
    /// or, with a reaper that resets it but no owner:
    /// t2  the reaper sets job 7 back to queued; worker B claims it and runs it
    /// t3  A was only paused: it wakes and completes job 7 too       <- done twice
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// sqlx::query("UPDATE jobs SET status = 'running', started_at = now() WHERE id = $1")
    ///     .bind(job.id)
    ///     .execute(&pool)
    ///     .await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Claim with a lease and an owner in one compare-and-set, and renew or expire it:
    ///
    /// ```rust,ignore
    /// sqlx::query(
    ///     "UPDATE jobs SET status = 'running', locked_by = $2, locked_until = now() + interval '30 seconds'
    ///      WHERE id = $1 AND (status = 'queued' OR locked_until < now())",
    /// )
    /// .bind(job.id)
    /// .bind(worker_id)
    /// .execute(&pool)
    /// .await?;
    /// ```
    ///
    /// Complete with the owner in the `WHERE` so a late holder is refused. For Redis, `SET key
    /// owner NX PX ttl`. `#[staleguard::idempotent(..)]` generates this state machine: an atomic
    /// claim with a lease and an owner token, takeover by compare-and-set, the old owner fenced
    /// out.
    ///
    /// ### Known problems
    ///
    /// The in-progress value must be visible: a literal in the SQL, a constant bound to the
    /// statement or assigned to the model (`Set(JobStatus::Running)`), or a constant passed to
    /// a crate helper that binds its parameter to the column (`set_state(conn, id,
    /// TaskState::InProgress)`, through any number of helpers), reported at that call. A value
    /// computed elsewhere and passed as a variable is not seen, nor one passed through sync
    /// code that makes no database call of its own (its arguments are not kept). Expiry and owner columns are recognised
    /// by name, and so is a reaper's time column; a reaper in another service (a cron job, a
    /// database trigger) is not seen.
    pub(crate) static RULE = {
        name: "processing-without-lease",
        level: Warning,
        summary: "record claimed as in progress with no lease expiry or owner",
        applies: applies,
        check: check,
    };
}

/// A write that claims a record.
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    (k.has(EffectKind::Write) || k.has(EffectKind::Claim))
        && cx.effects().any_order().any(|e| claimed(e).is_some())
}

/// The column a write claims a record with: a state column set to an in-progress value, or a
/// progress flag set to true.
fn claimed(e: &Effect) -> Option<&Assigned> {
    if !matches!(e.kind, EffectKind::Write | EffectKind::Claim) || e.delete || e.in_memory {
        return None;
    }
    let table = e.table.as_deref()?;
    e.sets.iter().find(|a| {
        let AssignedValue::Const(v) = &a.value else {
            return false;
        };
        is_state_column(&a.column)
            && is_in_progress_value(v)
            && (is_claim_word(v) || is_work(table))
            || is_progress_flag(&a.column) && matches!(v.as_str(), "true" | "TRUE" | "1" | "t")
    })
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.idempotent {
        return;
    }
    for w in 0..cx.body.events.len() as u32 {
        for e in cx.effs(w) {
            // A claim made in a helper is reported in the helper, unless the in-progress value
            // is passed in here (`set_state(id, State::Running)`): only the caller shows it.
            if e.via.is_some() && !e.passed {
                continue;
            }
            // A key that expires on its own is its own lease.
            let Some(claim) = claimed(e).filter(|_| !e.expires) else {
                continue;
            };
            let table = e.table.as_deref().unwrap_or_default();
            let (mut expiry, mut owner) = written(&e.sets);
            // The rest of the transaction may write them.
            if let Some(tx) = cx.state(w).txs.last() {
                for other in 0..cx.body.events.len() as u32 {
                    if other != w && cx.state(other).txs.contains(tx) {
                        for o in cx.effs(other) {
                            if o.kind == EffectKind::Write
                                && query::same_state(o.table.as_deref(), e.table.as_deref())
                            {
                                let (x, y) = written(&o.sets);
                                expiry |= x;
                                owner |= y;
                            }
                        }
                    }
                }
            }
            if expiry && owner
                || cx.krate.reaps(table, &claim.column)
                || released(cx, w, e, claim)
                || superseded(cx, w, e, claim)
            {
                continue;
            }
            out.push(report(cx, w, e, claim, expiry, owner));
        }
    }
}

/// Is the claim undone later in the same transaction (a lock row set and reset around the
/// work)? A crash then rolls it back instead of leaving it held.
fn released(cx: &RuleCx<'_>, w: u32, claim_write: &Effect, claim: &Assigned) -> bool {
    let Some(tx) = cx.state(w).txs.last() else {
        return false;
    };
    (w + 1..cx.body.events.len() as u32).any(|later| {
        cx.state(later).txs.contains(tx)
            && cx.effs(later).any(|e| {
                e.kind == EffectKind::Write
                    && query::same_state(e.table.as_deref(), claim_write.table.as_deref())
                    && e.sets.iter().any(|a| {
                        a.column == claim.column
                            && !matches!(&a.value, AssignedValue::Const(v)
                                if is_in_progress_value(v) || v == "true" || v == "TRUE")
                    })
            })
    })
}

/// Does the body free the record's earlier claims before it claims again (`UPDATE builds SET
/// status = 'failure' WHERE rid = $1 AND status = 'in_progress'`, then the new claim)? A claim
/// stranded by a crash is then ended by the next attempt: a reaper run at claim time.
fn superseded(cx: &RuleCx<'_>, w: u32, claim_write: &Effect, claim: &Assigned) -> bool {
    (0..w).any(|earlier| {
        cx.effs(earlier).any(|e| {
            e.kind == EffectKind::Write
                && !e.insert
                && query::same_state(e.table.as_deref(), claim_write.table.as_deref())
                && e.where_cols.contains(&claim.column)
                && e.sets.iter().any(|a| {
                    a.column == claim.column
                        && matches!(&a.value, AssignedValue::Const(v) if !is_in_progress_value(v))
                })
        })
    })
}

/// Whether `sets` write a lease expiry, and an owner.
fn written(sets: &[Assigned]) -> (bool, bool) {
    (
        sets.iter().any(|a| is_expiry_column(&a.column)),
        sets.iter().any(|a| is_owner_column(&a.column)),
    )
}

fn report(
    cx: &RuleCx<'_>,
    w: u32,
    e: &Effect,
    claim: &Assigned,
    expiry: bool,
    owner: bool,
) -> Diagnostic {
    let table = e.table.as_deref().unwrap_or("the record");
    let missing = match (expiry, owner) {
        (false, false) => "no lease expiry and no owner",
        (false, true) => "no lease expiry",
        _ => "no owner",
    };
    let mut d = cx.diag(
        &RULE,
        w,
        format!(
            "`{}` of `{table}` is claimed as in progress with {missing}",
            claim.column
        ),
    );
    d.primary_label = Some(match &claim.value {
        AssignedValue::Const(v) => format!("sets `{}` to `{v}` here", claim.column),
        _ => format!("sets `{}` here", claim.column),
    });
    d.notes.push(match (expiry, owner) {
        (false, false) => "a crashed holder keeps the record in progress for ever, and a takeover cannot fence the old holder out".to_string(),
        (false, true) => "a crashed holder keeps the record in progress for ever".to_string(),
        _ => "when the claim is taken over, the old holder's late writes cannot be refused".to_string(),
    });
    d.help = Some("write a lease expiry and an owner with the claim (`locked_until = now() + interval '30 seconds', locked_by = $2`), renew it while working, and complete with the owner in the `WHERE`; or free stale claims with a reaper; `#[staleguard::idempotent(..)]` generates the claim with a lease and an owner".to_string());
    d
}
