//! `lease-without-fencing`: a holder of a lease — a distributed lock, a Redis lock, a session
//! advisory lock — that writes another store, another connection, or calls another service
//! without a fencing token the write checks.

use super::RuleCx;
use crate::apis::{EXEC_STEPS, GUARD_RELEASE_STEPS};
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::{Call, EventKind};
use crate::kb::names::{
    is_expiry_column, is_fencing_column, is_own_key, is_owner_column, is_state_column, words,
};
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags the first write or remote call made while a lease is held — a distributed lock
    /// (a redlock / lock-manager client, etcd's lock service: `etcd_client::Client::lock`,
    /// kube-leader-election's `LeaseLock::try_acquire_or_renew`), a Redis lock (`SET lock:x v
    /// NX PX ..`), a PostgreSQL
    /// session advisory lock (`pg_advisory_lock`, held by the connection, across
    /// transactions), a lease kept in a table row (a leader election or a named lock: `UPDATE
    /// leader_leases SET holder = $1, expires_at = .. WHERE .. AND (expires_at < now() OR
    /// holder = $1)`, an owner and an expiry written where the last holder's expiry passed;
    /// rows of a work table are work items, not leases) — when it passes no fencing token the
    /// target can check: no fencing column (a version, generation, epoch, token, owner,
    /// attempt) in the write's filter, and neither the lease guard nor a token among the
    /// call's arguments.
    ///
    /// And a helper that runs its caller's operation under the lease (`with_lock(name, async
    /// || ..)` calling `op(proof).await` while it holds the lock): reported at that call when
    /// the operation gets no token and a caller in the crate hands in one that writes or calls
    /// another service (the note names it).
    ///
    /// And a lease kept in a table: a renewal (`UPDATE jobs SET lease_until = .. WHERE id =
    /// $1`, a heartbeat) of rows the crate hands to a holder (an owner column such as
    /// `worker_id` or `locked_by`), filtered on no owner, attempt, lease or version column,
    /// when the key does not name the holder: rows an update hands over to another holder, or
    /// a filter that is not the row's own key (`task_id` on `task_runs`).
    ///
    /// And the keep-alive that fails quietly: in a loop that sleeps between rounds, a renewal
    /// of a hold (a heartbeat or lease expiry pushed forward, or a stored procedure named for
    /// it: `SELECT mq_keep_alive(ARRAY[$1], $2)`) whose `Err` branch only logs — no call and
    /// no assignment in it, and no call after the loop in its task — so the worker is never
    /// told that its hold is lapsing.
    ///
    /// And a Kubernetes Lease — the object leader elections hold — patched through kube's
    /// `Api<Lease>` with no `resourceVersion` precondition: a merge, strategic or apply patch of
    /// `holderIdentity` or `renewTime` that the API server applies whatever the Lease holds now.
    /// It is reported where the patch is built: a helper that forwards its caller's patch is
    /// judged at each call.
    ///
    /// It stays silent for a write on the connection that holds the advisory lock (the session
    /// that loses the lock loses the write too), for a transaction advisory lock
    /// (`pg_advisory_xact_lock`: the writes of that transaction commit or fail with it), for
    /// writes to the lock key itself (its release or extension), for in-process locks (a
    /// `Mutex` cannot expire), and under `#[staleguard::fenced]`.
    ///
    /// ### Why is this bad?
    ///
    /// A lease ends on a clock, not when its holder says so. A holder that pauses — a GC or
    /// allocator stall, a slow `await`, a network partition — wakes up still believing it
    /// holds the lease, and writes:
    ///
    /// ```text
    /// t0  worker A takes lock:report (30 s), reads the report's rows
    /// t1  A stalls for 40 s; the lock expires
    /// t2  worker B takes lock:report, rebuilds the report, writes it
    /// t3  A wakes up and writes its old report over B's   <- two holders, lost update
    /// ```
    ///
    /// The lock cannot stop A: only the store A writes to can, if every write carries a
    /// number that grows with each holder (the fencing token) and the store rejects numbers
    /// lower than one it has seen.
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let _: Option<String> = redis::cmd("SET").arg("lock:report").arg(&me).arg("NX").arg("PX").arg(30_000)
    ///     .query_async(&mut con).await?;
    /// let rows = build_report(&db).await?;
    /// sqlx::query("UPDATE reports SET body = $1 WHERE id = $2").bind(rows).bind(id).execute(&db).await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Hand out a token with the lease (a counter incremented on every acquisition) and make
    /// the write conditional on it:
    ///
    /// ```rust,ignore
    /// sqlx::query("UPDATE reports SET body = $1, fence = $3 WHERE id = $2 AND fence < $3")
    ///     .bind(rows).bind(id).bind(lease.token)
    ///     .execute(&db).await?;
    /// ```
    ///
    /// Or keep the lock and the writes in one transaction (`pg_advisory_xact_lock`, `SELECT ..
    /// FOR UPDATE`), so that losing the lock aborts the writes. `#[staleguard::fenced(..)]`
    /// with a lease store passes the token to the body and checks it before the write.
    ///
    /// ### Known problems
    ///
    /// Leases the analyzer does not recognise — etcd leases used without its lock service,
    /// ZooKeeper or Consul leases, leader elections of other libraries — are not checked; of a lease row in a table only the
    /// renewal and a take-over filtered on the expiry are (a row taken by a compare-and-set
    /// on its holder alone is not seen as a lease), and of a Kubernetes Lease only its patches (what the holder writes elsewhere
    /// after its lease lapsed is not tied to the lease). A Lease patch counts as conditional
    /// when the body looks at any `resource_version` or builds a JSON patch (`Patch::Json`, whose
    /// `test` operation can compare), without checking that the patch carries it; a Lease
    /// reached through a dynamic client (`Api<DynamicObject>`) is not seen. A renewal
    /// through a stored procedure (`SELECT keep_alive($1)`) is seen only in a keep-alive loop,
    /// by the procedure's name; a keep-alive whose error ends its task with `?` (the spawner
    /// may log it and go on) is not judged. A token
    /// checked inside the called service is not seen: any argument named like a token, or the
    /// lease guard itself, counts as passing it. A write through a helper after a session
    /// advisory lock is not judged (its connection is not known). Only the first unfenced
    /// write of each lease is reported. Of an operation run under a lease, only the closures
    /// handed in at the helper's calls are looked at, not a named `fn` passed instead.
    pub(crate) static RULE = {
        name: "lease-without-fencing",
        level: Warning,
        summary: "a distributed lock / lease holder writes without passing the lease's fencing token",
        applies: applies,
        check: check,
    };
}

