//! The check-then-set of a key-value entry: a cooldown, a rate limit or an "already sent"
//! marker read (`GET resend:{email}`, `kv.get(Bucket::IpRateLimit, ip)`), found absent, and set
//! afterwards by a plain write (`SET` without `NX`, `put`), while the work the entry gates runs
//! on the same path. Two concurrent requests both find the entry absent and both do the work:
//! the gate is a test-and-set done in two steps. The same with a row of a table kept as such an
//! entry (a DB-backed cache: looked up by a key, then upserted by it, `INSERT .. ON CONFLICT ..
//! DO UPDATE`): the upsert overwrites instead of refusing the second request.

use super::{Reported, RuleCx, acting, acts, tests_read};
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::{EventKind, Region};
use crate::query;

/// The set at `w`, when a test of the same entry before it decided it (stopped the flow when
/// the entry is there, or opened the branch the set is in) and work runs on the path.
pub(super) fn judge(cx: &RuleCx<'_>, w: u32, reported: &mut Reported) -> Option<Diagnostic> {
    if cx.detached(w) || !cx.state(w).locks.is_empty() {
        return None;
    }
    let set = cx.effs(w).find(|e| plain_set(e))?;
    let key = set.table.as_deref()?;
    for r in (0..w).rev() {
        if cx.detached(r) || reported.contains(r) {
            continue;
        }
        let Some(read) = cx.effs(r).find(|e| {
            e.kind == EffectKind::Read
                && if set.kv {
                    e.kv && e.table.as_deref() == Some(key)
                } else {
                    !e.kv && !e.in_memory && query::same_state(e.table.as_deref(), Some(key))
                }
        }) else {
            continue;
        };
        // Both in one crate fn this body calls: judged there, once.
        if read.via.is_some() && read.via == set.via || !cx.state(r).locks.is_empty() {
            return None;
        }
        // The same entry: the two calls name it with the same value (`&key`, `&ip`), not
        // merely the same namespace.
        if !same_entry(cx, r, w, !set.kv) {
            continue;
        }
        let c = query::tests_of(cx.body, r).into_iter().find(|&c| {
            c > r && c < w && tests_read(cx, c, r) && (stops(cx, c) || cx.in_branches_of(c, w))
        })?;
        // A cache fill stores what a lookup after the miss returned; nothing is gated.
        if filled_from_lookup(cx, c, w) {
            return None;
        }
        // A row is such an entry when only whether it is there was asked, and the upsert
        // stores nothing taken from it (a row read, tested and upserted back is an update).
        // What it stores is a marker, not a value computed after the miss (a fill).
        if !set.kv
            && (!asks_absence(cx, c, r)
                || super::without_lock::writes_from(cx, w, r)
                || stores_computed(cx, c, w))
        {
            continue;
        }
        let end = cx.reach_end(w);
        // The work runs on the set's path: after it, or before it where the path goes on to it
        // (not in a branch that returns first, not in another arm).
        let others = cx.alternatives_of(w);
        let on_path = |i: u32| {
            !others.iter().any(|&(a, b)| a <= i && i <= b) && (i > w || cx.reach_end(i) > w)
        };
        // Another entry of the store is work too; the gate's own entry is not, nor a call known
        // as remote only by its receiver's name (`client.query_as(..)`).
        let not_work = |i: u32| {
            cx.effs(i).any(|e| e.kv && e.table.as_deref() == Some(key))
                || cx
                    .effs(i)
                    .all(|e| !acting(e) || e.kind == EffectKind::Remote && e.by_name)
        };
        let work = (c + 1..end).find(|&i| i != w && acts(cx, i) && !not_work(i) && on_path(i))?;
        reported.first(r);
        let mut d = cx.diag(
            &super::RULE,
            w,
            if set.kv {
                format!("the key-value entry `{key}` is checked, then set in a second step: a check-then-set with no lock")
            } else {
                format!("a row of `{key}` is looked up, then upserted in a second step: a check-then-set with no lock")
            },
        );
        d.primary_label = Some(format!("{} after the check", set.what));
        d.labels.push(cx.label(r, "read here"));
        d.labels.push(cx.label(c, "tested here"));
        d.labels.push(cx.label(work, "the work it gates runs here"));
        d.notes.push(
            "two concurrent requests both read the entry before either sets it, and both do the work".to_string(),
        );
        d.help = Some(if set.kv {
            "set the entry and test in one step (`SET key val NX PX ttl`, an `INSERT .. ON CONFLICT DO NOTHING` whose result is checked) and do the work only when this request set it".to_string()
        } else {
            "insert the row with `ON CONFLICT DO NOTHING` instead of the lookup and the upsert, and do the work only when the rows affected say this request inserted it".to_string()
        });
        d.notes.extend(cx.chain_notes(read));
        d.notes.extend(cx.chain_notes(set));
        return Some(d);
    }
    None
}

