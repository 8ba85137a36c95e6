//! `unguarded-state-transition`: a write of a record's state column whose filter holds only the
//! key (no expected current state, version, owner or lease), with no row lock and state check
//! before it in the same transaction.

use super::RuleCx;
use crate::diagnostic::{Applicability, Diagnostic, Edit, Suggestion};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::{Call, Comparison, EventKind, Region, Sp};
use crate::query;
use crate::sql::{SqlKind, SqlValue};
use crate::state_writes::{
    flag_with_change, guarded_filter, holder_writes, judged_by_callers, moved_state,
    only_transition, own_new_row, saved_back_state, state_read,
};

declare_rule! {
    /// ### What it does
    ///
    /// Flags an update of a record's state column — SQL `UPDATE .. SET status = ..`, diesel
    /// `.set(status.eq(..))` or `.set(&change)` (the fields a struct literal gave the changeset,
    /// not those left `None`; for a value typed as a model, its fields that are not `Option`s),
    /// sea-orm `col_expr(Column::Status, ..)` or a model whose `status` field is set, a sea-query
    /// builder (`Query::update().table(Orders::Table).value(Orders::Status, ..)`), a Redis
    /// `HSET job:{id} state ..`, a MongoDB `update_one(doc! { "_id": id }, doc! { "$set": {
    /// "status": .. } })` — whose filter holds only the record's key:
    /// no expected current state, no version, generation, owner or lease. A column is a state
    /// column when it is named like one (status, state, stage, phase, step, lifecycle; not a
    /// `state` written with a city, postcode or country: a province) or is assigned an
    /// enum-like value (`'paid'`, `Status::Cancelled`, `"PROCESSING"`), or is the mark of a
    /// one-time record's use (`used_at`, `exchanged_at`, `redeemed = true`, or `= 1`; not a
    /// `last_used_at`): marked by key alone, a second use is not refused. A model read
    /// by the function and saved back whole through the crate's upsert (`session.save(db)` running
    /// `INSERT .. ON CONFLICT (id) DO UPDATE SET state = excluded.state, ..`) is such an update:
    /// it writes the state column from the copy read earlier, keyed by the id alone. So is a
    /// flag set in the same statement as a change made from a column's own value (`SET
    /// is_admitted = TRUE, balance = balance - $1 WHERE pubkey = $2`): the flag marks a step
    /// that must happen once, and run twice, the change is made twice. And a claim of the row
    /// a subquery picked without locking it (`UPDATE transfers SET ledger_entry_id = $1 WHERE
    /// id = (SELECT id .. WHERE ledger_entry_id IS NULL LIMIT 1)`): the subquery's filter is
    /// read from the statement's snapshot and not tested again once the row is locked, so only
    /// the outer filter counts, and the column the pick tested is the state claimed, whatever
    /// its name; two workers pick the same row and both claim it (`FOR UPDATE SKIP LOCKED` in
    /// the subquery, or the test repeated outside it, is the fix).
    ///
    /// It stays silent when the filter also tests the state (or a version, owner, lease or
    /// token other than the table's own key, `token_id` of `tokens` names the row, a
    /// timestamp, that the record is not deleted, or a column the statement also sets:
    /// `SET applied_seq = $3 .. WHERE .. AND applied_seq = $4` is a compare-and-set on that
    /// column whatever its name, unless it is the key), when the row was locked (`SELECT .. FOR UPDATE`) earlier in the
    /// same transaction and its state checked after that (in code or in the `SELECT`'s own
    /// `WHERE`), in a `SERIALIZABLE` transaction whose read checked the state (every SQLite
    /// transaction is one: see `check-before-lock`), for inserts and
    /// upserts of new rows, for a row the function created itself (its key is the result of the
    /// function's own insert, or the value it handed that insert: `insert_channel(conn, &id, ..)`
    /// then `set_channel_open(conn, &id)`), for statements over the whole table, when the value written is the
    /// only one any update of the crate sets that column to (a `confirmed` flag set once: two
    /// writes race to the same state) and the statement changes nothing from its own value, for the holder's writes to a work row (a job, a task, a
    /// build) that the crate hands out one holder at a time (`SELECT .. FOR UPDATE SKIP LOCKED`
    /// filtered on the state, or a compare-and-set to an in-progress state) and never takes
    /// back (no reaper: see `processing-without-lease`; nor a requeue of every held row, `SET
    /// status = 'pending' WHERE status = 'running'` when a worker starts), and under
    /// `#[staleguard::fenced]`. A write that runs in a transaction handed in by the caller (a
    /// `tx` parameter, a repository holding the caller's transaction) is judged at the call
    /// site, where the transaction and its reads are, unless it is a routed handler
    /// (`#[post("/..")]`) that nothing in the crate calls: the framework hands it its own
    /// connection. A model saved whole (`.values(&*self)`) writes the state field the function
    /// set on the row it read (`grant.status = CONFIRMED; grant.save(conn)`). So does a save a
    /// derive or an attribute macro generates (`self.status = "failed"; self.update(db)`, a
    /// method the crate never defines, called with a database handle): it writes the fields the
    /// body assigned, by the row's key.
    ///
    /// ### Why is this bad?
    ///
    /// A record's state is a state machine, and every transition must start from the state it
    /// expects. An update by key alone moves the record from *whatever state it is in now*:
    ///
    /// ```text
    /// t0  worker A reads job 7: status = running (its lease)
    /// t1  A's lease expires; worker B takes job 7 over, finishes it: status = done
    /// t2  A wakes up and fails: UPDATE jobs SET status = 'failed' WHERE id = 7
    ///     <- a finished job is now failed, and will be retried
    /// ```
    ///
    /// The same happens to a payment callback that marks a cancelled order paid, or to a refund
    /// that lands after the order shipped.
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// sqlx::query("UPDATE jobs SET status = 'failed' WHERE id = $1")
    ///     .bind(job_id)
    ///     .execute(&pool)
    ///     .await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Make the transition a compare-and-set: put the state you expect (and, for a claimed
    /// record, the owner or lease) in the `WHERE`, and check the rows affected — 0 means
    /// another actor moved the record first:
    ///
    /// ```rust,ignore
    /// let moved = sqlx::query(
    ///     "UPDATE jobs SET status = 'failed' WHERE id = $1 AND status = 'running' AND owner = $2",
    /// )
    /// .bind(job_id)
    /// .bind(worker_id)
    /// .execute(&pool)
    /// .await?;
    /// if moved.rows_affected() == 0 {
    ///     return Ok(Outcome::Stale);
    /// }
    /// ```
    ///
    /// Where the function shows the one state the record must be in — its state read and
    /// tested against one string (`if status != "paid" { return .. }`, a `match` with one arm
    /// that goes on), or set by an earlier write of the function — the finding suggests that
    /// state in the filter (`.. AND status = 'paid'`, added in the SQL literal before any
    /// `RETURNING`; an `OR` filter is parenthesised), and says when the rows affected still
    /// need checking. `--fix` applies it when the state is a string; a Rust variant's SQL
    /// spelling is only guessed.
    ///
    /// Or lock the row first (`SELECT status .. FOR UPDATE`), check its state, then update it in
    /// the same transaction. `#[staleguard::idempotent(..)]` completes its record this way
    /// (`WHERE key = .. AND state = 'PROCESSING' AND owner = ..`), and
    /// `#[staleguard::fenced(..)]` re-reads and verifies under the lock.
    ///
    /// ### Known problems
    ///
    /// Which columns are the key is not known without the schema: any filter column that is not
    /// named like a state, a version, an owner, a lease or a time is taken for part of the key.
    /// A guard kept outside the statement — a single writer, a queue that hands each record to
    /// one consumer in memory, a database trigger or constraint — is not seen. The work-queue
    /// silence trusts the hand-out: a second writer of a held job that is not a reaper (an
    /// admin's cancel) is not reported. A write in a transaction
    /// handed in by a caller outside the crate (a trait implemented for another crate) is not
    /// judged. A state column named otherwise and assigned only bound values (`SET kind = $1`)
    /// is not recognised.
    pub(crate) static RULE = {
        name: "unguarded-state-transition",
        level: Warning,
        summary: "state column updated by key alone, with no current-state / version / owner predicate",
        applies: applies,
        check: check,
    };
}

