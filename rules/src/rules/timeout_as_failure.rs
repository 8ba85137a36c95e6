//! `timeout-as-failure`: a remote call's timeout recorded as a definite failure (a FAILED /
//! cancelled state written, a refund or compensation run) on the path where the call timed out
//! or where its error is not told apart from a timeout.

use super::RuleCx;
use crate::apis::{TIMEOUT_CHECKS, TIMEOUT_FNS, TIMEOUT_VALUES};
use crate::diagnostic::Diagnostic;
use crate::effects::{AssignedValue, Effect, EffectKind};
use crate::ir::{EventKind, Test, TestRole};
use crate::kb::names::{is_compensation, is_failure_value, is_state_column};

declare_rule! {
    /// ### What it does
    ///
    /// Flags a remote call — an HTTP request that changes something, a gRPC call, an AWS call,
    /// a mail handed to an SMTP transport, a crate helper that makes one — whose timeout is
    /// recorded as a definite failure: on the path where the call timed out, a state column is
    /// set to a failure value (`FAILED`, `Declined`, `cancelled`, `JOB_STATE_FAILED`, ..), a
    /// refund or compensation runs — in the function itself or in a crate helper it calls, with
    /// the value written there or handed down to it (`mark(id, State::Failed)`), or set on a
    /// value's state field that a write later on the way stores (`payout.status =
    /// PayoutStatus::Failed`, then `payout.insert(&mut tx)`) — or a row the
    /// function created for the call is deleted again (a membership inserted, the invitation
    /// mail sent, the membership deleted when the send fails). The timeout path is the
    /// `Err(_)` of `tokio::time::timeout(..)` around the call, the branch of `e.is_timeout()`,
    /// `Code::DeadlineExceeded` or `ErrorKind::TimedOut`, or an error branch of the call that
    /// does not tell timeouts apart from other errors (also of an async block awaited in place
    /// as a try/catch: `let res = async { client.execute(id).await?; Ok(()) }.await`; an error
    /// is the latest call's that made the value tested). And an HTTP `POST` or `PATCH` (or an API
    /// client's call that creates: octocrab's `create_comment(..)`) handed in a closure to a
    /// retry (a retry library's `retry(..)`, tokio-retry's
    /// `Retry::spawn(..)`, or a crate fn that calls the closure it is given in a loop that
    /// sleeps between attempts), with no idempotency key in the request: after a timeout the
    /// same request is made again under a new identity.
    ///
    /// It stays silent when the timeout leads to an unknown or pending state (`UNKNOWN`,
    /// `pending`, `needs_reconciliation`), to a status query of the remote, or to a retry that
    /// sends the same idempotency key (`Idempotency-Key`, a request id); when
    /// the error branch separates timeouts and only the other errors are recorded as
    /// failures; and for read-only requests (`GET`, `HEAD`).
    ///
    /// ### Why is this bad?
    ///
    /// A timeout is not an answer: the request may have reached the remote side and done its
    /// work, and only the reply was lost. Recording it as failed makes the local state
    /// contradict the remote one:
    ///
    /// ```text
    /// t0  POST /charges {order 7}            -> the provider charges the card
    /// t1  the reply is slow; our 5 s timeout fires
    /// t2  UPDATE orders SET status = 'payment_failed' WHERE id = 7
    /// t3  the customer pays again              <- charged twice
    /// ```
    ///
    /// A refund or a compensation run on the timeout undoes something that may not have
    /// happened, or happens twice when the remote did act.
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// match tokio::time::timeout(Duration::from_secs(5), gateway.charge(&order)).await {
    ///     Ok(Ok(receipt)) => mark_paid(&db, order.id, receipt).await?,
    ///     Ok(Err(declined)) => mark_failed(&db, order.id, declined).await?,
    ///     Err(_elapsed) => mark_failed(&db, order.id, "timeout").await?,
    /// }
    /// ```
    ///
    /// ### Use instead
    ///
    /// Record a timeout as UNKNOWN and let a reconciler ask the remote side (by the operation
    /// id it was sent with) what happened; retry only with the same idempotency key:
    ///
    /// ```rust,ignore
    /// match tokio::time::timeout(Duration::from_secs(5), gateway.charge(&order)).await {
    ///     Ok(Ok(receipt)) => mark_paid(&db, order.id, receipt).await?,
    ///     Ok(Err(declined)) => mark_failed(&db, order.id, declined).await?,
    ///     Err(_elapsed) => mark_unknown(&db, order.id).await?, // reconciled later
    /// }
    /// ```
    ///
    /// `#[staleguard::idempotent(..)]` records a body error that is not definite (a timeout)
    /// as UNKNOWN for its reconciler, never as FAILED.
    ///
    /// ### Known problems
    ///
    /// The failure must be recorded in the same function as the call, in a branch on the
    /// call's result: an error handed up with `?` and recorded by a caller, or mapped in a
    /// closure (`map_err`, `unwrap_or_else`), is not followed. A `tokio::select!` with a sleep
    /// branch is not read as a timeout. Failure values and compensation functions are
    /// recognised by name (`failed`, `declined`, `cancelled`; `refund`, `compensate`,
    /// `revert`). A retry is recognised in a retry library's `retry(..)` / `Retry::spawn(..)` and
    /// in a crate fn that calls the closure it is handed in a loop that sleeps; a loop written
    /// around the call in place is not. A `?` that rolls back a
    /// transaction open around the call is not read as recording a failure
    /// (`rpc-in-transaction` reports the call inside the transaction); deleting the rows made
    /// before the call, or restoring their old values, is not read as an undo; an e-mail sent
    /// through an SMTP transport is a remote call only when its client is named for one
    /// (`self.mailer`).
    pub(crate) static RULE = {
        name: "timeout-as-failure",
        level: Error,
        summary: "timeout of a remote call recorded as a definite failure instead of unknown",
        applies: applies,
        check: check,
    };
}