fn is_lease(e: &Effect) -> bool {
    e.lease && matches!(e.kind, EffectKind::Lock | EffectKind::Claim)
}

fn applies(cx: &RuleCx<'_>) -> bool {
    (cx.kinds().has(EffectKind::Lock) || cx.kinds().has(EffectKind::Claim))
        && cx.effects().any_order().any(is_lease)
        || cx.kinds().has(EffectKind::Write)
            && cx
                .effects()
                .any_order()
                .any(|e| renews(e) || e.kind == EffectKind::Write && e.lease)
        // A keep-alive loop renewing through a stored procedure (a read of no table).
        || cx.kinds().has(EffectKind::Sleep) && cx.kinds().has(EffectKind::Read)
}

/// An update that pushes a lease row's expiry or heartbeat forward (`SET lease_expires_at =
/// $2`, `SET heartbeat_at = now()`) and moves no state and no owner (that is a claim): a
/// renewal. Judged where the statement is written (a helper's caller gains it through the
/// summary).
fn renews(e: &Effect) -> bool {
    e.kind == EffectKind::Write
        && e.via.is_none()
        && !e.insert
        && !e.delete
        && !e.in_memory
        && e.sql.is_some()
        && e.sets.iter().any(|a| {
            is_expiry_column(&a.column)
                && matches!(
                    words(&a.column).last().as_deref(),
                    Some("at" | "until" | "heartbeat" | "ts" | "time" | "timestamp")
                )
        })
        && !e
            .sets
            .iter()
            .any(|a| is_state_column(&a.column) || is_owner_column(&a.column))
}

