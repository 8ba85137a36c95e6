//! `duplicate-as-failure`: an idempotency / request / dedup record claimed by an insert (or a
//! Redis `SET NX`) whose unique-key conflict is answered — as an error, or as a success before
//! the work is committed — without reading the record that won.

use super::RuleCx;
use super::check_before_lock::check_then_insert::lookup_then_insert;
use crate::apis;
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::{EventKind, Region, Test, TestRole};
use crate::kb::names::{
    is_conflict_variant, is_idempotency_record, is_request_key_column, is_response_column,
    is_unique_violation_value,
};
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags the unique-key conflict of an idempotency claim answered without looking at the
    /// record: an idempotency / request / dedup record is inserted (SQL, diesel, sea-orm,
    /// tokio-postgres) or claimed (`INSERT .. ON CONFLICT DO NOTHING`, `INSERT IGNORE`, Redis
    /// `SET NX` / `SETNX`), and the branch that sees the conflict — sqlx's
    /// `is_unique_violation()` or `constraint()` (asked whether there is one, or compared with
    /// a unique key's name: `Some("events_pkey")`), SQLSTATE `23505` (MySQL `1062`, SQLite
    /// `2067`), diesel's
    /// `DatabaseErrorKind::UniqueViolation`, tokio-postgres' `SqlState::UNIQUE_VIOLATION`,
    /// sea-orm's `UniqueConstraintViolation` / `RecordNotInserted`, zero rows affected, an
    /// empty `RETURNING`, a `SET NX` that returned false — answers with an error, a 409 or 500,
    /// a "duplicate" error, or a plain success, and reads nothing.
    ///
    /// And a request made idempotent by a lookup: the record is looked up by some columns and,
    /// when found, returned as the answer (not "nothing": not `Ok(false)` or `None`); otherwise
    /// it is inserted, under a unique key the schema files declare on those columns, and the
    /// insert's error is passed on as it is. A duplicate that arrives between the first
    /// request's lookup and its insert is refused by the key and told it failed. A lookup in a
    /// loop (one writer working through items, or a free random code searched for), one run
    /// once at startup, and one no request reaches (no caller in the workspace, no route) are
    /// left alone.
    ///
    /// A record is an idempotency record when its table, entity or key is named like one
    /// (`idempotency_keys`, `idem:{key}`, `message_dedup`, `processed_events`, `inbox`,
    /// `api_requests`), when the claim writes an idempotency key, request id or operation id
    /// column, when its key comes from an `Idempotency-Key` header or an `idempotency_key` /
    /// `request_id` / `operation_id` parameter, or when the crate stores a response in it.
    ///
    /// It stays silent when the conflict branch (or the code between the claim and the test, or
    /// a check before the claim) reads the record — a `SELECT`, an ORM find, a Redis `GET`, a
    /// crate function that does — or re-claims it by compare-and-set; for unique violations on
    /// records that are not idempotency records (a taken user name is a real conflict); for a
    /// success answered while the claim is still in the work's own transaction (an inbox row
    /// inserted with the work: a duplicate waits for the first transaction, and sees the row
    /// only once the work is committed); and under `#[staleguard::idempotent]`. A helper that
    /// hands the conflict to its callers as its own error variant (`StoreError::AlreadyExists`)
    /// is judged where a caller tests for that variant.
    ///
    /// ### Why is this bad?
    ///
    /// A duplicate that arrives while the first request is still in flight is not a failure, and
    /// one that arrives after it finished is owed the first answer:
    ///
    /// ```text
    /// t0  request A (key K): INSERT INTO idempotency_keys (K) ok; starts the transfer
    /// t1  the client times out and retries as B (key K): unique violation -> 409 / 500
    /// t2  the client takes the error for a failure and retries again, or gives up and
    ///     tells the user the transfer failed                    <- but A goes on to succeed
    /// t3  A commits; every later retry also gets 409 instead of A's receipt
    ///
    /// or, answered with a plain success:
    /// t1  B: conflict -> 200 OK, "already done"
    /// t2  A fails after all and rolls its work back              <- B was told it succeeded
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// match sqlx::query("INSERT INTO idempotency_keys (key, state) VALUES ($1, 'started')")
    ///     .bind(&key)
    ///     .execute(&db)
    ///     .await
    /// {
    ///     Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
    ///         return Err(ApiError::Conflict);
    ///     }
    ///     res => res?,
    /// };
    /// ```
    ///
    /// ### Use instead
    ///
    /// On the conflict, read the record and answer from its state: still in progress → 409
    /// (or wait and re-read), done → the stored response, the same key with another payload →
    /// 422, failed → take it over by compare-and-set:
    ///
    /// ```rust,ignore
    /// Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
    ///     let (state, fingerprint, response): (String, String, Option<String>) = sqlx::query_as(
    ///         "SELECT state, fingerprint, response FROM idempotency_keys WHERE key = $1",
    ///     )
    ///     .bind(&key)
    ///     .fetch_one(&db)
    ///     .await?;
    ///     return Ok(match (state.as_str(), response) {
    ///         _ if fingerprint != request_fingerprint => Answer::KeyReused,      // 422
    ///         ("done", Some(response)) => Answer::Replay(response),            // 200, stored
    ///         _ => Answer::InProgress,                                          // 409
    ///     });
    /// }
    /// ```
    ///
    /// `#[staleguard::idempotent(..)]` generates this state machine: the claim with a lease and
    /// an owner, the replay of the stored response, "in progress" for a duplicate in flight,
    /// "mismatch" for a key reused with another payload.
    ///
    /// ### Known problems
    ///
    /// Which unique index failed is not known without the schema: the conflict is taken for the
    /// idempotency key's when the record is an idempotency record. A record named otherwise
    /// (a `payments` table deduplicated by a `uid` column) is not recognised unless its key
    /// column or the key's source says so. The answer is judged from the branch's own code: a
    /// conflict handed up with `?` or as a generic error and answered by a caller outside the
    /// crate is not seen, and a branch that reads the record through an unresolved call (a trait
    /// object, a closure) is taken to read nothing.
    pub(crate) static RULE = {
        name: "duplicate-as-failure",
        level: Warning,
        summary: "unique-key conflict on an idempotency claim answered without reading the record's state",
        applies: applies,
        check: check,
    };
}