/// A remote call, and a failure recorded or a retry around it.
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Remote)
        && (k.has(EffectKind::Write)
            || k.has(EffectKind::Claim)
            || k.has(EffectKind::Sleep)
            || has_compensation_call(cx)
            || calls_retry_library(cx))
}

/// Does the body call a retry library (`backoff::future::retry(..)`, tokio-retry's
/// `Retry::spawn(..)`)?
fn calls_retry_library(cx: &RuleCx<'_>) -> bool {
    cx.body
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Call(c) if retry_library(cx, c).is_some()))
}

/// The path of `call` when it is a retry library's: `backoff::future::retry`, tokio-retry's
/// `Retry::spawn`, `again::retry`, `tryhard::retry_fn`.
fn retry_library(cx: &RuleCx<'_>, call: &crate::ir::Call) -> Option<crate::name::Name> {
    if call.func.is_empty() {
        return None;
    }
    let path = crate::name::Name::join(&call.func, "::");
    let full = cx.krate.facts.resolve(cx.id.file, &path);
    let last = call.func_last();
    let lib = [
        "backoff::",
        "tokio_retry::",
        "again::",
        "tryhard::",
        "retry::",
    ]
    .iter()
    .any(|l| full.starts_with(l));
    (lib && (last.starts_with("retry") || last == "spawn")).then_some(path)
}