/// A renewal whose filter names no holder: no owner, attempt, lease, token or version column,
/// on a table whose rows the crate hands to a holder (some statement of the crate sets or
/// filters an owner column of it), by a key that does not name the holder. A holder whose
/// lease lapsed, and whose row was taken over, extends the new holder's lease and goes on
/// working as if it still held it.
fn renewal_without_holder(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    for w in 0..cx.body.events.len() as u32 {
        let Some(e) = cx.effs(w).find(|e| renews(e)) else {
            continue;
        };
        if e.where_cols.is_empty()
            || e.where_cols
                .iter()
                .any(|c| is_owner_column(c) || is_fencing_column(c))
        {
            continue;
        }
        let Some(table) = e.table.as_deref() else {
            continue;
        };
        // Whether the table's rows have a holder, and whether an update hands a row over. The
        // row's own key names the holder when every row has one holder (an attempt's row, its
        // owner given when it is inserted); not when an update hands a row over to another
        // holder, nor when the filter is no key of the row (`task_id` on `task_runs`).
        let (mut held, mut handed_over) = (false, false);
        for x in cx.krate.direct_effects() {
            if x.kind != EffectKind::Write || x.table.as_deref() != Some(table) {
                continue;
            }
            let sets_owner = x.sets.iter().any(|a| is_owner_column(&a.column));
            held |= sets_owner || x.where_cols.iter().any(|c| is_owner_column(c));
            handed_over |= sets_owner && !x.insert;
        }
        let by_own_key = e
            .where_cols
            .iter()
            .any(|c| c == "id" || is_own_key(c, Some(table)));
        if !held || by_own_key && !handed_over {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            w,
            "lease renewed without checking that this holder still has it".to_string(),
        );
        d.primary_label = Some(format!("{}; its filter names no owner or attempt", e.what));
        d.help = Some(
            "renew only the holder's own claim (`.. WHERE id = $1 AND owner = $2`, or the attempt or lease id) and stop working when no row matched".to_string(),
        );
        d.notes.push(
            "a holder whose lease lapsed and whose row was taken over extends the new holder's lease, and both go on working".to_string(),
        );
        out.push(d);
        return;
    }
}

/// A keep-alive loop whose renewal fails and nobody is told: in a loop that sleeps between
/// rounds, a renewal of a lease row (`renews`: `SET heartbeat_at = now() WHERE id = $1`) or of
/// a queue's hold through a stored procedure (`SELECT mq_keep_alive(ARRAY[$1], $2)`) whose
/// `Err` branch only logs (no call, no assignment in it), and no call after the loop in its
/// task either (the spawned block around the loop, or the body):
/// the keep-alive stops or retries, and the holder goes on working as if it still held the
/// lease until someone else takes the work over.
fn renewal_failure_unheard(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let events = &cx.body.events;
    for r in 0..events.len() as u32 {
        if !cx.effs(r).any(renews) && !renews_by_procedure(cx, r) {
            continue;
        }
        let Some(lp) = cx
            .enclosing_regions(r)
            .find(|(_, g)| matches!(g, crate::ir::Region::Loop))
            .map(|(e, _)| e)
        else {
            continue;
        };
        let end = cx.region_end(lp);
        let periodic = (lp + 1..end).any(|i| cx.effs(i).any(|e| e.kind == EffectKind::Sleep));
        // What runs after the loop in its task: up to the end of the spawned block around it.
        let task_end = cx
            .enclosing_regions(lp)
            .find(|(_, g)| matches!(g, crate::ir::Region::Closure { .. }))
            .map_or(events.len() as u32, |(c, _)| cx.region_end(c));
        if !periodic || (end + 1..task_end).any(|i| is_call(events, i)) {
            continue;
        }
        let Some(b) = cx.error_branch(r) else {
            continue;
        };
        let told = (b + 1..cx.region_end(b))
            .any(|i| is_call(events, i) || matches!(events[i as usize].kind, EventKind::Assign(_)));
        if told {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            r,
            "a failed lease renewal is only logged: the holder goes on working without its lease"
                .to_string(),
        );
        d.primary_label = Some("the lease is renewed here".to_string());
        d.labels.push(cx.label(
            b,
            "its failure is only logged (the holder is not told, nothing stops its work)",
        ));
        d.notes.push("once the lease lapses another worker takes the work over, while this holder still runs it and writes".to_string());
        d.help = Some("tell the holder when a renewal fails (cancel its work through a cancellation token or a channel, or end the task it watches), and fence its writes with the lease's token".to_string());
        out.push(d);
    }
}

fn is_call(events: &[crate::ir::Event], i: u32) -> bool {
    matches!(events[i as usize].kind, EventKind::Call(_))
}

