//! `processing-without-lease`: a record claimed as in progress (status PROCESSING / RUNNING /
//! LOCKED / .., or a `locked` flag) with no lease expiry and no owner written with it, and no
//! reaper in the crate that frees stale claims.

use super::{LIST_ENTRIES, RuleCx};
use crate::diagnostic::{Applicability, Diagnostic, Edit, Suggestion};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::EventKind;
use crate::kb::names::{
    is_claim_time_column, is_claim_word, is_expiry_column, is_in_progress_value, is_owner_column,
    is_progress_flag, is_state_column, is_work,
};
use crate::query;
use crate::redis_calls::{self, Command};

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
    /// And a claim by a time stamp: a work record's `started_at` (or any record's `locked_at`,
    /// `claimed_at`, `reserved_at`, `checked_out_at`, `dequeued_at`) set to the current time
    /// where the statement's filter, or the subquery that picks the row, requires it to be
    /// `NULL` (`UPDATE jobs SET started_at = now() WHERE id = $1 AND started_at IS NULL`,
    /// diesel's `.filter(started_at.is_null()).set(started_at.eq(now))`, the same text pushed
    /// into sqlx's `QueryBuilder`), when that filter takes no old stamp back (`OR started_at <
    /// now() - interval '10 minutes'` is a lease of its own).
    ///
    /// And a Redis claim made with no expiry — `SETNX` (`set_nx`, `cmd("SETNX")`) or `SET ..
    /// NX` with no `EX` / `PX` — whose expiry a later command of the same function sets on the
    /// same key (`EXPIRE`, `PEXPIRE`), or whose value says the work is under way
    /// (`BoardState::Initializing`, `"processing"`, `"pending"`) with no expiry set at all: the
    /// holder moves it on when done, and a holder that dies first leaves it for ever.
    ///
    /// And a Redis reliable-queue claim — an entry moved from a queue into a processing list
    /// (`BRPOPLPUSH`, `RPOPLPUSH`, `LMOVE`, `BLMOVE`, as a command or a method) — when nothing
    /// in the crate reads that list or takes entries from it (`LRANGE`, `LINDEX`, a pop, a move
    /// out of it): only the worker's own `LREM` ever removes an entry.
    ///
    /// `RUNNING`, `STARTED` and `LOCKED` count on a table of work (jobs, tasks, builds, runs, a
    /// queue): elsewhere they describe a resting state (a server that is up, funds locked in
    /// escrow).
    ///
    /// It stays silent when the expiry and the owner are written with the claim (in the same
    /// statement, by another write to the same table in the same transaction, or together in
    /// a run or attempt row the transaction writes: `INSERT INTO task_runs (task_id,
    /// worker_id, lease_expires_at)`), when a Redis claim sets a TTL, and when the crate has a
    /// **reaper** for the claim: a statement that updates or deletes rows of the same table
    /// filtered on the claimed column, on no key, and on a time that says since when a row is
    /// held (`UPDATE jobs SET status = 'queued' WHERE status = 'running' AND heartbeat_at <
    /// now() - interval '1 minute'`; `started_at`, `locked_at`, `updated_at`, a lease's
    /// expiry) — a sweep by when rows are due (`run_at <= now()`: a scheduler's promotion) or
    /// done (`completed_at < ..`: a purge) frees no claim — or a statement of the claiming function that, before the
    /// claim, moves the record's earlier claims on (`UPDATE builds SET status = 'failure' WHERE
    /// release_id = $1 AND status = 'in_progress'`), or the claimant's own earlier claims by
    /// the owner column the claim writes (`UPDATE jobs SET status = 'queued' WHERE worker_id =
    /// $1`, then the claim setting `worker_id`): the next attempt ends a stranded one.
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
    ///
    /// or, a Redis claim whose expiry is set by a second command:
    /// t0  worker A: SETNX lock:export 1        -> claimed
    /// t1  A's process is killed before its EXPIRE lock:export 60
    /// t2  lock:export never expires; every later export finds it taken   <- stuck for ever
    ///
    /// or, a reliable queue whose processing list nobody reads:
    /// t0  worker A: BRPOPLPUSH jobs jobs:processing 0   -> job 7, now held in jobs:processing
    /// t1  A's process is killed before its LREM jobs:processing 1 <job 7>
    /// t2  job 7 stays in jobs:processing; no worker ever sees it again   <- never run
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
    /// owner NX PX ttl`: for a `SETNX` and a later `EXPIRE` of the same key the finding suggests
    /// that command (`cmd("SET")..arg("NX").arg("EX").arg(s)`, or `set_options` with
    /// `ExistenceCheck::NX` and `SetExpiry::EX(s)`, `PX(ms)` for a `PEXPIRE`) and the `EXPIRE`
    /// removed; `--fix` applies it when both run on the same connection, the `EXPIRE` follows
    /// the test of the claim's answer and nothing between touches the key, and a `SETNX`'s
    /// answer is read as a `bool` (`SET .. NX` answers `OK` or nil where `SETNX` answers 1 or
    /// 0). `#[staleguard::idempotent(..)]` generates this state machine: an atomic
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
    /// code that makes no database call of its own (its arguments are not kept). A Redis claim
    /// and its `EXPIRE` are paired only in one function and on the same key expression, and
    /// the fix is offered only for an expiry written as an integer literal. A processing list
    /// is matched to its readers by the key's visible text (a literal, a constant, a
    /// `format!` pattern): a list read through a key built differently, or by another service,
    /// counts as never read. Expiry and owner columns are recognised
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