/// An HTTP `POST` or `PATCH`, handed in a closure to a retry (a crate fn that calls the closure
/// it is given in a loop and sleeps between attempts, or a retry library's `retry(..)` /
/// `Retry::spawn(..)`) that tries again after any error, a timeout included, with no
/// idempotency key in the request: a request that reached the remote side before its answer
/// was lost is made again.
fn retried_blind(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    for c in 0..cx.body.events.len() as u32 {
        let EventKind::Call(call) = &cx.body.events[c as usize].kind else {
            continue;
        };
        if cx.detached(c) {
            continue;
        }
        let closures = cx.closures_of(c);
        if closures.is_empty() {
            continue;
        }
        let Some(retry) = retry_driver(cx, c, call) else {
            continue;
        };
        for (a, b) in closures {
            let Some((r, remote)) = (a..b).find_map(|r| {
                cx.eff(r, EffectKind::Remote)
                    .filter(|_| creates_at_remote(cx, r))
                    .map(|e| (r, e))
            }) else {
                continue;
            };
            if sends_idempotency_key(cx, a, b) {
                continue;
            }
            let mut d = cx.diag(
                &RULE,
                r,
                "a remote call is retried after any error, a timeout included, with no idempotency key".to_string(),
            );
            d.primary_label = Some(format!(
                "this call may time out after the remote side acted ({})",
                remote.what
            ));
            d.labels
                .push(cx.label(c, format!("`{retry}` makes it again when it fails")));
            d.notes.push(
                "a timed-out attempt may have done its work: the retry does it a second time"
                    .to_string(),
            );
            d.notes.extend(cx.chain_notes(remote));
            d.help = Some(
                "send the same idempotency key with every attempt (an `Idempotency-Key` header, the provider's request id), or retry only errors that say the request was not processed (connection refused, 429 / 503 before processing); a timeout is UNKNOWN: ask the remote side what happened".to_string(),
            );
            out.push(d);
        }
    }
}

/// Is call `r` an HTTP request that creates something at the remote side, one that a second
/// attempt makes again: a `POST` or a `PATCH` (`client.post(url)`, `request(Method::POST, ..)`),
/// or an API client's call that creates (octocrab's `create_comment(..)`)?
/// `PUT` and `DELETE` are idempotent by their method, and a request whose method is not seen
/// here is not judged.
fn creates_at_remote(cx: &RuleCx<'_>, r: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[r as usize].kind else {
        return false;
    };
    // An API client's own call that creates (octocrab's `create_comment(..)`, `merge(..)`,
    // `_post(..)`).
    let api = cx
        .effs(r)
        .any(|e| e.kind == EffectKind::Remote && e.what.contains("octocrab"));
    call.steps.iter().any(|s| {
        matches!(s.name.as_str(), "post" | "patch")
            || api
                && (s.name.starts_with("create")
                    || s.name.starts_with("merge")
                    || s.name == "_post")
            || s.name == "request"
                && s.args.iter().any(|a| {
                    a.paths
                        .iter()
                        .any(|p| p.ends_with("POST") || p.ends_with("PATCH"))
                })
    })
}

/// The retry call `c` is: a retry library's (`backoff::future::retry`, `tokio_retry`'s
/// `Retry::spawn`, `again::retry`, `tryhard::retry_fn`) or a crate fn that retries (see
/// [`retries_closure`]); its name for the message.
fn retry_driver(cx: &RuleCx<'_>, c: u32, call: &crate::ir::Call) -> Option<String> {
    if let Some(path) = retry_library(cx, call) {
        return Some(path.to_string());
    }
    cx.callees(c)
        .iter()
        .find(|&&h| retries_closure(cx, h))
        .map(|&h| cx.krate.body(h).name().to_string())
}

