//! The limit check: rows of a table counted (`SELECT count(*) ..`, `.count(db)`, a list read
//! whose length is tested, or a count kept in a table of counts: `SELECT dataset_count FROM
//! org_usage_counts ..`), the count compared with a bound (`n >= max_seats`,
//! `owners.len() <= 1`), then a row inserted into or deleted from that table, with nothing held
//! over the two. Two requests both count below the bound and both write: a cap exceeded, the
//! last owner removed twice. No unique key can refuse the second write.

use super::{Reported, RuleCx, decides, tests_read, without_lock};
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::{Comparison, EventKind};
use crate::kb::names::is_time_column;
use crate::query;

/// The insert or delete at `w`, when a count of its table read before it, with no lock over
/// both, was compared with a bound that decides it.
pub(super) fn judge(cx: &RuleCx<'_>, w: u32, reported: &mut Reported) -> Option<Diagnostic> {
    if cx.detached(w) {
        return None;
    }
    let write = cx.effs(w).find(|e| {
        e.kind == EffectKind::Write
            && (e.insert && !e.upsert || e.delete && !e.purge)
            && !e.conditional
            && !e.in_memory
            && e.table.is_some()
    })?;
    // A lock held over the write serialises the counts too; a write whose outcome is looked at
    // carries its own check.
    if !cx.state(w).locks.is_empty() || !query::tests_of(cx.body, w).is_empty() {
        return None;
    }
    for r in (0..w).rev() {
        if cx.detached(r) || reported.contains(r) {
            continue;
        }
        let Some(read) = cx.effs(r).find(|e| counted(e, write)) else {
            continue;
        };
        let kept = read.table.as_deref().is_some_and(counter_table);
        if !(read.counts || kept || without_lock::many_rows(cx, r)) {
            continue;
        }
        // Both in one crate fn this body calls: reported there, once.
        if read.via.is_some() && read.via == write.via {
            return None;
        }
        if !cx.state(r).locks.is_empty() || cx.serializable_together(r, w) || held_before(cx, r, w)
        {
            return None;
        }
        let counted = Counted::of(cx, r, read.counts || kept);
        let c = (r + 1..w).find(|&c| bound_test(cx, c, r, &counted) && decides(cx, c, r, w))?;
        reported.first(r);
        let table = write.table.as_deref().unwrap_or("the table");
        let verb = if write.insert { "inserted" } else { "deleted" };
        let message = match read.table.as_deref().filter(|_| kept) {
            Some(counts) if !query::same_table_prefixed(Some(counts), Some(table)) => format!(
                "a count kept in `{counts}` is compared with a limit, then a row of `{table}` is {verb} with no lock over the two"
            ),
            _ => format!(
                "rows of `{table}` are counted against a limit, then one is {verb} with no lock over the two"
            ),
        };
        let mut d = cx.diag(&super::RULE, w, message);
        d.primary_label = Some(format!("{verb} here"));
        d.labels.push(cx.label(r, "counted here"));
        d.labels.push(cx.label(c, "compared with the limit here"));
        d.notes.push(format!(
            "two concurrent requests both count the rows before either writes, both pass the check and both write: the limit on `{table}` is crossed, and no unique key can refuse the second write"
        ));
        d.help = Some(
            "lock what the count stands for before counting (`SELECT .. FOR UPDATE` on the parent row, or an advisory lock every writer of these rows takes), or make the write carry the check (`INSERT .. SELECT .. WHERE (SELECT count(*) ..) < $limit` with the rows affected checked), or run both in a `SERIALIZABLE` transaction"
                .to_string(),
        );
        d.notes.extend(cx.chain_notes(read));
        d.notes.extend(cx.chain_notes(write));
        return Some(d);
    }
    None
}

/// A plain read of the written table (not a row lock: a locking read is another shape's).
/// A count over a time window (`WHERE created_at > now() - interval '1 day'`) is a rate limit,
/// advisory by nature; a cap on the rows there are (seats, members, owners) is an invariant.
fn counted(e: &Effect, write: &Effect) -> bool {
    e.kind == EffectKind::Read
        && !e.in_memory
        && !e.locking
        && !e.where_cols.iter().any(|c| is_time_column(c))
        && (query::same_table_prefixed(e.table.as_deref(), write.table.as_deref())
            || e.table.as_deref().is_some_and(counter_table))
}

/// A table that keeps counts of rows of other tables (`organization_usage_counts`,
/// `team_quota`, `seat_counter`), by the crate's writes or by a trigger: a value read from it
/// is a count, of whatever the write after the limit test adds or removes.
fn counter_table(table: &str) -> bool {
    matches!(
        table.rsplit('_').next(),
        Some("count" | "counter" | "usage" | "quota")
    ) && table.contains('_')
}

/// What holds the count read at `r`: the locals a counting read's value flows into, or the
/// list a read of rows is bound to (its length is the count, not a field of one of its rows).
enum Counted {
    Value(crate::fxhash::FxHashSet<crate::name::Name>),
    List(Vec<crate::name::Name>),
}

impl Counted {
    fn of(cx: &RuleCx<'_>, r: u32, counts: bool) -> Counted {
        if counts {
            Counted::Value(query::derived(cx.body, r))
        } else {
            Counted::List(query::binders(cx.body).swap_remove(r as usize))
        }
    }
}

/// Is the test at `c` an ordering comparison of the count read at `r` with a bound (`count >=
/// limit`, `owners.len() <= 1`, the list itself tested: `owners`)? `len() > 0` only asks
/// whether there are rows.
fn bound_test(cx: &RuleCx<'_>, c: u32, r: u32, counted: &Counted) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    if t.comparison != Comparison::Ordering
        || t.values.len() == 1 && t.values[0] == "0"
        || !tests_read(cx, c, r)
    {
        return false;
    }
    match counted {
        Counted::Value(derived) => {
            t.calls.contains(&r) || t.deps.iter().any(|d| derived.contains(query::first(d)))
        }
        Counted::List(rows) => {
            t.deps.iter().any(|d| rows.contains(d))
                || t.calls.iter().any(|&k| {
                    matches!(&cx.body.events[k as usize].kind, EventKind::Call(call)
                        if matches!(call.steps.first().map(|s| s.name.as_str()), Some("len" | "count"))
                            && call.recv.len() == 1
                            && rows.contains(&call.recv[0]))
                })
        }
    }
}

/// Was something that serialises the writers held from before the count to the write: a row
/// lock or a lock taken earlier in the transaction both run in, or a lock held at both?
fn held_before(cx: &RuleCx<'_>, r: u32, w: u32) -> bool {
    let (at_r, at_w) = (cx.state(r), cx.state(w));
    if at_r.locks.iter().any(|l| at_w.locks.contains(l)) {
        return true;
    }
    let Some(tx) = at_w.txs.last().filter(|t| at_r.txs.contains(t)) else {
        return false;
    };
    (tx.first_event()..r).any(|p| {
        cx.state(p).txs.contains(tx)
            && cx.effs(p).any(|e| {
                e.kind == EffectKind::Read && e.locking
                    || e.kind == EffectKind::Lock
                    || e.kind == EffectKind::Claim && e.lock_claim
            })
    })
}