/// A write of a state column (or an upsert that may save a model back).
fn applies(cx: &RuleCx<'_>) -> bool {
    cx.kinds().has(EffectKind::Write)
        && cx.effects().any_order().any(|e| {
            moved_state(e).is_some() || flag_with_change(e).is_some() || e.upsert && e.via.is_some()
        })
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    // `#[fenced]` re-reads and verifies under the lock; a transaction handed in is judged by
    // the caller that holds it.
    // A routed handler that nothing in the crate calls gets its connection from the framework.
    let entry = cx.body.routed && cx.krate.call_sites(cx.id).is_empty();
    if cx.body.fenced || judged_by_callers(cx.effects().body) && !entry {
        return;
    }
    for w in 0..cx.body.events.len() as u32 {
        for e in cx.effs(w) {
            // A model read here and saved back whole is judged here: its save method cannot
            // tell a new row from the one read.
            let saved_back = saved_back_state(cx, w, e);
            let Some(state) = moved_state(e)
                .or(saved_back.as_ref())
                .or_else(|| flag_with_change(e))
            else {
                continue;
            };
            if guarded_filter(e, &state.column)
                || only_transition(cx, e, state)
                || holder_writes(cx, e, state)
            {
                continue;
            }
            // A write gained from a helper that runs on its own connection was judged in the
            // helper.
            if let Some(helper) = e.via
                && saved_back.is_none()
                && !judged_by_callers(cx.krate.effects_of(helper).body)
            {
                continue;
            }
            let helper_locks = e.via.is_some_and(|h| {
                !cx.state(w).txs.is_empty() && locks_before_writing(cx, h, e.table.as_deref(), 0)
            });
            if helper_locks || checked_under_lock(cx, w, e, &state.column) || own_new_row(cx, w, e)
            {
                continue;
            }
            out.push(report(cx, w, e, state));
        }
    }
}