/// An insert or a claim of a record.
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    (k.has(EffectKind::Write) || k.has(EffectKind::Claim)) && cx.effects().any_order().any(claims)
}

/// A new row or key written once (not a lock, not a delete).
fn claims(e: &Effect) -> bool {
    match e.kind {
        EffectKind::Claim => !e.lock_claim && !e.delete,
        EffectKind::Write => e.insert && !e.delete && !e.in_memory,
        _ => false,
    }
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.idempotent {
        return;
    }
    let mut reported: Vec<u32> = Vec::new();
    for c in 0..cx.body.events.len() as u32 {
        let Some(claim) = cx.effs(c).find(|e| claims(e)) else {
            continue;
        };
        let mut record: Option<bool> = None;
        for t in query::tests_of(cx.body, c) {
            let EventKind::Cond(test) = &cx.body.events[t as usize].kind else {
                continue;
            };
            for (branch, at) in conflict_branches(cx, t, test, claim) {
                if reported.contains(&branch) || reads_record(cx, c, t, branch, claim) {
                    continue;
                }
                if !*record.get_or_insert_with(|| idempotency_record(cx, c, claim)) {
                    break;
                }
                let EventKind::Enter(Region::Branch { fails, .. }) =
                    cx.body.events[branch as usize].kind
                else {
                    continue;
                };
                // A success answered inside the transaction that holds the claim: a duplicate
                // sees the row only once that transaction, and the work, committed.
                if !fails && in_transaction(cx, c, claim) {
                    continue;
                }
                if judged_by_callers(cx) {
                    return;
                }
                reported.push(branch);
                out.push(report(cx, c, at, claim, fails));
            }
        }
    }
    checked_then_inserted(cx, out);
}

