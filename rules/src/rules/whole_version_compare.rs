//! `whole-version-compare`: a callback or message handler that rejects its message when the
//! whole object's version changed, where the identity of the operation the message answers
//! was meant.

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::EffectKind;
use crate::handlers;
use crate::ir::EventKind;
use crate::kb::names::is_whole_version;
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a message handler (see `blind-callback-write` for how one is recognised) that
    /// decides whether its message still applies by the whole object's version: a test that
    /// compares a version read from the record (`order.version`, `lock_version`, `revision`,
    /// `etag`) with the version the message carries, or a write filtered on the version the
    /// message carries (`UPDATE .. WHERE id = $1 AND version = $2`) in a handler that did not
    /// read the row itself.
    ///
    /// It stays silent for a version the handler read itself and writes back (optimistic
    /// locking of its own read-modify-write), for versions named for one operation
    /// (`attempt_version`, `payment_generation`, a reservation or attempt id), and outside
    /// message handlers (an `If-Match` on a user's whole-resource `PUT` is meant to fail on any
    /// edit). It is a note: it never fails a run unless configured to.
    ///
    /// ### Why is this bad?
    ///
    /// Any edit bumps the whole object's version, including edits that have nothing to do with
    /// the operation the message answers, so a valid message is refused:
    ///
    /// ```text
    /// t0  checkout starts payment attempt A for order 42 (version 7); the PSP is told v7
    /// t1  the customer edits the delivery note: order 42 is now version 8
    /// t2  the PSP's "A succeeded" callback carries v7: 7 != 8, rejected as stale
    ///     <- the customer was charged, and the order never becomes paid
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let order = load_order(&db, cb.order_id).await?;
    /// if order.version != cb.order_version {
    ///     return Ok(StatusCode::OK); // "stale"
    /// }
    /// ```
    ///
    /// ### Use instead
    ///
    /// Compare the smallest accurate identity: the id of the payment attempt (or reservation,
    /// or a generation that only this lifecycle bumps) that the message answers, and the state
    /// it may move from:
    ///
    /// ```rust,ignore
    /// if order.payment_attempt_id.as_deref() != Some(&cb.attempt_id) || order.status != "awaiting_payment" {
    ///     return Ok(StatusCode::OK);
    /// }
    /// ```
    ///
    /// `#[staleguard::fenced(verify = order.payment_attempt_id == cb.attempt_id, ..)]` writes
    /// that check under the lock.
    ///
    /// ### Known problems
    ///
    /// Whether a version is bumped by every edit or only by one lifecycle is not visible in the
    /// code: a `version` column only the payment flow increments is reported too (hence a note).
    /// Handlers are recognised as `blind-callback-write` recognises them.
    pub(crate) static RULE = {
        name: "whole-version-compare",
        level: Note,
        summary: "a callback rejected because the whole object's version changed, where an operation identity was meant",
        applies: applies,
        check: check,
    };
}

/// A test of a read's result, or a write with a filter.
fn applies(cx: &RuleCx<'_>) -> bool {
    cx.kinds().has(EffectKind::Read) || cx.kinds().has(EffectKind::Write)
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced || cx.message_handler().is_none() {
        return;
    }
    let events = cx.body.events.len() as u32;
    let mut message = handlers::messages_of(cx.krate, cx.id);
    let mut reported = false;
    for i in 0..events {
        if reported {
            break;
        }
        match &cx.body.events[i as usize].kind {
            EventKind::Cond(t) => {
                message.advance(i);
                let from_message = |d: &Name| message.holds(d);
                let msg_version = t
                    .deps
                    .iter()
                    .find(|d| from_message(d) && is_whole_version(d));
                let read_version = t
                    .deps
                    .iter()
                    .find(|d| !from_message(d) && is_whole_version(d) && read_before(cx, i, d));
                if let (Some(m), Some(r)) = (msg_version, read_version) {
                    out.push(report_test(cx, i, r, m));
                    reported = true;
                }
            }
            EventKind::Call(c) => {
                let Some(e) = cx.effs(i).find(|e| {
                    e.kind == EffectKind::Write
                        && !e.insert
                        && !e.in_memory
                        && e.where_cols.iter().any(|c| is_whole_version(c))
                        // A handler it dispatches to is judged on its own.
                        && e.via
                            .is_none_or(|h| handlers::message_handler(cx.krate, h).is_none())
                }) else {
                    continue;
                };
                message.advance(i);
                let carried = c
                    .all_args()
                    .flat_map(|a| &a.paths)
                    .find(|p| is_whole_version(p) && message.holds(p));
                let own_read = (0..i).any(|r| {
                    cx.effs(r).any(|x| {
                        x.kind == EffectKind::Read
                            && query::same_table_prefixed(x.table.as_deref(), e.table.as_deref())
                    })
                });
                if let Some(m) = carried
                    && !own_read
                {
                    let column = e
                        .where_cols
                        .iter()
                        .find(|c| is_whole_version(c))
                        .cloned()
                        .unwrap_or_default();
                    out.push(report_write(cx, i, &column, m, e.table.as_deref()));
                    reported = true;
                }
            }
            _ => {}
        }
    }
}

/// Does the local `place` starts from hold the result of a database read made before event
/// `i`?
fn read_before(cx: &RuleCx<'_>, i: u32, place: &str) -> bool {
    let local = query::first(place);
    (0..i).any(|r| {
        cx.effs(r)
            .any(|e| e.kind == EffectKind::Read && !e.in_memory)
            && query::derived(cx.body, r).contains(local)
    })
}

fn report_test(cx: &RuleCx<'_>, i: u32, read: &str, message: &str) -> Diagnostic {
    let mut d = cx.diag(
        &RULE,
        i,
        format!("the message is checked against the whole object's version (`{read}` against `{message}`)"),
    );
    d.primary_label = Some("any unrelated edit of the object makes this message stale".to_string());
    d.help = Some(help());
    d
}

fn report_write(
    cx: &RuleCx<'_>,
    i: u32,
    column: &str,
    message: &str,
    table: Option<&str>,
) -> Diagnostic {
    let table = table.unwrap_or("the record");
    let mut d = cx.diag(
        &RULE,
        i,
        format!("the write of `{table}` is filtered on the whole object's `{column}` that the message carries (`{message}`)"),
    );
    d.primary_label = Some("any unrelated edit of the object makes this write miss".to_string());
    d.help = Some(help());
    d
}

fn help() -> String {
    "compare the identity of the operation the message answers (the payment attempt or reservation id, a generation only this lifecycle bumps) and the state it may move from, not the whole object's version; `#[staleguard::fenced(verify = ..)]` checks it under the lock".to_string()
}
