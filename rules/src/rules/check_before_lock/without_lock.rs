//! The shape before any lock was added: one row read with no lock and no transaction, a value
//! of it tested, and the row written back by key with a value computed from the read (a lost
//! update), or its state column moved by key after a test of that column (a stale transition).

use super::{Reported, Verdict, Write, tests_read};
use crate::apis::MANY_ROWS_STEPS;
use crate::diagnostic::Diagnostic;
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::{Comparison, EventKind};
use crate::query;
use crate::rules::RuleCx;
use crate::state_writes;

/// Judges a write with no lock, no transaction and no temporary guard.
pub(super) fn judge(cx: &RuleCx<'_>, write: &Write<'_>, reported: &mut Reported) -> Verdict {
    match unprotected(cx, write.at, write.effect, reported) {
        Some(d) => Verdict::Stale(Box::new(d)),
        None => Verdict::Clean,
    }
}

/// The unprotected read-modify-write: a persisted row read (no lock, no transaction), tested,
/// and written back by key only with a value computed from the read, or with its tested state
/// column moved.
pub(super) fn unprotected(
    cx: &RuleCx<'_>,
    w: u32,
    write: &Effect,
    reported: &mut Reported,
) -> Option<Diagnostic> {
    let upsert = super::upsert_writing_back(write);
    let insert = write.insert && !upsert && !crate::state_writes::saves_back(cx, w, write);
    if write.in_memory || insert || write.delete || write.table.is_none() {
        return None;
    }
    let wtable = write.table.as_deref();
    let stale = stale_flip(cx, write);
    for r in (0..w).rev() {
        if cx.detached(r) || reported.contains(r) {
            continue;
        }
        // The read of the written table, when the event reads several (a helper that looks in
        // a cache first, then in the table).
        let Some(read) = cx
            .effs(r)
            .find(|e| e.kind == EffectKind::Read && e.table.as_deref() == wtable)
        else {
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
            // A crate fn that looks the row up and creates it (`create_with_password`): the
            // value is the row just made, which nobody else has been handed yet (a model
            // inserted whose table is not told counts).
            || cx.effs(r).any(|e| {
                e.kind == EffectKind::Write
                    && e.insert
                    && (e.table.is_none() || e.table.as_deref() == wtable)
            })
        {
            continue;
        }
        // The value written comes from the read (a lost update), or the write moves the row's
        // state by key alone after a test of the read decided it (a status flip on a stale
        // look: the callback that read `pending` sets `paid` over the `cancelled` written since).
        let from_read = writes_from(cx, w, r);
        if upsert && !from_read {
            continue;
        }
        let flipped = if from_read { None } else { stale };
        // Or the write moves a quantity by its own value (`SET balance = balance - $1`) with no
        // bound in its filter, after a bound test of that quantity as read (`if balance <
        // amount`): the change itself is atomic, the test is stale. Two withdrawals both see
        // enough and both take it.
        let moved = if from_read || flipped.is_some() || write.conditional {
            None
        } else {
            relative_column(write)
        };
        if !from_read && flipped.is_none() && moved.is_none() {
            continue;
        }
        // The test looks at a value read (`balance < amount`, `flight.seats_left == 0`), not
        // only at whether the row exists (`let Some(row) = find(..) else { return 404 }`, a
        // `match` on `Some` / `None`): a write by the key of a row found writes nothing stale.
        let derived = query::derived(cx.body, r);
        let tests = query::tests_of(cx.body, r);
        let value_test = |c: u32| {
            c > r
                && c < w
                && tests_read(cx, c, r)
                && !super::presence_test(cx, c, r)
                && !super::write_rechecks(cx, c, w)
                && !super::fixed_test(cx, c, r)
                && !super::marks_once(cx, c, r, w)
                && matches!(&cx.body.events[c as usize].kind, EventKind::Cond(t)
                    if t.deps.iter().any(|d| derived.contains(query::first(d))))
        };
        let found = match (flipped, moved) {
            // The flip: a test of the very column the write moves (`if payment.status !=
            // Received`, then `SET status = ..`; a test of something else, `if meta.is_partial`,
            // before a refresh that also sets a status column decides no transition), that
            // decides the write (it stops the flow, or the write sits in its branch), and does
            // not only skip a write of the value already there (`if status == 'archived'
            // { return }` before `SET status = 'archived'`).
            (Some(state), _) => (!super::only_skips_unchanged(cx, r, w))
                .then(|| {
                    tests.iter().copied().find(|&c| {
                        value_test(c)
                            && tested_fields(cx, c).contains(&state.column.as_str())
                            && !compares_with(cx, c, state)
                            && super::decides(cx, c, r, w)
                    })
                })
                .flatten(),
            // A write that only stamps the time takes nothing from the read but its key: the
            // test must be of the stamp itself (a set-once mark checked, then set).
            // The bound test of the quantity the write then moves by its own value.
            (None, Some(column)) => tests.iter().copied().find(|&c| {
                value_test(c)
                    && matches!(&cx.body.events[c as usize].kind, EventKind::Cond(t)
                    if t.comparison == Comparison::Ordering
                        && (tested_fields(cx, c).contains(&column)
                            || t.deps.iter().any(|d| {
                                query::first(d) == column && derived.contains(column)
                            })))
                    && super::decides(cx, c, r, w)
            }),
            (None, None) if plain_stamp(write) => tests.iter().copied().find(|&c| {
                value_test(c)
                    && tested_fields(cx, c)
                        .iter()
                        .any(|f| write.sets.iter().any(|a| a.column == *f))
            }),
            (None, None) => tests
                .iter()
                .copied()
                .find(|&c| value_test(c))
                .or_else(|| (r + 1..w).find(|&c| super::validates(cx, c, &derived))),
        };
        let Some(c) = found else {
            continue;
        };
        // A whole model saved back: the test must be of a field the function then changed
        // (`if share.views >= share.max_views {..} share.views += 1; share.save(..)`), the
        // read-modify-write itself, not a check of something else before an unrelated edit.
        // Or of a counter the crate moves by increments elsewhere (`SET access_count =
        // access_count + 1`): the whole row saved back writes the count read before the test
        // over an increment made since, and the limit it tested is crossed.
        // (An upsert written here is judged by what it writes: the value came from the read.)
        if write.insert
            && (!upsert || write.via.is_some())
            && !changes_tested_field(cx, c, w)
            && !counted_elsewhere(cx, wtable, &tested_fields(cx, c))
        {
            continue;
        }
        // Re-read between the test and the write: the later read is the one that counts. Or the
        // row claimed in between (`UPDATE .. SET state = 'processing' WHERE key = $1 AND state =
        // 'requested'`, its rows affected tested): the claim re-checked what the read saw.
        // (Not one in another arm than the write's: `if text { claim } else { save }`.)
        let elsewhere = cx.alternatives_of(w);
        if (r + 1..w).any(|x| {
            !elsewhere.iter().any(|&(a, b)| (a..=b).contains(&x))
                && cx.effs(x).any(|e| {
                    e.table.as_deref() == wtable
                        && (e.kind == EffectKind::Read
                            || e.kind == EffectKind::Claim
                            || e.kind == EffectKind::Write
                                && e.conditional
                                && !query::tests_of(cx.body, x).is_empty())
                })
        }) {
            return None;
        }
        reported.first(r);
        let (message, label, help) = if let Some(column) = moved {
            (
                format!(
                    "`{column}` read and tested against a bound without a lock, then moved by its own value with no bound in the write"
                ),
                format!("`{column}` moved here, whatever it has become since the check"),
                if write.sql.is_some() {
                    format!(
                        "carry the bound into the write (`UPDATE .. SET {column} = {column} - $1 WHERE id = $2 AND {column} >= $1`) and check the rows affected, or take a row lock (`SELECT .. FOR UPDATE` in a transaction) and re-read; `#[staleguard::fenced(..)]` generates this shape"
                    )
                } else {
                    format!(
                        "carry the bound into the write's filter (`{{ \"_id\": id, \"{column}\": {{ \"$gte\": amount }} }}` for a document, a compare-and-set for a key) and check how many records it changed, or lock the record before it is read; `#[staleguard::fenced(..)]` generates this shape"
                    )
                },
            )
        } else if from_read {
            (
                "state read and tested, then written back from the stale value without a lock".to_string(),
                "written here from the value read before".to_string(),
                "take a row lock (`SELECT .. FOR UPDATE` in a transaction) and re-read, or make the write conditional (`UPDATE .. SET x = x - $1 WHERE id = $2 AND x >= $1`) and check the rows affected; `#[staleguard::fenced(..)]` generates this shape".to_string(),
            )
        } else {
            (
                "state read and tested without a lock, then moved by key alone".to_string(),
                "state set here on the strength of the earlier read".to_string(),
                "put the state the check expects into the write's filter (`UPDATE .. SET status = 'refunded' WHERE id = $1 AND status = 'settled'`) and check the rows affected, or take a row lock (`SELECT .. FOR UPDATE` in a transaction) and re-read; `#[staleguard::fenced(..)]` generates this shape".to_string(),
            )
        };
        let mut d = cx.diag(&super::RULE, w, message);
        d.primary_label = Some(label);
        d.labels.push(cx.label(r, "state read here"));
        d.labels.push(cx.label(c, "checked here"));
        d.help = Some(help);
        d.notes.extend(cx.chain_notes(read));
        d.notes.extend(cx.chain_notes(write));
        return Some(d);
    }
    None
}

/// The state column the write moves by its key alone: a state column set, with no test of the
/// current state (nor a version, owner or time) in its filter, and not the only value the crate
/// ever moves that column to (racing writers would all store it).
fn stale_flip<'e>(cx: &RuleCx<'_>, write: &'e Effect) -> Option<&'e Assigned> {
    let state = state_writes::moved_state(write)?;
    (!state_writes::guarded_filter(write, &state.column)
        && !state_writes::only_transition(cx, write, state))
    .then_some(state)
}

/// The column the write moves by its own value (`SET balance = balance - $1`), when it sets one.
fn relative_column(write: &Effect) -> Option<&str> {
    write
        .sets
        .iter()
        .find(|a| matches!(a.value, AssignedValue::Relative))
        .map(|a| a.column.as_str())
}

/// Does the write only stamp the current time (`SET ended_at = $2` with the clock's `now`), by
/// a filter that does not hold the stamp (not a compare-and-set on it)? Then the row read gives
/// it nothing but its key: two racing writers stamp the same moment, and only a test of the
/// stamp itself makes the race matter.
fn plain_stamp(write: &Effect) -> bool {
    !write.sets.is_empty()
        && write
            .sets
            .iter()
            .all(|a| a.value == AssignedValue::Now && !write.where_cols.contains(&a.column))
}

/// The fields the test at `c` looks at: the segments after the root of each path it reads
/// (`payment.status`), also through a local bound from such a path (`let old = payment.status;
/// if old != Received`).
fn tested_fields<'b>(cx: &'b RuleCx<'_>, c: u32) -> Vec<&'b str> {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return Vec::new();
    };
    let mut paths: Vec<&str> = Vec::new();
    for d in &t.deps {
        if d.contains('.') {
            paths.push(d.as_str());
            continue;
        }
        if let Some(b) = query::binding(cx.body, c, d) {
            paths.extend(
                b.deps
                    .iter()
                    .map(|x| x.as_str())
                    .filter(|x| x.contains('.')),
            );
        }
    }
    paths
        .into_iter()
        .flat_map(|p| p.split('.').skip(1))
        .collect()
}