/// Do the calls at `r` and `w` pass a value of the same local or parameter (the entry's key),
/// besides the connection they run on? For a row (`local_key`), the value must be a local the
/// body made (`let key = CacheKey::Limit(user)`): two parameters passed to both calls may be
/// only the connection and a handle.
fn same_entry(cx: &RuleCx<'_>, r: u32, w: u32, local_key: bool) -> bool {
    let roots = |i: u32| -> Vec<&str> {
        match &cx.body.events[i as usize].kind {
            EventKind::Call(c) => c
                .steps
                .iter()
                .filter(|s| !matches!(s.name.as_str(), "query_async" | "query" | "exec_async"))
                .flat_map(|s| s.args.iter())
                .flat_map(|a| a.paths.iter().map(|p| query::first(p)))
                .collect(),
            _ => Vec::new(),
        }
    };
    let read = roots(r);
    roots(w)
        .iter()
        .any(|x| read.contains(x) && (!local_key || binds(cx, 0..r, x, false)))
}

/// A plain write of one key-value entry: not a claim (`SET NX`), not a deletion; or an upsert
/// of a row, which overwrites what a concurrent request stored.
fn plain_set(e: &Effect) -> bool {
    e.kind == EffectKind::Write
        && !e.delete
        && !e.in_memory
        && (e.kv || e.insert && e.upsert && e.table.is_some())
}

/// Does the test at `c` stop the flow (`if cooling.is_some() { return .. }`): is the event
/// after it a branch that always leaves?
fn stops(cx: &RuleCx<'_>, c: u32) -> bool {
    let after = cx.body.events[c as usize + 1..]
        .iter()
        .find(|e| !matches!(e.kind, EventKind::Cond(_)));
    matches!(
        after.map(|e| &e.kind),
        Some(EventKind::Enter(Region::Branch { diverges: true, .. }))
    )
}

/// Does the test at `c` only ask whether the lookup at `r` found the entry (`found.is_some()`,
/// `let Some(..)`), not compare what it found with a value (`found != Some(cid)`)?
fn asks_absence(cx: &RuleCx<'_>, c: u32, r: u32) -> bool {
    super::presence_test(cx, c, r)
        && matches!(&cx.body.events[c as usize].kind, EventKind::Cond(t)
            if !matches!(t.comparison, crate::ir::Comparison::Equal | crate::ir::Comparison::NotEqual)
                || t.values.iter().all(|v| v == "None"))
}

/// Does the set at `w` pass a local made after the test at `c` (`let chain = compute(..);
/// cache(key, &chain)`): a value filled in, not a marker?
fn stores_computed(cx: &RuleCx<'_>, c: u32, w: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    call.all_args().any(|a| {
        a.paths
            .iter()
            .any(|p| binds(cx, c..w, query::first(p), true))
    })
}

/// Is local `x` bound among the events `range` (or, with `assigns`, assigned there too)?
fn binds(cx: &RuleCx<'_>, range: std::ops::Range<u32>, x: &str, assigns: bool) -> bool {
    cx.body.events[range.start as usize..range.end as usize]
        .iter()
        .any(|e| match &e.kind {
            EventKind::Bind(b) => b.names.iter().any(|n| n == x),
            EventKind::Assign(a) => assigns && query::first(&a.target) == x,
            _ => false,
        })
}

/// Does the set at `w` store a value that a read or a remote call made after the test at `c`
/// returned (`let v = fetch(id).await?; cache.put(key, &v)`)?
fn filled_from_lookup(cx: &RuleCx<'_>, c: u32, w: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    (c + 1..w)
        .filter(|&i| {
            cx.effs(i)
                .any(|e| matches!(e.kind, EffectKind::Read | EffectKind::Remote))
        })
        .any(|i| {
            let derived = query::derived(cx.body, i);
            call.all_args()
                .any(|a| a.paths.iter().any(|p| derived.contains(query::first(p))))
        })
}
