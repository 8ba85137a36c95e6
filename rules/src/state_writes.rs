//! State-column writes and what guards them, the questions `unguarded-state-transition` and
//! `blind-callback-write` share: which column a write moves, whether its filter expects a
//! current state, whether the row is the writer's own, whether a read of the record checked it.

use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::EventKind;
use crate::kb::names::{
    is_consumption_mark, is_deletion_marker, is_fencing_column, is_in_progress_value,
    is_state_column, is_state_value, is_time_column, is_work,
};
use crate::query;
use crate::rules::RuleCx;

/// The state column an update moves: a write that changes existing rows it picks, and sets a
/// column named like a state or to a state-like value.
pub(crate) fn moved_state(e: &Effect) -> Option<&Assigned> {
    if !updates_rows(e) {
        return None;
    }
    // The row an unlocked subquery picked, claimed by a column the pick tested (`SET
    // ledger_tx_id = $1 WHERE id = (SELECT id .. WHERE ledger_tx_id IS NULL LIMIT 1)`): that
    // column is the row's state, whatever it is called.
    if e.picked_claim() {
        return e.sets.first();
    }
    e.sets.iter().find(|a| {
        is_state_column(&a.column) && !in_postal_address(e)
            || matches!(&a.value, AssignedValue::Const(v) if is_state_value(v))
            // A one-time record marked used (`SET exchanged_at = now()`): it moves from unused
            // to used once.
            || is_consumption_mark(&a.column, a.value.constant())
    })
}

/// A flag set with a change made relative to the row's own value in the same statement (`SET
/// is_admitted = TRUE, balance = balance - $1`): the flag marks a step that must happen once,
/// and the change rides on it. Asked of a write that moves no state column ([`moved_state`]
/// is `None`): such a write moves this one.
pub(crate) fn flag_with_change(e: &Effect) -> Option<&Assigned> {
    if !updates_rows(e) || !changes_relatively(e) {
        return None;
    }
    e.sets
        .iter()
        .find(|a| matches!(&a.value, AssignedValue::Const(v) if v == "true" || v == "false"))
}

/// A write that changes existing rows of a known table it picks (not an insert, a delete, an
/// in-memory write or a statement over the whole table).
fn updates_rows(e: &Effect) -> bool {
    e.kind == EffectKind::Write
        && !e.insert
        && !e.delete
        && !e.in_memory
        && e.filtered
        && e.table.is_some()
}

/// Does the statement change a column relative to its own value (`balance = balance - $1`)?
/// Applied twice, that change is made twice.
pub(crate) fn changes_relatively(e: &Effect) -> bool {
    e.sets.iter().any(|a| a.value == AssignedValue::Relative)
}

/// Does the statement write a postal address (`city`, `country`, `zip`, `street` beside the
/// `state` it sets)? Then `state` is a province, not a lifecycle.
pub(crate) fn in_postal_address(e: &Effect) -> bool {
    const ADDRESS: &[&str] = &[
        "city", "country", "zip", "zipcode", "postal", "postcode", "street", "province",
    ];
    e.sets
        .iter()
        .any(|a| crate::kb::names::words(&a.column).any(|w| ADDRESS.contains(&w.as_str())))
}

/// Does the call at `w` save back a model this body read (`session.save(db)`,
/// `Membership::save(&member, conn)`) through the crate's own upsert (`INSERT .. ON CONFLICT
/// (id) DO UPDATE`, `REPLACE INTO`, diesel's `on_conflict`)? Then the upsert is no new row: it
/// is the row read, written back whole.
pub(crate) fn saves_back(cx: &RuleCx<'_>, w: u32, e: &Effect) -> bool {
    if e.kind != EffectKind::Write || !e.upsert || e.delete || e.in_memory {
        return false;
    }
    // The save itself: the callee runs the upsert, not a helper further down.
    let Some(save) = e.via else {
        return false;
    };
    if !cx.callees(w).contains(&save)
        || !cx
            .krate
            .effects_of(save)
            .body
            .direct
            .all()
            .any(|x| x.kind == EffectKind::Write && x.upsert)
    {
        return false;
    }
    let (Some(table), EventKind::Call(call)) =
        (e.table.as_deref(), &cx.body.events[w as usize].kind)
    else {
        return false;
    };
    let roots: Vec<&str> = call
        .recv
        .first()
        .map(|r| r.as_str())
        .into_iter()
        .chain(
            call.all_args()
                .flat_map(|a| a.paths.iter().map(|p| query::first(p))),
        )
        .collect();
    (0..w).any(|r| {
        cx.effs(r).any(|x| {
            x.kind == EffectKind::Read && !x.in_memory && x.table.as_deref() == Some(table)
        }) && {
            let derived = query::derived(cx.body, r);
            roots.iter().any(|p| derived.contains(*p))
        }
    })
}

