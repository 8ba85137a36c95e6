//! The shape where the row lock ends before the write: `SELECT .. FOR UPDATE [SKIP LOCKED]` run
//! in autocommit (the lock lasts one statement), or in a transaction committed or rolled back
//! before the `UPDATE` that acts on the row it found. The lock serialised nothing: two workers
//! both find the row and both write it.

use super::{Reported, Verdict, Write};
use crate::effects::EffectKind;
use crate::ir::Region;
use crate::query;
use crate::rules::RuleCx;

/// Judges a write against the locking reads before it whose lock no longer holds at the write.
pub(super) fn judge(cx: &RuleCx<'_>, write: &Write<'_>, reported: &mut Reported) -> Verdict {
    let (w, effect) = (write.at, write.effect);
    // A write that re-checks the row in its own filter (`.. AND state = 'queued'`) decides
    // again itself; whether its rows affected are looked at is the other shapes' question.
    if effect.in_memory || effect.insert || effect.table.is_none() || effect.conditional {
        return Verdict::Clean;
    }
    let at_write = &cx.state(w).txs;
    for r in (0..w).rev() {
        if cx.detached(r) || reported.contains(r) {
            continue;
        }
        let Some(read) = cx.effs(r).find(|e| {
            e.kind == EffectKind::Read
                && e.locking
                && !e.in_memory
                // Locked here: a helper may run its read in a transaction it hands back, or
                // claim the row in it too, which this body does not see.
                && e.via.is_none()
                // The statement claimed what it locked (`WITH .. UPDATE .. RETURNING`).
                && !e.writes_in_cte()
                && query::same_state(e.table.as_deref(), effect.table.as_deref())
        }) else {
            continue;
        };
        // A closure may be a transaction's (a crate macro's `|tx| ..`, a helper handed a
        // connection later): what it runs in is not seen here.
        if cx.reach_end(r) <= w
            || in_closure(cx, r)
            || in_closure(cx, w)
            || !query::acts_on(cx.body, w, r)
        {
            continue;
        }
        // Where the lock ended: with the statement (no transaction, and none the caller could
        // hold: the body takes its connection itself), or with a transaction begun here that a
        // commit or rollback on the way to the write ended (not one in another arm): that
        // commit or rollback (`Some`), or no transaction at all (`None`).
        let ended_at = match cx.state(r).txs.last() {
            Some(tx) if tx.event != query::TX_PARAM && !at_write.contains(tx) => {
                let Some(k) = (r + 1..w).find(|&k| ends_tx_before(cx, k, w)) else {
                    continue;
                };
                Some(k)
            }
            None if cx.own_connection() => None,
            _ => continue,
        };
        if !reported.first(r) {
            return Verdict::Reported;
        }
        let mut d = cx.diag(
            &super::RULE,
            w,
            "row locked by `FOR UPDATE`, but the lock has ended before the write".to_string(),
        );
        d.primary_label = Some("written here, no longer under the row lock".into());
        match ended_at {
            Some(k) => {
                d.labels.push(cx.label(r, "row locked here"));
                d.labels
                    .push(cx.label(k, "the transaction ends here, and the lock with it"));
            }
            None => d.labels.push(cx.label(
                r,
                "row locked here, outside any transaction: the lock ends with the statement",
            )),
        }
        d.help = Some(
            "run the locking `SELECT` and the write in one transaction (`let mut tx = pool.begin().await?` .. `tx.commit()` after the write), or claim the row in one statement (`UPDATE .. WHERE id = (SELECT id .. FOR UPDATE SKIP LOCKED) RETURNING ..`); `#[staleguard::fenced(..)]` generates this shape".to_string(),
        );
        d.notes.push(
            "two workers can both find the row before either writes it, and both act on it"
                .to_string(),
        );
        d.notes.extend(cx.chain_notes(read));
        d.notes.extend(cx.chain_notes(effect));
        return Verdict::Stale(Box::new(d));
    }
    Verdict::Clean
}

/// Does event `k` commit or roll back a transaction, on the way to event `w`: `w` can run after
/// it (not in another arm of the branch `k` is in, not after a return it leads to)?
fn ends_tx_before(cx: &RuleCx<'_>, k: u32, w: u32) -> bool {
    (cx.has(k, EffectKind::TxCommit) || cx.has(k, EffectKind::TxRollback))
        && cx.reach_end(k) > w
        && !cx
            .alternatives_of(k)
            .iter()
            .any(|&(a, b)| (a..=b).contains(&w))
}

/// Is event `i` inside a closure or an async block?
fn in_closure(cx: &RuleCx<'_>, i: u32) -> bool {
    cx.enclosing_regions(i)
        .any(|(_, r)| matches!(r, Region::Closure { .. }))
}