/// A lookup that answers a duplicate with the record it finds (a branch that leaves with a
/// success that is not "nothing": not `Ok(false)`, `None`), then the insert of the record under a unique key the schema declares on the
/// lookup's columns, with the insert's outcome not looked at: a duplicate that arrives while
/// the first request is between its lookup and its insert is refused by the key, and the
/// refusal goes back as an error instead of the record.
fn checked_then_inserted(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let mut no_request: Option<bool> = None;
    for w in 0..cx.body.events.len() as u32 {
        let Some(p) = lookup_then_insert(cx, w, &|_| false) else {
            continue;
        };
        // In a loop: one writer working through its items in turn (an event loop), or a key
        // looked up until a free one is found (a random code drawn again): no duplicate of a
        // request races it.
        if cx
            .enclosing_regions(w)
            .any(|(_, r)| matches!(r, Region::Loop))
        {
            continue;
        }
        // Run once as the process starts: no request is in flight yet. Called by nothing
        // of the workspace and routed nowhere: no request reaches it that the lint can see.
        if *no_request.get_or_insert_with(|| {
            cx.runs_once_at_startup() || !cx.body.routed && cx.krate.call_sites(cx.id).is_empty()
        }) {
            continue;
        }
        if cx
            .krate
            .facts
            .duplicates_allowed(p.table, &p.read.where_cols)
            != Some(false)
        {
            continue;
        }
        let answers_found = cx.following_branches(p.check).iter().any(|&b| {
            matches!(
                cx.body.events[b as usize].kind,
                EventKind::Enter(Region::Branch {
                    diverges: true,
                    fails: false,
                    nothing: false,
                })
            )
        });
        if !answers_found {
            continue;
        }
        let (table, cols) = (p.table, p.read.where_cols.join(", "));
        let mut d = cx.diag(
            &RULE,
            w,
            format!("a duplicate that races the lookup of `{table}` fails on its unique key instead of getting the record"),
        );
        d.primary_label = Some(
            "a concurrent duplicate's insert is refused here, and the refusal goes back as an error"
                .to_string(),
        );
        d.labels.push(cx.label(p.read_at, "looked up here"));
        d.labels.push(cx.label(
            p.check,
            "a duplicate found here is answered with the record",
        ));
        d.notes.push(format!("two requests with the same ({cols}) both find nothing; the second insert hits the unique key, and its caller is told it failed while the first goes on"));
        d.notes.extend(cx.chain_notes(p.read));
        d.notes.extend(cx.chain_notes(p.insert));
        d.help = Some(format!(
            "insert with `ON CONFLICT ({cols}) DO NOTHING` and, when nothing was inserted, read the row that won (or catch the unique violation and read it), then answer from its state; `#[staleguard::idempotent(..)]` generates this"
        ));
        out.push(d);
    }
}

/// Is the claimed record an idempotency, request or dedup record (see the rule's doc)?
fn idempotency_record(cx: &RuleCx<'_>, c: u32, claim: &Effect) -> bool {
    claim
        .table
        .as_deref()
        .is_some_and(|t| is_idempotency_record(t) || !claim.kv && cx.krate.stores_response(t))
        || claim
            .sets
            .iter()
            .any(|a| is_request_key_column(&a.column) || is_response_column(&a.column))
        || keyed_by_request(cx, c)
}

/// Is the claim's key an idempotency key or a request id: derived from a parameter named so,
/// or from a call that reads the `Idempotency-Key` header (or is named for it)?
fn keyed_by_request(cx: &RuleCx<'_>, c: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let mut sources: Vec<Name> = cx
        .body
        .params
        .iter()
        .map(|(n, _)| n)
        .filter(|n| is_request_key_column(n))
        .cloned()
        .collect();
    for (i, ev) in cx.body.events[..c as usize].iter().enumerate() {
        let EventKind::Call(k) = &ev.kind else {
            continue;
        };
        let names_key = k.steps.iter().any(|s| contains_folded(&s.name, "idempot"))
            || k.all_args().any(|a| {
                a.strs()
                    .iter()
                    .any(|s| contains_folded(s, "idempotency-key"))
            });
        if names_key {
            sources.extend(query::derived(cx.body, i as u32));
        }
    }
    !sources.is_empty()
        && call
            .all_args()
            .flat_map(|a| &a.paths)
            .any(|p| sources.iter().any(|s| s == query::first(p)))
}