/// A write that claims a record, a Redis claim, or a move into a Redis list.
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    (k.has(EffectKind::Write) || k.has(EffectKind::Claim))
        && cx
            .effects()
            .any_order()
            .any(|e| claim_of(e).is_some() || e.kind == EffectKind::Claim && e.kv || e.list_move())
}

/// The column a write claims a record with: a state or flag ([`claimed`]), or a time stamp
/// ([`stamped`]).
fn claim_of(e: &Effect) -> Option<&Assigned> {
    claimed(e).or_else(|| stamped(e))
}

/// A record claimed by a time stamp set where it was `NULL` (`SET started_at = now() WHERE id
/// = $1 AND started_at IS NULL`, see [`Effect::null_claim`]): on a table of work, or by a
/// column whose name says it is taken (`locked_at`, `claimed_at`) on any table.
fn stamped(e: &Effect) -> Option<&Assigned> {
    if !e.null_claim() || e.delete || e.in_memory || e.kv {
        return None;
    }
    let table = e.table.as_deref()?;
    let first = e.sets.first()?;
    is_claim_time_column(&first.column, !is_work(table)).then_some(first)
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
    expiry_set_later(cx, out);
    marked_without_expiry(cx, out);
    list_claims(cx, out);
    for w in 0..cx.body.events.len() as u32 {
        for e in cx.effs(w) {
            // A claim made in a helper is reported in the helper, unless the in-progress value
            // is passed in here (`set_state(id, State::Running)`): only the caller shows it.
            if e.via.is_some() && !e.passed {
                continue;
            }
            // A key that expires on its own is its own lease.
            let Some(claim) = claim_of(e).filter(|_| !e.expires) else {
                continue;
            };
            let table = e.table.as_deref().unwrap_or_default();
            let (mut expiry, mut owner) = written(&e.sets);
            // The rest of the transaction may write them.
            if let Some(tx) = cx.state(w).txs.last() {
                for other in 0..cx.body.events.len() as u32 {
                    if other != w && cx.state(other).txs.contains(tx) {
                        for o in cx.effs(other) {
                            if o.kind != EffectKind::Write {
                                continue;
                            }
                            // The same table's row, or a run or attempt row written with the
                            // claim holding the whole lease (`INSERT INTO task_runs (task_id,
                            // worker_id, lease_expires_at)`): the claim's lease lives there.
                            let (x, y) = written(&o.sets);
                            if x && y || query::same_state(o.table.as_deref(), e.table.as_deref()) {
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

/// A Redis reliable-queue claim (`BRPOPLPUSH queue processing 0`, `LMOVE`) into a list that
/// nothing in the crate reads or takes entries from: the entry of a worker that dies before
/// its `LREM` stays in the processing list for ever, and the job is never run.
fn list_claims(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    for w in 0..cx.body.events.len() as u32 {
        let Some(e) = cx.effs(w).find(|e| e.list_move() && e.via.is_none()) else {
            continue;
        };
        let (Some(to), Some(from)) = (e.table.as_deref(), e.where_cols.first()) else {
            continue;
        };
        if to == from.as_str() || cx.krate.reaps(to, LIST_ENTRIES) {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            w,
            format!("entries moved from `{from}` into `{to}` are held there with no way back"),
        );
        d.primary_label = Some(format!("claimed into `{to}` here"));
        d.notes.push(format!("nothing in the crate reads `{to}` or moves its entries back: the entry of a worker that dies before removing it stays there for ever, and its job never runs"));
        d.help = Some(format!(
            "recover stale entries: a sweeper that takes entries of `{to}` older than a deadline back to `{from}` (store the claim time with the entry), or use a queue with visibility timeouts (Redis streams with `XAUTOCLAIM`)"
        ));
        out.push(d);
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
/// status = 'failure' WHERE rid = $1 AND status = 'in_progress'`, then the new claim), or the
/// claimant's own (`UPDATE jobs SET status = 'created' WHERE worker_id = $1`, then a claim that
/// writes `worker_id`)? A claim stranded by a crash is then ended by the next attempt: a reaper
/// run at claim time.
fn superseded(cx: &RuleCx<'_>, w: u32, claim_write: &Effect, claim: &Assigned) -> bool {
    (0..w).any(|earlier| {
        cx.effs(earlier).any(|e| {
            e.kind == EffectKind::Write
                && !e.insert
                && query::same_state(e.table.as_deref(), claim_write.table.as_deref())
                && (e.where_cols.contains(&claim.column)
                    || e.where_cols.iter().any(|c| {
                        is_owner_column(c) && claim_write.sets.iter().any(|a| &a.column == c)
                    }))
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

/// A Redis claim made with no expiry (`SETNX`, `set_nx`, `SET .. NX` without `EX` / `PX`) and
/// given one by a later command on the same key (`EXPIRE`, `PEXPIRE`): a crash between the two
/// leaves the key claimed for ever.
fn expiry_set_later(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let n = cx.body.events.len() as u32;
    for a in 0..n {
        let Some(claim) = cx
            .effs(a)
            .find(|e| e.kind == EffectKind::Claim && e.kv && e.via.is_none())
        else {
            continue;
        };
        let Some(cmd) = redis_calls::command_at(cx, a).filter(claims_without_expiry) else {
            continue;
        };
        let Some((b, expire)) = expiry_after(cx, a, &cmd, &["EXPIRE", "PEXPIRE"]) else {
            continue;
        };
        if cx.detached(a) != cx.detached(b) {
            continue;
        }
        let key = claim.table.as_deref().unwrap_or("the key");
        let mut d = cx.diag(
            &RULE,
            a,
            format!("`{key}` is claimed with no expiry, and a second command sets one"),
        );
        d.primary_label = Some("claimed here with no expiry".to_string());
        d.labels
            .push(cx.label(b, "the expiry is set here, in a second command"));
        d.notes.push("if the process dies between the two commands the key never expires, and every later attempt finds it claimed".to_string());
        d.help = Some("claim and set the expiry in one command: `SET key value NX PX ms` (`redis::cmd(\"SET\")` with `.arg(\"NX\").arg(\"PX\").arg(ms)`, or `set_options` with `ExistenceCheck::NX` and a `SetExpiry`)".to_string());
        d.suggestions
            .extend(set_with_expiry(cx, a, &cmd, b, &expire));
        out.push(d);
    }
}

/// The first command after event `a` of the function that sets an expiry (one of `names`) on
/// the key `cmd` claimed, with its event.
fn expiry_after<'a>(
    cx: &RuleCx<'a>,
    a: u32,
    cmd: &Command<'_>,
    names: &[&str],
) -> Option<(u32, Command<'a>)> {
    (a + 1..cx.body.events.len() as u32).find_map(|b| {
        redis_calls::command_at(cx, b)
            .filter(|x| names.contains(&x.name.as_str()) && x.same_key(cmd))
            .map(|x| (b, x))
    })
}

/// A Redis key claimed with `SETNX` (or `SET .. NX` with no `EX` / `PX`) and set to a state
/// that says the work is under way (`InitState::Initializing`, `"processing"`), with no expiry
/// set on it later in the function (that case is [`expiry_set_later`]'s): the holder moves the
/// state on when it is done, and a holder that dies first leaves it for ever.
fn marked_without_expiry(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let n = cx.body.events.len() as u32;
    for a in 0..n {
        // A key named for the state (`sync:{id}:state`) is claimed like a column: `check`
        // reports it.
        if !cx
            .effs(a)
            .any(|e| e.kind == EffectKind::Claim && e.kv && e.via.is_none() && !e.expires)
            || cx.effs(a).any(|e| claimed(e).is_some())
        {
            continue;
        }
        let Some(cmd) = redis_calls::command_at(cx, a).filter(claims_without_expiry) else {
            continue;
        };
        let Some(value) = cmd
            .args
            .first()
            .and_then(|v| v.value().or_else(|| v.strs().first()))
            .filter(|v| under_way(v))
        else {
            continue;
        };
        if expiry_after(cx, a, &cmd, &["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]).is_some() {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            a,
            format!("a Redis key is claimed as `{value}` with no expiry"),
        );
        d.primary_label = Some(format!(
            "set to `{value}` here, only if absent, with no expiry"
        ));
        d.notes.push(format!("the key says the work is under way until its holder moves it on: a holder that dies first leaves it `{value}` for ever, and every later attempt finds it claimed"));
        d.help = Some("give the claim an expiry in the same command (`SET key value NX PX ms`: `set_options` with `ExistenceCheck::NX` and a `SetExpiry`), and renew it while the work runs; or store the holder with the state so that a stale claim can be recognised and taken over".to_string());
        out.push(d);
    }
}

/// A state value that says work is under way: in progress, or one that is being set up
/// (`Initializing`, `Starting`, `Pending`).
fn under_way(value: &str) -> bool {
    let last = value
        .rsplit("::")
        .next()
        .unwrap_or(value)
        .to_ascii_lowercase();
    is_in_progress_value(value)
        || matches!(
            last.as_str(),
            "initializing" | "initialising" | "starting" | "creating" | "pending"
        )
}

/// A claim that sets no expiry: `SETNX` / `set_nx`, or `SET .. NX` (`redis::cmd`) with no
/// `EX`, `PX`, `EXAT`, `PXAT` or `KEEPTTL`.
fn claims_without_expiry(cmd: &Command<'_>) -> bool {
    let flags = || {
        cmd.args
            .iter()
            .flat_map(|a| a.strs())
            .map(|f| f.to_ascii_uppercase())
    };
    match cmd.name.as_str() {
        "SETNX" => true,
        "SET" => {
            flags().any(|f| f == "NX")
                && !flags().any(|f| matches!(f.as_str(), "EX" | "PX" | "EXAT" | "PXAT" | "KEEPTTL"))
        }
        _ => false,
    }
}

/// The fix: the claim sets the expiry itself (`SET key value NX EX s`, or `PX ms` for a
/// `PEXPIRE`) and the expiry command goes. Offered when the expiry is an integer literal and
/// its command a statement whose value nothing uses: `set_nx` becomes `set_options(..,
/// SetOptions::default().conditional_set(ExistenceCheck::NX).with_expiration(SetExpiry::EX(s)))`,
/// `cmd("SETNX")` becomes `cmd("SET")` with `NX` and the expiry added, and `SET .. NX` gains the
/// expiry. Machine-applicable when the two run on the same connection, the expiry command runs
/// whenever the body goes on past a test of the claim's answer (so only after a won claim),
/// nothing between touches the key, and (for `SETNX`, which answers `1` / `0` where `SET ..
/// NX` answers `OK` / nil) the answer is read as a `bool`.
fn set_with_expiry(
    cx: &RuleCx<'_>,
    a: u32,
    cmd: &Command<'_>,
    b: u32,
    expire: &Command<'_>,
) -> Option<Suggestion> {
    let [ttl] = expire.args.as_slice() else {
        return None;
    };
    let ttl = ttl.int()?;
    let unit = if expire.name == "PEXPIRE" { "PX" } else { "EX" };
    let removed = cx.fix_anchors().discards.iter().find(|x| x.call == b)?;
    let ttl_arg = ttl.as_str();
    let mut edits = Vec::new();
    let mut answer_kept = true;
    match (cmd.name.as_str(), cmd.is_method()) {
        ("SETNX", true) => {
            edits.push(cmd.rename(cx, "set_options", "SET"));
            edits.push(cmd.append(
                cx,
                &format!("redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::{unit}({ttl}))"),
                &[],
            ));
            answer_kept = false;
        }
        ("SETNX", false) => {
            edits.push(cmd.rename(cx, "set_options", "SET"));
            edits.push(cmd.append(cx, "", &["\"NX\"", &format!("\"{unit}\""), ttl_arg]));
            answer_kept = false;
        }
        ("SET", false) => {
            edits.push(cmd.append(cx, "", &[&format!("\"{unit}\""), ttl_arg]));
        }
        _ => return None,
    }
    edits.push(Edit {
        span: cx.span(removed.sp),
        replacement: String::new(),
    });
    let read_as_bool = cx.body.events.iter().any(|ev| {
            matches!(&ev.kind, EventKind::Bind(x)
                if x.calls.last() == Some(&a) && x.ty().is_some_and(|t| t.len() == 1 && t[0] == "bool"))
        });
    let won_first = query::tests_of(cx.body, a)
        .into_iter()
        .any(|t| t > a && t < b);
    let certain = cmd.same_target(expire)
        && query::same_block(cx.body, a, b)
        && won_first
        && cmd.untouched_between(cx, a, b)
        && (answer_kept || read_as_bool);
    let what = if unit == "PX" { "PX ms" } else { "EX s" };
    Some(Suggestion {
        message: format!(
            "set the expiry with the claim, in one command (`SET .. NX {what}`), and drop the separate `{}`",
            expire.name
        ),
        applicability: if certain {
            Applicability::MachineApplicable
        } else {
            Applicability::MaybeIncorrect
        },
        edits,
    })
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
        _ if e.null_claim() => format!("stamps `{}` where it was NULL here", claim.column),
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