/// Does the test at `c` compare with the very value the write stores in the state column (`if
/// status == 'archived'`, then `SET status = 'archived'`)? Skipping a write of what is there
/// already, or making it only when it is not, decides no transition.
fn compares_with(cx: &RuleCx<'_>, c: u32, state: &Assigned) -> bool {
    let AssignedValue::Const(v) = &state.value else {
        return false;
    };
    let bare = |x: &str| {
        x.rsplit("::")
            .next()
            .unwrap_or(x)
            .trim_matches(['\'', '"'])
            .to_ascii_lowercase()
    };
    matches!(&cx.body.events[c as usize].kind, EventKind::Cond(t)
        if matches!(t.comparison, Comparison::Equal | Comparison::NotEqual)
            && t.values.iter().any(|x| bare(x) == bare(v)))
}

/// Does the function assign, between the test at `c` and the write at `w`, a field the test
/// looked at (`share.views` tested, then `share.views += 1`)?
fn changes_tested_field(cx: &RuleCx<'_>, c: u32, w: u32) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let fields: Vec<&str> = t
        .deps
        .iter()
        .map(|d| d.as_str())
        .filter(|d| d.contains('.'))
        .collect();
    cx.body.events[c as usize + 1..w as usize]
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Assign(a) if fields.contains(&a.target.as_str())))
}