/// Whether `hay` contains the lowercase `needle`, ignoring ASCII case (no allocation).
fn contains_folded(hay: &str, needle: &str) -> bool {
    hay.as_bytes()
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

/// Is a constraint's name one of a unique key (`orders_pkey`, `uniq_event_id`,
/// `events_event_id_key`)?
fn names_unique_key(name: &str) -> bool {
    let lower = name.trim_matches('"').to_ascii_lowercase();
    lower.ends_with("pkey")
        || lower.ends_with("_key")
        || lower.contains("unique")
        || lower.contains("uniq")
        || lower.ends_with("_pk")
}

/// The branches that run on the claim's conflict, as `(Enter event, event to report at)`.
fn conflict_branches(cx: &RuleCx<'_>, t: u32, test: &Test, claim: &Effect) -> Vec<(u32, u32)> {
    let through_helper = claim.via.is_some();
    let unique =
        |v: &Name| is_unique_violation_value(v) || through_helper && is_conflict_variant(v);
    let call_of = |k: u32| match &cx.body.events[k as usize].kind {
        EventKind::Call(call) => Some(&**call),
        _ => None,
    };
    // sqlx's `db_err.constraint()`: which constraint refused the row. Asked whether there is one
    // (`.is_some()`), or compared with a key's name (`Some("orders_pkey")`, `"..unique.."`,
    // `"..key"`), it tells a conflict; compared with another name (a foreign key), it does not.
    let constraint_test = test
        .calls
        .iter()
        .any(|&k| call_of(k).is_some_and(|c| c.has_step("constraint")))
        && (test.values.is_empty() || test.values.iter().any(|v| names_unique_key(v)));
    let unique_test = test.values.iter().any(unique)
        || constraint_test
        || test.calls.iter().any(|&k| {
            call_of(k).is_some_and(|c| {
                apis::UNIQUE_VIOLATION_CHECKS
                    .iter()
                    .any(|check| c.has_step(check))
            })
        });
    // A claim that reports a conflict as "nothing done" (zero rows, no row returned, `false`),
    // not as an error.
    let quiet = claim.kind == EffectKind::Claim;
    let branches = cx.following_branches(t);
    let then_else = |conflict_is_then: bool| {
        let k = if conflict_is_then { 0 } else { 1 };
        branches.get(k).map(|&b| (b, t)).into_iter().collect()
    };
    match test.role {
        TestRole::Guard if unique_test => {
            cx.enclosing_branch(t).map(|b| (b, t)).into_iter().collect()
        }
        TestRole::If | TestRole::While => {
            if unique_test {
                return then_else(!test.negated);
            }
            if !quiet || !absence_test(cx, test) {
                return Vec::new();
            }
            match test.pats.first() {
                Some(p)
                    if p.iter()
                        .any(|v| matches!(v.as_str(), "None" | "Nil" | "false")) =>
                {
                    then_else(true)
                }
                Some(p) if p.iter().any(|v| matches!(v.as_str(), "Some" | "true")) => {
                    then_else(false)
                }
                Some(_) => Vec::new(),
                None => then_else(test.negated),
            }
        }
        TestRole::Match => branches
            .iter()
            .zip(test.pats.iter())
            .filter(|(_, pat)| {
                pat.iter().any(unique)
                    || quiet
                        && pat
                            .iter()
                            .any(|v| matches!(v.as_str(), "None" | "0" | "false"))
            })
            .map(|(&b, _)| (b, b))
            .collect(),
        TestRole::LetElse => {
            let some = test
                .pats
                .first()
                .is_some_and(|p| p.iter().any(|v| v == "Some"));
            if quiet && some {
                branches.first().map(|&b| (b, t)).into_iter().collect()
            } else {
                Vec::new()
            }
        }
        _ => Vec::new(),
    }
}

/// A test of whether the claim did anything — rows affected, a row returned, the flag a claim
/// returned — rather than of an error.
fn absence_test(cx: &RuleCx<'_>, test: &Test) -> bool {
    // `Ok(false)` / `Ok(None)` / `Ok(Value::Nil)` name the claim's answer inside the `Result`:
    // still a test of whether it did anything, not of an error.
    let answer_inside = |p: &[Name]| {
        p.iter().any(|v| v == "Ok")
            && p.iter()
                .any(|v| matches!(v.as_str(), "false" | "None" | "Nil" | "0"))
    };
    let names_result = test
        .values
        .iter()
        .any(|v| matches!(v.as_str(), "Err" | "Ok"))
        && !answer_inside(&test.values)
        || test
            .pats
            .iter()
            .filter(|p| !answer_inside(p))
            .flatten()
            .any(|v| matches!(v.as_str(), "Err" | "Ok"));
    let error_check = test.calls.iter().any(|&k| {
        matches!(&cx.body.events[k as usize].kind, EventKind::Call(call)
            if call.steps.iter().any(|s| matches!(s.name.as_str(), "is_err" | "is_ok" | "err" | "ok")))
    });
    !names_result && !error_check
}

/// Does the body read the claimed record where the conflict's answer can use it: before the
/// claim (a check first), between the claim and the test, or in the conflict branch? A
/// compare-and-set on it (a takeover) or a second claim counts too.
fn reads_record(cx: &RuleCx<'_>, c: u32, t: u32, branch: u32, claim: &Effect) -> bool {
    let end = cx.region_end(branch);
    let reads = |i: u32| {
        cx.effs(i).any(|e| {
            let record = query::same_state(e.table.as_deref(), claim.table.as_deref())
                || e.table.as_deref().is_some_and(is_idempotency_record)
                    && claim.table.as_deref().is_some_and(is_idempotency_record);
            record
                && (e.kind == EffectKind::Read
                    || e.kind == EffectKind::Claim
                    || e.kind == EffectKind::Write && e.conditional && !e.insert)
        })
    };
    if (0..c).any(reads) || (branch + 1..end).any(reads) {
        return true;
    }
    // Between the claim and the test, outside the other branches already closed.
    let mut i = c + 1;
    while i < t {
        if let EventKind::Enter(Region::Branch { .. }) = cx.body.events[i as usize].kind {
            let close = cx.region_end(i);
            if close < t {
                i = close + 1;
                continue;
            }
        }
        if reads(i) {
            return true;
        }
        i += 1;
    }
    false
}

/// Is the claim still in an open transaction (its own or the caller's) when the conflict is
/// answered? A Redis key takes effect at once.
fn in_transaction(cx: &RuleCx<'_>, c: u32, claim: &Effect) -> bool {
    let body = cx.effects().body;
    !claim.kv
        && (!cx.state(c).txs.is_empty()
            || body.tx_param.is_some()
            || body.tx_holder
            || body.conn_param)
}

/// Does a caller of this body test its result for the crate's own "already exists" variant?
/// Then the helper handed the conflict up, and the caller's answer is judged.
fn judged_by_callers(cx: &RuleCx<'_>) -> bool {
    cx.krate.call_sites(cx.id).iter().any(|&(caller, ev)| {
        let body = cx.krate.body(caller);
        query::tests_of(body, ev).into_iter().any(|t| {
            matches!(&body.events[t as usize].kind, EventKind::Cond(test)
                if test.values.iter().chain(test.pats.iter().flatten()).any(|v| is_conflict_variant(v)))
        })
    })
}

fn report(cx: &RuleCx<'_>, c: u32, at: u32, claim: &Effect, fails: bool) -> Diagnostic {
    let record = claim.table.as_deref().unwrap_or("the record");
    let message = if fails {
        format!("the conflict on `{record}` is answered as a failure without reading the record")
    } else {
        format!(
            "the conflict on `{record}` is answered as a success without reading the record, while the first request may still fail"
        )
    };
    let mut d = cx.diag(&RULE, at, message);
    d.primary_label = Some(if fails {
        "a duplicate of a request in flight or done gets an error here".to_string()
    } else {
        "a duplicate is told it succeeded here, before the first request's work is done".to_string()
    });
    let claimed = match claim.via {
        Some(helper) => format!(
            "the record is claimed here, by `{}`",
            cx.krate.body(helper).name()
        ),
        None => "the record is claimed here".to_string(),
    };
    d.labels.push(cx.label(c, claimed));
    d.notes.extend(cx.chain_notes(claim));
    d.help = Some("on the conflict, read the record and answer from its state: in progress → 409 (or wait), done → the stored response, the same key with another payload → 422; `#[staleguard::idempotent(..)]` generates this".to_string());
    d
}