/// Does helper `h` (which runs in its caller's transaction) lock the row it writes before
/// writing it (`SELECT .. FOR UPDATE`, then checks, then the `UPDATE`), itself or through the
/// helpers it calls?
fn locks_before_writing(
    cx: &RuleCx<'_>,
    h: crate::facts::BodyId,
    table: Option<&str>,
    depth: u32,
) -> bool {
    if depth > 4 {
        return false;
    }
    let view = cx.krate.effects_of(h);
    let row = |e: &Effect| query::same_state(e.table.as_deref(), table);
    for i in 0..cx.krate.body(h).events.len() as u32 {
        let locks = view
            .at(i)
            .any(|e| e.kind == EffectKind::Read && e.locking && row(e));
        let write = view
            .at(i)
            .find(|e| e.kind == EffectKind::Write && !e.insert && row(e));
        match (locks, write) {
            (true, None) => return true,
            // Both in one call: the callee's own order decides.
            (true, Some(w)) => {
                return w
                    .via
                    .is_some_and(|next| locks_before_writing(cx, next, table, depth + 1));
            }
            (false, Some(_)) => return false,
            (false, None) => {}
        }
    }
    false
}

/// Was the row's state checked under a lock before the write? A protection — the row read
/// with `FOR UPDATE` in the same transaction, a lock still held, a compare-and-set whose result
/// is tested earlier in the same transaction (a lock row: `UPDATE queue_lock SET locked = true
/// WHERE locked = false`), a `SERIALIZABLE` transaction — and a read of the record under it
/// whose state is tested (in code, or in the read's own `WHERE`). Or the transaction already
/// holds the row: it inserted it, claimed it, or moved it with a compare-and-set.
fn checked_under_lock(cx: &RuleCx<'_>, w: u32, write: &Effect, column: &str) -> bool {
    let at_write = cx.state(w);
    let Some(tx) = at_write.txs.last() else {
        // Without a transaction only a lock held across the read and the write protects.
        return (0..w).any(|r| {
            let same_lock = cx.state(r).locks.iter().any(|l| at_write.locks.contains(l));
            same_lock && state_read(cx, r, w, write, column)
        });
    };
    let in_tx = |r: u32| cx.state(r).txs.contains(tx);
    let same_row =
        |e: &Effect| query::same_table_prefixed(e.table.as_deref(), write.table.as_deref());
    let from = tx.first_event();
    if cx.serializable(from, w)
        && (from..w).any(|r| in_tx(r) && state_read(cx, r, w, write, column))
    {
        return true;
    }
    (from..w).filter(|&p| in_tx(p)).any(|p| {
        cx.effs(p).any(|e| {
            // The transaction holds the row already.
            same_row(e)
                && (e.kind == EffectKind::Claim
                    || e.kind == EffectKind::Write && (e.insert || e.conditional))
        }) || {
            // A protection, then the state read under it.
            let protects = cx.effs(p).any(|e| {
                e.kind == EffectKind::Read && e.locking && same_row(e)
                    || e.kind == EffectKind::Lock
                    || e.kind == EffectKind::Claim && e.lock_claim
                    || e.kind == EffectKind::Write
                        && e.conditional
                        && query::tests_of(cx.body, p)
                            .into_iter()
                            .any(|c| c >= p && c < w)
            });
            protects && (p..w).any(|r| in_tx(r) && state_read(cx, r, w, write, column))
        }
    })
}