/// Does the SQL of the call at `r` run a stored procedure that keeps a hold alive
/// (`SELECT mq_keep_alive(ARRAY[$1], $2)`, `SELECT renew_lease($1)`, `heartbeat(..)`)?
fn renews_by_procedure(cx: &RuleCx<'_>, r: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[r as usize].kind else {
        return false;
    };
    if !cx.effs(r).any(|e| e.sql.is_some() && !e.in_memory) {
        return false;
    }
    call.all_args()
        .filter_map(|a| a.extra.as_ref()?.value.as_deref())
        .any(|sql| {
            let lower = sql.to_ascii_lowercase();
            lower.match_indices('(').any(|(i, _)| {
                let head = &lower[..i];
                let name = head
                    .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("");
                let words: Vec<&str> = name.split('_').collect();
                words.contains(&"heartbeat")
                    || words.windows(2).any(|w| w == ["keep", "alive"])
                    || words.contains(&"keepalive")
                    || words.contains(&"renew")
                        && words
                            .iter()
                            .any(|w| matches!(*w, "lease" | "lock" | "claim"))
            })
        })
}

/// A Kubernetes Lease patched with no `resourceVersion` precondition (a merge, strategic or
/// apply patch of `holderIdentity`, `renewTime`, ..): the API server applies it whatever the
/// Lease holds now. Judged where the patch is built: a helper that patches with the patch its
/// caller hands it (`fn patch(&self, p: &Patch<P>)`) is judged at each call.
fn lease_patched_unconditionally(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    for w in 0..cx.body.events.len() as u32 {
        let Some(e) = cx.effs(w).find(|e| e.kind == EffectKind::Write && e.lease) else {
            continue;
        };
        let built_here = match e.via {
            None => !patch_handed_in(cx.body, w),
            Some(h) => {
                let helper = RuleCx::new(cx.krate, h);
                (0..helper.body.events.len() as u32).any(|i| {
                    helper
                        .effs(i)
                        .any(|x| x.kind == EffectKind::Write && x.lease && x.via.is_none())
                        && patch_handed_in(helper.body, i)
                })
            }
        };
        if !built_here || names_resource_version(cx.body) {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            w,
            "a Kubernetes Lease is patched with no `resourceVersion`: a holder that lost the lease overwrites the new holder's".to_string(),
        );
        d.primary_label = Some(format!(
            "{}: a merge, strategic or apply patch is applied whatever the Lease holds now",
            e.what
        ));
        d.notes.extend(cx.chain_notes(e));
        d.notes.push(
            "two candidates that both read the Lease as expired both take it, and a holder whose lease was taken over renews or releases the new holder's lease"
                .to_string(),
        );
        d.help = Some(
            "read the Lease, change it and `replace` it (the API server answers 409 Conflict when it changed since the read), or put the `resourceVersion` read into the patch's metadata; treat the conflict as a lost lease".to_string(),
        );
        out.push(d);
        return;
    }
}

/// Is the patch of the Lease patch at `w` (its third argument) a parameter of the body?
fn patch_handed_in(body: &crate::ir::Body, w: u32) -> bool {
    let EventKind::Call(c) = &body.events[w as usize].kind else {
        return false;
    };
    c.steps
        .first()
        .and_then(|s| s.args.get(2))
        .and_then(|a| a.paths.first())
        .is_some_and(|p| body.params.iter().any(|(n, _)| n == query::first(p)))
}

/// Does the body look at a `resource_version` (to put it in the patch, or to compare it) or
/// build a JSON patch (`Patch::Json`, whose `test` operation can compare)?
fn names_resource_version(body: &crate::ir::Body) -> bool {
    let rv = |p: &Name| p.split('.').any(|s| s == "resource_version");
    body.events.iter().any(|ev| match &ev.kind {
        EventKind::Bind(b) => b.deps.iter().any(rv),
        EventKind::Assign(a) => a.deps.iter().any(rv) || rv(&a.target),
        EventKind::Cond(t) => t.deps.iter().any(rv),
        EventKind::Call(c) => {
            c.recv.iter().any(|r| r == "resource_version")
                || c.all_args().flat_map(|a| &a.paths).any(rv)
                || c.func.len() >= 2
                    && c.func[c.func.len() - 2] == "Patch"
                    && c.func_last() == "Json"
        }
        _ => false,
    })
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    renewal_without_holder(cx, out);
    renewal_failure_unheard(cx, out);
    lease_patched_unconditionally(cx, out);
    let binders = query::binders(cx.body);
    let events = cx.body.events.len() as u32;
    for a in 0..events {
        let Some(lease) = cx.effs(a).find(|e| is_lease(e)) else {
            continue;
        };
        let guard = binders[a as usize].first().filter(|n| n.as_str() != "_");
        // A lease a helper took and gave back itself: the call hands out no guard.
        if lease.via.is_some() && guard.is_none() {
            continue;
        }
        // Where an attempt did not get the lock, nothing is held.
        let not_held: Vec<(u32, u32)> = if lease.attempt {
            query::tests_of(cx.body, a)
                .into_iter()
                .filter_map(|t| match &cx.body.events[t as usize].kind {
                    EventKind::Cond(test) => Some(query::not_acquired(cx, t, test)),
                    _ => None,
                })
                .flatten()
                .map(|b| (b, cx.region_end(b)))
                .collect()
        } else {
            Vec::new()
        };
        let holder = executor(cx, a);
        for w in a + 1..released_at(cx, a, lease, guard) {
            if not_held.iter().any(|&(b, e)| w > b && w < e) {
                continue;
            }
            if let Some(x) = cx
                .effs(w)
                .find(|x| unfenced(cx, lease, holder.as_ref(), guard, w, x))
            {
                out.push(report(cx, a, lease, w, x));
                break;
            }
            if let Some(site) = operation_run(cx, w, guard) {
                out.push(report_operation(cx, a, lease, w, site));
                break;
            }
        }
    }
}