/// Does crate fn `h` retry a closure it is handed: call one of its parameters (`func()`) in a
/// loop, and sleep in a loop (a back-off between attempts)?
fn retries_closure(cx: &RuleCx<'_>, h: crate::facts::BodyId) -> bool {
    // The cheap question first: does it sleep at all.
    if !cx
        .krate
        .summary(h)
        .is_some_and(|s| s.has(EffectKind::Sleep))
    {
        return false;
    }
    let body = cx.krate.body(h);
    let view = cx.krate.effects_of(h);
    let params: Vec<&str> = body.params.iter().map(|(n, _)| n.as_str()).collect();
    // The regions entered, `true` for a loop; and how many loops the walk is in.
    let mut regions: Vec<bool> = Vec::new();
    let mut depth_in_loop = 0usize;
    let (mut calls_param, mut sleeps) = (false, false);
    for (i, ev) in body.events.iter().enumerate() {
        match &ev.kind {
            EventKind::Enter(region) => {
                let is_loop = matches!(region, crate::ir::Region::Loop);
                regions.push(is_loop);
                depth_in_loop += usize::from(is_loop);
            }
            EventKind::Leave => {
                depth_in_loop -= usize::from(regions.pop() == Some(true));
            }
            EventKind::Call(call) if depth_in_loop > 0 => {
                if call.func.len() == 1 && params.contains(&call.func[0].as_str()) {
                    calls_param = true;
                }
                if view.at(i as u32).any(|e| e.kind == EffectKind::Sleep) {
                    sleeps = true;
                }
            }
            _ => {}
        }
        if calls_param && sleeps {
            return true;
        }
    }
    false
}

/// Does the closure at events `a..b` send an idempotency key: a header, an argument or a
/// string naming one (`Idempotency-Key`, `idempotency_key`, a request id)?
fn sends_idempotency_key(cx: &RuleCx<'_>, a: u32, b: u32) -> bool {
    let names = |s: &str| {
        let l = s.to_ascii_lowercase();
        l.contains("idempot") || l.contains("request_id") || l.contains("request-id")
    };
    cx.body.events[a as usize..b as usize]
        .iter()
        .any(|ev| match &ev.kind {
            EventKind::Call(call) => call.all_args().any(|arg| {
                arg.paths.iter().any(|p| names(p)) || arg.strs().iter().any(|s| names(s))
            }),
            _ => false,
        })
}

fn has_compensation_call(cx: &RuleCx<'_>) -> bool {
    cx.body
        .events
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Call(c) if names_compensation(c)))
}

/// Which path of a call's result a branch is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// The call timed out (`Err(Elapsed)`, `e.is_timeout()`).
    Timeout,
    /// The call failed, timeouts and refusals alike.
    AnyError,
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    retried_blind(cx, out);
    let mut reported: Vec<u32> = Vec::new();
    // The latest call first: a result made by a second call from the first one's answer
    // (`let done = async { client.execute(req.id).await }.await`) fails with the second's error.
    for r in (0..cx.body.events.len() as u32).rev() {
        let Some(remote) = cx.eff(r, EffectKind::Remote) else {
            continue;
        };
        // A helper that also writes state is a unit of work, not a remote call: its failure
        // is the work's (a build that failed and will be retried).
        if crate::query::read_only_request(cx.body, r)
            || remote.via.is_some_and(|h| writes_state(cx, h))
        {
            continue;
        }
        // The result tested is the call's own, or that of a `timeout(..)` around it.
        let (tested, wrapped) = match timeout_around(cx, r) {
            Some(w) => (w, true),
            None => (r, is_timeout_call(cx, r)),
        };
        let error = crate::query::derived(cx.body, tested);
        for t in crate::query::tests_of(cx.body, tested) {
            let EventKind::Cond(test) = &cx.body.events[t as usize].kind else {
                continue;
            };
            for (branch, path) in error_branches(cx, t, test, wrapped) {
                let end = cx.region_end(branch);
                for (at, path) in failure_records(cx, branch + 1, end, path, &error) {
                    if reported.contains(&at) {
                        continue;
                    }
                    reported.push(at);
                    out.push(report(cx, r, at, remote, path));
                }
            }
        }
    }
}

/// The `timeout(..)` call whose argument is call `r` (`timeout(d, client.post(u).send())`),
/// or the local it was bound to (`let call = ..; timeout(d, call)`).
fn timeout_around(cx: &RuleCx<'_>, r: u32) -> Option<u32> {
    let held = crate::query::derived(cx.body, r);
    (r + 1..cx.body.events.len() as u32).take(6).find(|&w| {
        matches!(&cx.body.events[w as usize].kind, EventKind::Call(c)
        if TIMEOUT_FNS.contains(&c.func_last())
            && c.all_args().any(|a| {
                a.ev == Some(r)
                    || a.paths.iter().any(|p| held.contains(crate::query::first(p)))
            }))
    })
}