/// The state column a call saves back (see [`saves_back`]): one the save's statement names,
/// or, when it writes the model whole (`.values(&*self)`: no columns known), a state field the
/// body assigned on the model before saving it (`access.status = Status::Initiated as i32;
/// access.save(&conn)`).
pub(crate) fn saved_back_state(cx: &RuleCx<'_>, w: u32, e: &Effect) -> Option<Assigned> {
    if !saves_back(cx, w, e) {
        return None;
    }
    if let Some(a) = e.sets.iter().find(|a| is_state_column(&a.column)) {
        return Some(a.clone());
    }
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return None;
    };
    let roots: Vec<&str> = call
        .recv
        .first()
        .map(|r| r.as_str())
        .into_iter()
        .chain(
            call.all_args()
                .flat_map(|a| a.paths.iter().map(|p| query::first(p))),
        )
        .collect();
    // The model assigned must be the row read, bound from the read's own result (`let Some(mut
    // m) = Model::find(..)`), not a new model built with some values read.
    let table = e.table.as_deref();
    let binders = query::binders(cx.body);
    let read_rows: Vec<&[crate::name::Name]> = (0..w)
        .filter(|&r| {
            cx.effs(r)
                .any(|x| x.kind == EffectKind::Read && !x.in_memory && x.table.as_deref() == table)
        })
        .map(|r| binders[r as usize].as_slice())
        .collect();
    cx.body.events[..w as usize]
        .iter()
        .rev()
        .find_map(|ev| match &ev.kind {
            EventKind::Assign(a) => {
                let (root, field) = a.target.split_once('.')?;
                (roots.contains(&root)
                    && read_rows
                        .iter()
                        .any(|names| names.iter().any(|n| n == root))
                    && !field.contains('.')
                    && is_state_column(field))
                .then(|| Assigned {
                    column: crate::name::Name::new(field),
                    value: match &a.value {
                        Some(v) => AssignedValue::Const(v.clone()),
                        None => AssignedValue::Unknown,
                    },
                })
            }
            _ => None,
        })
}

/// The filter tests more than the key: the state, a version / owner / lease / token, a time,
/// that the record is not deleted (`time_deleted IS NULL`, `deleted = false`), or a column the
/// statement also sets (`SET last_event_id = $2 .. WHERE .. AND last_event_id = $3`: a
/// compare-and-set on that column, whatever it is called).
pub(crate) fn guarded_filter(e: &Effect, column: &str) -> bool {
    e.where_cols.iter().any(|c| {
        c == column
            || is_state_column(c)
            // A fencing word in the table's own key (`token_id` of `tokens`) names the row.
            || is_fencing_column(c)
                && !is_key_column(c, e.table.as_deref())
                && !crate::kb::names::is_own_key(c, e.table.as_deref())
            || is_time_column(c)
            || is_deletion_marker(c)
            || e.sets.iter().any(|a| a.column == *c) && !is_key_column(c, e.table.as_deref())
    })
}

/// A column that names the row rather than a version of it: `id`, `uuid`, `key`, `<table>_id`
/// (setting it to the value the filter holds changes nothing).
fn is_key_column(c: &str, table: Option<&str>) -> bool {
    matches!(c, "id" | "uuid" | "key" | "pk")
        || table.is_some_and(|t| c.strip_suffix("_id").is_some_and(|s| s == t))
}

/// Is this the only value the crate ever moves the column to (`UPDATE subscriptions SET
/// status = 'confirmed'` and no other update of `status`)? Then two writes of it race to the
/// same state, and there is no other transition to lose.
pub(crate) fn only_transition(cx: &RuleCx<'_>, e: &Effect, state: &Assigned) -> bool {
    let (Some(table), AssignedValue::Const(v)) = (e.table.as_deref(), &state.value) else {
        return false;
    };
    // A change relative to the row's own value is made again by a second write. A one-time
    // record marked used (`SET used = true`) should refuse the second use, not repeat it.
    !changes_relatively(e)
        && !is_consumption_mark(&state.column, Some(v))
        && cx.krate.only_value(table, &state.column) == Some(v)
}