/// Where the lease taken at event `a` ends: its guard dropped or released
/// (`lock.unlock(guard)`), an advisory unlock (`SELECT pg_advisory_unlock(..)`), a delete of the
/// lock's key, or the end of the body.
fn released_at(cx: &RuleCx<'_>, a: u32, lease: &Effect, guard: Option<&Name>) -> u32 {
    let names_guard = |c: &Call, g: &Name| {
        c.all_args()
            .flat_map(|x| &x.paths)
            .any(|p| query::first(p) == g.as_str())
            || c.recv.first() == Some(g)
    };
    (a + 1..cx.body.events.len() as u32)
        .find(|&i| match &cx.body.events[i as usize].kind {
            EventKind::Drop { name } => guard == Some(name),
            EventKind::Call(c) => {
                guard.is_some_and(|g| {
                    c.steps
                        .iter()
                        .any(|s| GUARD_RELEASE_STEPS.contains(&s.name.as_str()))
                        && names_guard(c, g)
                }) || lease.sql.is_some()
                    && c.sql().and_then(|s| s.advisory).is_some_and(|x| x.unlock)
                    || lease.kv
                        && cx.effs(i).any(|e| {
                            e.kv && e.delete && e.table.is_some() && e.table == lease.table
                        })
            }
            _ => false,
        })
        .unwrap_or(cx.body.events.len() as u32)
}

/// The connection (or pool) a statement runs on: the argument of its run step
/// (`.execute(&mut *conn)` gives `conn`).
fn executor(cx: &RuleCx<'_>, i: u32) -> Option<Name> {
    let EventKind::Call(c) = &cx.body.events[i as usize].kind else {
        return None;
    };
    c.steps
        .iter()
        .rev()
        .find(|s| EXEC_STEPS.contains(&s.name.as_str()))
        .and_then(|s| s.args.first())
        .and_then(|a| a.paths.first())
        .cloned()
}

/// Is effect `x` of event `w`, made while `lease` is held, a write or a call that carries no
/// fencing token?
fn unfenced(
    cx: &RuleCx<'_>,
    lease: &Effect,
    holder: Option<&Name>,
    guard: Option<&Name>,
    w: u32,
    x: &Effect,
) -> bool {
    if !writes_unfenced(x) {
        return false;
    }
    // The lock key itself (its release or extension) and its keys (`lock:report:fence`, the
    // token counter).
    if x.kv
        && lease.kv
        && let (Some(t), Some(l)) = (x.table.as_deref(), lease.table.as_deref())
        && (t.starts_with(l) || is_fencing_column(t))
    {
        return false;
    }
    if carries_token(cx, w, guard) {
        return false;
    }
    // A session advisory lock fences the statements of its own session.
    if lease.kind == EffectKind::Lock
        && lease.sql.is_some()
        && x.kind != EffectKind::Remote
        && !x.kv
    {
        if x.via.is_some() {
            return false;
        }
        let on = executor(cx, w);
        // A pool hands each statement any of its connections, not the lock's.
        let pool = |p: &str| query::last(p).to_ascii_lowercase().contains("pool");
        return match (holder, on) {
            (Some(h), Some(o)) => query::first(h) != query::first(&o) || pool(h),
            _ => false,
        };
    }
    true
}