/// Does some statement of the crate move one of `fields` of `table` by an increment of its own
/// value (`SET access_count = access_count + 1`): a counter that concurrent requests change?
fn counted_elsewhere(cx: &RuleCx<'_>, table: Option<&str>, fields: &[&str]) -> bool {
    table.is_some()
        && cx.krate.direct_effects().any(|e| {
            e.kind == EffectKind::Write
                && !e.insert
                && e.table.as_deref() == table
                && e.sets.iter().any(|a| {
                    matches!(a.value, AssignedValue::Relative)
                        && fields.contains(&a.column.as_str())
                })
        })
}

/// A read of many rows (`.all(db)`, `fetch_all`, `load`): a batch rewrite (a migration, a
/// re-encryption pass) walking a snapshot, not one row's read-modify-write.
pub(super) fn many_rows(cx: &RuleCx<'_>, r: u32) -> bool {
    matches!(&cx.body.events[r as usize].kind, EventKind::Call(c)
        if c.steps.iter().any(|s| MANY_ROWS_STEPS.contains(&s.name.as_str())))
}

/// Is the value written at `w` computed from the read at `r` (its arguments, or its receiver:
/// the model read, saved back whole, or an ORM model converted from the row read)?
pub(super) fn writes_from(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    // `let mut m = row.into_active_model(); m.title = Set(fresh.title); m.update(db)`: a sea-orm
    // active model writes only the fields set on it, so only their values count, and a value
    // fetched afresh (a provider's answer asked with the row's key) is no stale one.
    if let Some((root, made)) = active_model_update(cx, w) {
        let stale = value_derived(cx, r, w);
        let stale_dep =
            |d: &crate::name::Name| query::first(d) != root && stale.contains(query::first(d));
        // Its fields: those a literal gave it (`orders::ActiveModel { seats: Set(n - 1), .. }`;
        // the row's key, `id: Set(row.id)`, names the row and writes nothing) and those
        // assigned since.
        return made.lit().is_some()
            && made
                .deps
                .iter()
                .any(|d| stale_dep(d) && !crate::sql::is_plain_key(query::last(d)))
            || cx.body.events[r as usize..w as usize].iter().any(|e| {
                matches!(&e.kind, EventKind::Assign(a)
                    if query::first(&a.target) == root && a.deps.iter().any(stale_dep))
            });
    }
    if query::depends_on(cx.body, w, r) {
        return true;
    }
    // `coupon.save(&conn)`: a crate method run on the model read writes it back.
    if let EventKind::Call(c) = &cx.body.events[w as usize].kind
        && c.func.is_empty()
        && !cx.callees(w).is_empty()
        && c.recv
            .first()
            .is_some_and(|root| query::derived(cx.body, r).contains(root.as_str()))
    {
        return true;
    }
    // `model.seats_left = Set(left - 1); model.update(db)`: an ORM model whose assigned field
    // comes from the read (fields left unset are not written).
    let derived = query::derived(cx.body, r);
    let EventKind::Call(c) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let Some(root) = c.recv.first() else {
        return false;
    };
    cx.body.events[r as usize..w as usize].iter().any(|e| {
        matches!(&e.kind, EventKind::Assign(a)
            if query::first(&a.target) == root.as_str()
                && a.deps.iter().any(|d| query::first(d) != root.as_str() && derived.contains(query::first(d))))
    })
}