/// Does crate body `h` write state itself (or through its callees)?
fn writes_state(cx: &RuleCx<'_>, h: crate::facts::BodyId) -> bool {
    cx.krate.summary(h).is_some_and(|s| {
        s.effects.iter().any(|x| {
            matches!(x.effect.kind, EffectKind::Write | EffectKind::Claim) && !x.effect.in_memory
        })
    })
}

/// Is call `r` a `timeout(..)` itself (driving a request future held in a local)?
fn is_timeout_call(cx: &RuleCx<'_>, r: u32) -> bool {
    matches!(&cx.body.events[r as usize].kind, EventKind::Call(c) if TIMEOUT_FNS.contains(&c.func_last()))
}

/// The branches after test `t` of a call's result that run when the call failed: with a
/// `timeout(..)` around the call, its outer `Err` (the deadline passed); without, the call's
/// own `Err` (any error, timeouts among them).
fn error_branches(cx: &RuleCx<'_>, t: u32, test: &Test, wrapped: bool) -> Vec<(u32, Path)> {
    let path = if wrapped {
        Path::Timeout
    } else {
        Path::AnyError
    };
    let branches = cx.following_branches(t);
    let outer_err = |pat: &[crate::name::Name]| pat.first().is_some_and(|v| v == "Err");
    match test.role {
        TestRole::Match => {
            // Arms in order: an `Err` arm that names a timeout (`Err(Error::Timeout)`, `Err(e)
            // if e.is_timeout()`) is the timeout path, and takes timeouts from the arms after
            // it; an arm that names another error (`Err(Error::Declined)`) is a refusal.
            let mut out = Vec::new();
            let mut timeouts_taken = false;
            // A catch-all arm (`_ =>`, `other =>`) after arms that only match `Ok(..)` takes
            // the errors, timeouts among them.
            let mut ok_arm_before = false;
            let mut err_before = false;
            for (&b, pat) in branches.iter().zip(test.pats.iter()) {
                if pat.is_empty() && ok_arm_before && !err_before {
                    out.push((b, path));
                    break;
                }
                ok_arm_before |= pat.first().is_some_and(|v| v == "Ok");
                if !outer_err(pat) {
                    continue;
                }
                err_before = true;
                if pat.iter().any(|v| TIMEOUT_VALUES.contains(&v.as_str()))
                    || guard_tests_timeout(cx, b)
                {
                    timeouts_taken = true;
                    out.push((b, Path::Timeout));
                } else if pat.len() == 1 && !timeouts_taken {
                    out.push((b, path));
                }
            }
            out
        }
        TestRole::If => {
            let err_then = match test.pats.first() {
                Some(p) if outer_err(p) => true,
                Some(p) if p.first().is_some_and(|v| v == "Ok") => false,
                Some(_) => return Vec::new(),
                // `res.is_err()` / `res.is_ok()` (lowered as the tested values `Err` / `Ok`).
                None if test.values.iter().any(|v| v == "Err") => !test.negated,
                None if test.values.iter().any(|v| v == "Ok") => test.negated,
                None => return Vec::new(),
            };
            let k = usize::from(!err_then);
            branches.get(k).map(|&b| (b, path)).into_iter().collect()
        }
        TestRole::LetElse
            if test
                .pats
                .first()
                .is_some_and(|p| p.first().is_some_and(|v| v == "Ok")) =>
        {
            branches.first().map(|&b| (b, path)).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// Does the match arm entered at `b` have a guard that tells a timeout apart (`Err(e) if
/// e.is_timeout()`)?
fn guard_tests_timeout(cx: &RuleCx<'_>, b: u32) -> bool {
    // The guard comes first in the arm, after the pattern's bindings and the calls it makes.
    cx.body.events[b as usize + 1..]
        .iter()
        .take_while(|e| {
            matches!(e.kind, EventKind::Bind(_) | EventKind::Call(_))
                || matches!(&e.kind, EventKind::Cond(t) if t.role != TestRole::If)
        })
        .any(|e| matches!(&e.kind, EventKind::Cond(t) if t.role == TestRole::Guard && tests_timeout(cx, t)))
}

/// Does test `test` tell a timeout apart (`e.is_timeout()`, `Code::DeadlineExceeded`,
/// `Err(Elapsed)`)?
fn tests_timeout(cx: &RuleCx<'_>, test: &Test) -> bool {
    test.values
        .iter()
        .chain(test.pats.iter().flatten())
        .any(|v| TIMEOUT_VALUES.contains(&v.as_str()))
        || test.calls.iter().any(|&k| {
            matches!(&cx.body.events[k as usize].kind, EventKind::Call(call)
                if call.steps.iter().any(|s| TIMEOUT_CHECKS.contains(&s.name.as_str())))
        })
}

/// The events in `[from, to)` that record a definite failure on the timeout path. On a path
/// of any error, a test inside that tells timeouts apart hands the question to its timeout
/// branches, and what follows it is taken for the refusals' path (which may record failures).
fn failure_records(
    cx: &RuleCx<'_>,
    from: u32,
    to: u32,
    path: Path,
    error: &crate::fxhash::FxHashSet<crate::name::Name>,
) -> Vec<(u32, Path)> {
    let mut out = Vec::new();
    let mut i = from;
    while i < to {
        // A test that classifies the error some other way (`if is_limit_error(&e)`,
        // `match e { Declined => .. }`) picks refusals: what it guards is not judged.
        if path == Path::AnyError
            && let EventKind::Cond(test) = &cx.body.events[i as usize].kind
            && matches!(test.role, TestRole::If | TestRole::Match)
            && !tests_timeout(cx, test)
            && test
                .deps
                .iter()
                .any(|d| error.contains(crate::query::first(d)))
        {
            let branches = cx.following_branches(i);
            i = branches.last().map_or(i, |&b| cx.region_end(b)) + 1;
            continue;
        }
        // (A comparison inside a condition is its own `Other` test, followed by the `if`.)
        if let EventKind::Cond(test) = &cx.body.events[i as usize].kind
            && test.role != TestRole::Other
            && tests_timeout(cx, test)
        {
            let branches = cx.following_branches(i);
            let timeout_branches: Vec<u32> = match test.role {
                TestRole::Match => branches
                    .iter()
                    .zip(test.pats.iter())
                    .filter(|(_, pat)| pat.iter().any(|v| TIMEOUT_VALUES.contains(&v.as_str())))
                    .map(|(&b, _)| b)
                    .collect(),
                TestRole::If => branches
                    .get(usize::from(test.negated))
                    .copied()
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
            for &b in &timeout_branches {
                out.extend(failure_records(
                    cx,
                    b + 1,
                    cx.region_end(b),
                    Path::Timeout,
                    error,
                ));
            }
            if path == Path::AnyError {
                break;
            }
            i = branches.last().map_or(i, |&b| cx.region_end(b)) + 1;
            continue;
        }
        if records_failure(cx, i) {
            out.push((i, path));
        }
        i += 1;
    }
    out
}

/// Does event `i` record a definite failure: a write of a failure value to a state column, or
/// a call of a refund / compensation?
fn records_failure(cx: &RuleCx<'_>, i: u32) -> bool {
    cx.effs(i).any(writes_failure)
        || matches!(&cx.body.events[i as usize].kind, EventKind::Call(c) if names_compensation(c))
        || undoes_creation(cx, i)
        || failure_set_then_saved(cx, i)
}

/// A store write of a failure value to a state column.
fn writes_failure(e: &Effect) -> bool {
    matches!(e.kind, EffectKind::Write | EffectKind::Claim)
        && !e.in_memory
        && e.sets.iter().any(|a| {
            is_state_column(&a.column)
                && matches!(&a.value, AssignedValue::Const(v) if is_failure_value(v))
        })
}

/// Does event `i` set a state field of a value to a failure (`payout.status =
/// PayoutStatus::Failed`, `active.status = Set(Status::Failed)`) that a store write later on the
/// way saves (`payout.save(db)`, `active.update(db)`, `repo.store(&payout)`)? The model carries
/// the failure to the store.
fn failure_set_then_saved(cx: &RuleCx<'_>, i: u32) -> bool {
    let events = &cx.body.events;
    let EventKind::Assign(a) = &events[i as usize].kind else {
        return false;
    };
    let Some((root, field)) = a.target.split_once('.') else {
        return false;
    };
    let field = field.rsplit('.').next().unwrap_or(field);
    if !is_state_column(field) || !a.value.as_deref().is_some_and(is_failure_value) {
        return false;
    }
    let names_root = |c: &crate::ir::Call| {
        c.recv.first().is_some_and(|r| r == root)
            || c.all_args()
                .any(|arg| arg.paths.iter().any(|p| crate::query::first(p) == root))
    };
    (i + 1..cx.reach_end(i)).any(|k| {
        !cx.detached(k)
            && matches!(&events[k as usize].kind, EventKind::Call(c) if names_root(c))
            && cx.effs(k).any(|e| {
                // A write that carries the failure itself (`model.update(db)` of a sea-orm
                // model) is the record, judged at the write.
                e.kind == EffectKind::Write && !e.in_memory && !writes_failure(e)
            })
    })
}

/// Does event `i` delete a row of a table this body wrote earlier on its path (`user.save(..)`
/// then, when the mail fails, `user.delete(..)`)? On the error path of a remote call that is a
/// rollback of local state made for the remote's sake, which the remote may have acted on.
fn undoes_creation(cx: &RuleCx<'_>, i: u32) -> bool {
    cx.effs(i)
        .filter(|e| e.kind == EffectKind::Write && e.delete && !e.in_memory && !e.purge)
        .any(|del| {
            del.table.is_some()
                && (0..i).any(|k| {
                    !cx.detached(k)
                        && cx.effs(k).any(|w| {
                            w.kind == EffectKind::Write
                                && (w.insert || w.upsert)
                                && !w.in_memory
                                && crate::query::same_table_prefixed(
                                    w.table.as_deref(),
                                    del.table.as_deref(),
                                )
                        })
                })
        })
}

/// A call of a function named for undoing (`refund(..)`, `self.payments.compensate(..)`).
fn names_compensation(c: &crate::ir::Call) -> bool {
    is_compensation(c.func_last()) || c.steps.first().is_some_and(|s| is_compensation(&s.name))
}

fn report(cx: &RuleCx<'_>, r: u32, at: u32, remote: &Effect, path: Path) -> Diagnostic {
    let message = match path {
        Path::Timeout => "a timeout of the remote call is recorded as a definite failure",
        Path::AnyError => {
            "an error of the remote call, timeouts included, is recorded as a definite failure"
        }
    };
    let mut d = cx.diag(&RULE, at, message.to_string());
    d.primary_label =
        Some("recorded as failed here, though the remote side may have done it".to_string());
    let call = match remote.via {
        Some(helper) => format!(
            "this call may time out after the remote side acted (`{}` {})",
            cx.krate.body(helper).name(),
            remote.what
        ),
        None => format!(
            "this call may time out after the remote side acted ({})",
            remote.what
        ),
    };
    d.labels.push(cx.label(r, call));
    d.notes.extend(cx.chain_notes(remote));
    d.help = Some(
        "record a timeout as UNKNOWN (or pending) and reconcile it by asking the remote side with the operation id; treat only definite refusals as failures (`e.is_timeout()`, `Err(Elapsed)` told apart); `#[staleguard::idempotent(..)]` records timeouts as UNKNOWN".to_string(),
    );
    d
}