fn report(cx: &RuleCx<'_>, w: u32, e: &Effect, state: &Assigned) -> Diagnostic {
    let table = e.table.as_deref().unwrap_or("the record");
    let column = &state.column;
    let message = match e.via {
        Some(helper) => format!(
            "`{}` sets `{column}` of `{table}` with only the key in the filter",
            cx.krate.body(helper).name()
        ),
        None => format!("`{column}` of `{table}` is set with only the key in the filter"),
    };
    let mut d = cx.diag(&RULE, w, message);
    d.primary_label = Some(match e.via {
        Some(_) => "called here, in a transaction with no row lock or state check".to_string(),
        None => "no current state, version or owner in the filter".to_string(),
    });
    d.notes.extend(cx.chain_notes(e));
    if let Some(change) = e.sets.iter().find(|a| a.value == AssignedValue::Relative) {
        d.notes.push(format!(
            "the same statement changes `{}` from its own value: run twice, it is changed twice",
            change.column
        ));
    }
    d.help = Some(format!(
        "put the state you expect in the filter (`.. AND {column} = <expected>`, with the owner or lease for a claimed record) and check the rows affected, or lock the row (`SELECT .. FOR UPDATE`) and check its state first; `#[staleguard::idempotent(..)]` completes its record with this compare-and-set"
    ));
    if e.via.is_none() {
        d.suggestions.extend(expect_state(cx, w, e, column));
    }
    d
}

/// The fix when the body shows the one state the record must be in: `AND column = 'state'`
/// added to the `UPDATE`'s `WHERE` in its SQL literal (the predicate parenthesised when it
/// has an `OR`), before any `RETURNING`. Machine-applicable when the state is a string (a
/// string literal the read value was tested against, or an SQL literal another write of the
/// body set) and the statement names one table with plain identifiers; maybe-incorrect for a
/// state named by a Rust constant or variant (its SQL spelling is a guess). The message says
/// when the write's rows affected are not checked yet: with the state in the filter, 0 rows
/// means the record moved on.
fn expect_state(cx: &RuleCx<'_>, w: u32, write: &Effect, column: &str) -> Option<Suggestion> {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return None;
    };
    let (sql, at) = call
        .all_args()
        .find_map(|a| Some((a.sql()?, a.fix()?.sql_where?)))?;
    if sql.kind != SqlKind::Update {
        return None;
    }
    let (state, certain) = expected_state(cx, w, write, column)?;
    // A Rust variant (`Status::InProgress`) is stored under a name that is only guessed:
    // its snake case.
    let state = if certain { state } else { snake_case(&state) };
    let written = write.sets.iter().any(|a| {
        a.column == column
            && matches!(&a.value, crate::effects::AssignedValue::Const(v) if *v == state)
    });
    if written
        || state.is_empty()
        || !state
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' ' | '.' | ':'))
    {
        return None;
    }
    let point = |line: u32, col: u32| {
        cx.span(Sp {
            line,
            col,
            end_line: line,
            end_col: col,
        })
    };
    let condition = format!("{column} = '{state}'");
    let mut edits = Vec::new();
    if at.or {
        edits.push(Edit {
            span: point(at.sp.line, at.sp.col),
            replacement: "(".to_string(),
        });
    }
    edits.push(Edit {
        span: point(at.sp.end_line, at.sp.end_col),
        replacement: format!("{} AND {condition}", if at.or { ")" } else { "" }),
    });
    let checked = !query::tests_of(cx.body, w).is_empty();
    let message = if checked {
        format!("expect the state the function relies on: `.. AND {condition}`")
    } else {
        format!(
            "expect the state the function relies on: `.. AND {condition}`, and check the rows affected (0 means the record moved on first), which this write does not do yet"
        )
    };
    Some(Suggestion {
        message,
        applicability: if certain && !at.ambiguous && sql.tables.len() <= 1 {
            Applicability::MachineApplicable
        } else {
            Applicability::MaybeIncorrect
        },
        edits,
    })
}