/// Is this a holder's write to a work row the crate hands out one holder at a time, and never
/// takes back (no reaper)? Only the holder can write the row then. The claim itself (a write
/// of an in-progress value) is not: its own lock or compare-and-set must make it exclusive.
pub(crate) fn holder_writes(cx: &RuleCx<'_>, e: &Effect, state: &Assigned) -> bool {
    let Some(table) = e.table.as_deref().filter(|t| is_work(t)) else {
        return false;
    };
    !matches!(&state.value, AssignedValue::Const(v) if is_in_progress_value(v))
        && cx.krate.holds_exclusively(table, &state.column)
}

/// Is the written row one this body created: its key comes from the result of the body's own
/// insert into the table (`let build = insert_build(..)` .. `set_build_status(build, ..)`), or
/// the body inserted it with the very value it now writes it by (`insert_channel(conn, &id,
/// ..)` then `set_channel_open(conn, &id, ..)`)? Nobody else has been handed the new row's key,
/// so no other transition can be lost.
pub(crate) fn own_new_row(cx: &RuleCx<'_>, w: u32, write: &Effect) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let inserts = |e: &Effect| {
        (e.kind == EffectKind::Write && e.insert || e.kind == EffectKind::Claim)
            && e.table.is_some()
            && query::same_state(e.table.as_deref(), write.table.as_deref())
    };
    (0..w).any(|r| {
        // Its own insert, or a helper's (whose summary may show another write first).
        (cx.effs(r).any(inserts)
            || cx
                .callees(r)
                .iter()
                .any(|&c| cx.krate.effects_of(c).body.direct.all().any(inserts)))
            && {
                let made = query::derived(cx.body, r);
                call.all_args()
                    .flat_map(|a| &a.paths)
                    .any(|p| made.contains(query::first(p)))
                    || inserted_with_same_value(cx, r, w, call)
            }
    })
}

/// Do the insert at `r` and the write `call` both hand a crate helper the same value (`&id`,
/// `&channel.channel_id`), besides the connection (the first argument of a free helper, one
/// borrowed `&mut`, or the one executor a statement runs on), with the write on a path the
/// insert goes on to (not in another arm, not past a `return` after it)?
fn inserted_with_same_value(cx: &RuleCx<'_>, r: u32, w: u32, call: &crate::ir::Call) -> bool {
    let EventKind::Call(insert) = &cx.body.events[r as usize].kind else {
        return false;
    };
    if cx.reach_end(r) <= w || cx.alternatives_of(w).iter().any(|&(a, b)| a <= r && r <= b) {
        return false;
    }
    let values = |c: &crate::ir::Call| -> Vec<crate::name::Name> {
        c.steps
            .iter()
            // The executor a statement runs on (`.exec(client)`, `.execute(&pool)`) is no value
            // of the row.
            .filter(|s| !(crate::apis::EXEC_STEPS.contains(&s.name.as_str()) && s.args.len() == 1))
            .flat_map(|s| {
                let skip = usize::from(!c.func.is_empty() && s.name == *c.func_last());
                s.args.iter().skip(skip)
            })
            .filter(|a| !a.mut_borrow && !a.closure)
            .flat_map(|a| a.paths.iter().cloned())
            .collect()
    };
    let inserted = values(insert);
    values(call).iter().any(|p| inserted.contains(p))
}

/// A body whose statements may run in its caller's transaction (a transaction, a connection
/// or an executor handed in, or held by `self`) and that opens none of its own: its writes are
/// judged at its call sites.
pub(crate) fn judged_by_callers(effects: &crate::effects::BodyEffects) -> bool {
    let opens_own = effects
        .direct
        .all()
        .any(|e| matches!(e.kind, EffectKind::TxBegin | EffectKind::TxClosure));
    (effects.tx_param.is_some() || effects.tx_holder || effects.conn_param) && !opens_own
}

/// Is event `r` a read of the written record whose state is checked before `w`: in its own
/// `WHERE`, or by a test of its result?
pub(crate) fn state_read(cx: &RuleCx<'_>, r: u32, w: u32, write: &Effect, column: &str) -> bool {
    cx.effs(r).any(|read| {
        read.kind == EffectKind::Read
            && query::same_table_prefixed(read.table.as_deref(), write.table.as_deref())
            && (read
                .where_cols
                .iter()
                .any(|c| c == column || is_state_column(c))
                || query::tests_of(cx.body, r)
                    .into_iter()
                    .any(|c| c > r && c < w))
    })
}