/// The local updated at `w`, and the binding that made it, when the write is a sea-orm active
/// model's `update` and the local was made from a row (`row.into_active_model()`) or declared
/// as an `ActiveModel` (also by a literal of that type).
pub(super) fn active_model_update<'b>(
    cx: &'b RuleCx<'_>,
    w: u32,
) -> Option<(&'b str, &'b crate::ir::Bind)> {
    let EventKind::Call(c) = &cx.body.events[w as usize].kind else {
        return None;
    };
    let ([root], Some(step)) = (c.recv.as_slice(), c.steps.first()) else {
        return None;
    };
    if step.name != "update" {
        return None;
    }
    let made = query::binding(cx.body, w, root)?;
    let typed = made
        .ty()
        .and_then(|t| t.first())
        .is_some_and(|t| t.rsplit("::").next() == Some("ActiveModel"))
        || made
            .lit()
            .is_some_and(|l| l.ty.rsplit("::").next() == Some("ActiveModel"));
    let converted = made.calls.iter().any(|&k| {
        matches!(&cx.body.events[k as usize].kind, EventKind::Call(m)
            if m.steps.iter().any(|s| s.name == "into_active_model"))
    });
    (typed || converted).then_some((root.as_str(), made))
}

/// [`query::derived`] from the read at `r` up to `w`, by value: a local bound from a call that
/// is awaited or reads or asks a remote itself (`details_from_provider(&row.identifier).await`)
/// holds that fresh answer, not the row's state, even when the row's key went into the question.
fn value_derived(cx: &RuleCx<'_>, r: u32, w: u32) -> crate::fxhash::FxHashSet<crate::name::Name> {
    let mut set = crate::fxhash::FxHashSet::default();
    for ev in &cx.body.events[r as usize..w as usize] {
        let EventKind::Bind(b) = &ev.kind else {
            continue;
        };
        let fresh = !b.calls.contains(&r)
            && b.calls.iter().any(|&k| {
                (matches!(&cx.body.events[k as usize].kind, EventKind::Call(c) if c.awaited())
                    || cx
                        .effs(k)
                        .any(|e| matches!(e.kind, EffectKind::Read | EffectKind::Remote)))
            });
        let from_read =
            b.calls.contains(&r) || b.deps.iter().any(|d| set.contains(query::first(d)));
        for n in b.names.iter().filter(|n| n.as_str() != "_") {
            if from_read && !fresh {
                set.insert(n.clone());
            } else {
                set.remove(n);
            }
        }
    }
    set
}