/// Is `x` a write to a store or a call to another service (not the lease itself) whose filter
/// holds no fencing column?
fn writes_unfenced(x: &Effect) -> bool {
    let writes = match x.kind {
        EffectKind::Remote => true,
        EffectKind::Write | EffectKind::Claim => !x.in_memory,
        _ => false,
    };
    writes && !is_lease(x) && !x.where_cols.iter().any(|c| is_fencing_column(c))
}

/// Where event `w` calls an operation the body was handed (`op(proof).await`, a parameter
/// called) with no token among its arguments, a call site in the crate whose operation (the
/// closure it hands in) writes or calls another service: the caller's first such effect.
fn operation_run<'a>(
    cx: &RuleCx<'a>,
    w: u32,
    guard: Option<&Name>,
) -> Option<(crate::facts::BodyId, u32, &'a Effect)> {
    let EventKind::Call(c) = &cx.body.events[w as usize].kind else {
        return None;
    };
    let [callee] = &c.func[..] else {
        return None;
    };
    if !c.recv.is_empty() || !cx.body.params.iter().any(|(p, _)| p == callee) {
        return None;
    }
    if carries_token(cx, w, guard) {
        return None;
    }
    cx.krate
        .call_sites(cx.id)
        .iter()
        .find_map(|&(caller, site)| {
            let at = RuleCx::new(cx.krate, caller);
            at.closures_of(site).into_iter().find_map(|(start, end)| {
                (start..end).find_map(|i| {
                    at.effs(i)
                        .find(|x| writes_unfenced(x))
                        .map(|x| (caller, i, x))
                })
            })
        })
}

/// Does call `w` pass the lease guard or something named like a fencing token (`lease.token`,
/// `fence`, `epoch`)?
fn carries_token(cx: &RuleCx<'_>, w: u32, guard: Option<&Name>) -> bool {
    let EventKind::Call(c) = &cx.body.events[w as usize].kind else {
        return false;
    };
    c.all_args().flat_map(|a| &a.paths).any(|p| {
        guard.is_some_and(|g| query::first(p) == g.as_str())
            || p.split('.').skip(1).any(is_fencing_column)
            || is_fencing_column(query::first(p))
    })
}

fn report_operation(
    cx: &RuleCx<'_>,
    a: u32,
    lease: &Effect,
    w: u32,
    (caller, at, x): (crate::facts::BodyId, u32, &Effect),
) -> Diagnostic {
    let message = "the caller's operation runs under a lease without a fencing token".to_string();
    let mut d = cx.diag(&RULE, w, message);
    d.primary_label = Some("the operation is called here with no fencing token".to_string());
    d.labels
        .push(cx.label(a, format!("the lease is taken here ({})", lease.what)));
    d.notes.push(format!(
        "`{}` hands in an operation that {} at {}",
        cx.krate.body(caller).name(),
        x.what,
        cx.krate.site(caller, at)
    ));
    d.help = Some(
        "hand the operation a fencing token taken with the lease (a number that grows with every holder) and make its writes check it, or run them in the transaction that holds the lock (`pg_advisory_xact_lock`); `#[staleguard::fenced(..)]` passes and checks the token"
            .to_string(),
    );
    d
}

fn report(cx: &RuleCx<'_>, a: u32, lease: &Effect, w: u32, x: &Effect) -> Diagnostic {
    let target = match (x.kind, x.table.as_deref()) {
        (EffectKind::Remote, _) => "a call to another service".to_string(),
        (_, Some(t)) => format!("a write to `{t}`"),
        _ => "a write".to_string(),
    };
    let message = format!("{target} is made under a lease without a fencing token");
    let mut d = cx.diag(&RULE, w, message);
    d.primary_label = Some(format!("{}: no fencing token is passed or checked", x.what));
    d.labels
        .push(cx.label(a, format!("the lease is taken here ({})", lease.what)));
    d.notes.extend(cx.chain_notes(x));
    if lease.kind == EffectKind::Lock && lease.sql.is_some() {
        d.notes.push(
            "a session advisory lock is held by its connection: a write on another connection is not stopped when that session, and the lock, are lost"
                .to_string(),
        );
    }
    d.help = Some(
        "pass a fencing token handed out with the lease (a number that grows with every holder) and make the write check it (`.. WHERE fence < $token`, the service's token parameter), or do the writes in the transaction that holds the lock (`pg_advisory_xact_lock`, `SELECT .. FOR UPDATE`); `#[staleguard::fenced(..)]` passes and checks the token"
            .to_string(),
    );
    d
}