/// The one state the record must be in when write `w` runs, as the body shows it, and
/// whether that is its SQL text for sure (a string): the nearest test before `w` of the
/// column as read from the same table — `x != "s"` whose branch leaves, `x == "s"` around the
/// write, a `match` whose only arm that goes on (or the one around the write) matches one
/// constant — or else the value an earlier write of the body set the column to (an SQL
/// literal; every such write sets the same one, on the same record, and `w` follows it in the
/// same block). Nothing between may write the column.
fn expected_state(cx: &RuleCx<'_>, w: u32, write: &Effect, column: &str) -> Option<(String, bool)> {
    let same_table =
        |e: &Effect| query::same_table_prefixed(e.table.as_deref(), write.table.as_deref());
    let sets_column = |i: u32| {
        cx.effs(i).any(|e| {
            e.kind == EffectKind::Write
                && !e.insert
                && same_table(e)
                && e.sets.iter().any(|a| a.column == column)
        })
    };
    // The locals holding a read of the record.
    let reads: Vec<(u32, crate::fxhash::FxHashSet<crate::name::Name>)> = (0..w)
        .filter(|&r| {
            cx.effs(r)
                .any(|e| e.kind == EffectKind::Read && same_table(e))
        })
        .map(|r| (r, query::derived(cx.body, r)))
        .collect();
    let tested = |t: u32, p: &str| {
        (p == column || query::last(p) == column)
            && reads
                .iter()
                .any(|(r, set)| *r < t && set.contains(query::first(p)))
    };
    for t in (0..w).rev() {
        let EventKind::Cond(test) = &cx.body.events[t as usize].kind else {
            continue;
        };
        if !test.deps.iter().any(|p| tested(t, p)) {
            continue;
        }
        if (t + 1..w).any(&sets_column) {
            return None;
        }
        let branches = cx.following_branches(t);
        let inside = |b: u32| b < w && w < cx.region_end(b);
        let diverges = |b: u32| {
            matches!(
                cx.body.events[b as usize].kind,
                EventKind::Enter(Region::Branch { diverges: true, .. })
            )
        };
        let value = match test.role {
            crate::ir::TestRole::If if test.values.len() == 1 && !test.negated => {
                let then = *branches.first()?;
                let holds = match test.comparison {
                    Comparison::NotEqual => diverges(then) && w > cx.region_end(then),
                    Comparison::Equal => inside(then),
                    Comparison::Ordering | Comparison::Other => false,
                };
                holds.then(|| test.values[0].clone())?
            }
            crate::ir::TestRole::Match if branches.len() == test.pats.len() => {
                let arm = match branches.iter().position(|&b| inside(b)) {
                    Some(k) => k,
                    None => {
                        let going_on: Vec<usize> = (0..branches.len())
                            .filter(|&k| !diverges(branches[k]))
                            .collect();
                        let [k] = going_on.as_slice() else {
                            return None;
                        };
                        *k
                    }
                };
                let [one] = &*test.pats[arm] else { return None };
                one.clone()
            }
            _ => return None,
        };
        return Some((value.to_string(), test.str_lits));
    }
    // The earlier writes of the column in the body.
    let earlier: Vec<u32> = (0..w).filter(|&p| sets_column(p)).collect();
    let &p = earlier.last()?;
    let literal = |i: u32| {
        let EventKind::Call(call) = &cx.body.events[i as usize].kind else {
            return None;
        };
        call.sql()?.assigns.iter().find_map(|(c, v)| match v {
            SqlValue::Literal(v) if c == column => Some(v.clone()),
            _ => None,
        })
    };
    let value = literal(p)?;
    let quoted = value.chars().any(char::is_alphabetic)
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "null"
        );
    let args = |i: u32| -> Vec<&str> {
        match &cx.body.events[i as usize].kind {
            EventKind::Call(c) => args_read(c),
            _ => Vec::new(),
        }
    };
    let same_record = args(w).iter().all(|a| args(p).contains(a))
        && cx
            .effs(p)
            .any(|e| write.where_cols.iter().all(|c| e.where_cols.contains(c)));
    let agreed = earlier.iter().all(|&q| literal(q).as_ref() == Some(&value));
    (quoted && same_record && agreed && query::same_block(cx.body, p, w))
        .then(|| (value.to_string(), true))
}

/// `InProgress` as `in_progress`; a name with no lowercase letter is kept.
fn snake_case(name: &str) -> String {
    if !name.chars().any(|c| c.is_lowercase()) {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// The places a call's arguments read (its bound values and executor).
fn args_read(call: &Call) -> Vec<&str> {
    call.all_args()
        .flat_map(|a| a.paths.iter().map(|p| p.as_str()))
        .collect()
}
