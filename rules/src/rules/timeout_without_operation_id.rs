//! `timeout-without-operation-id`: a delayed task or timer whose payload carries a resource id
//! but no operation identity, and whose action writes state without comparing one (ABA).

use super::{RuleCx, declare_rule};
use crate::diagnostic::Diagnostic;
use crate::facts::BodyId;
use crate::ir::{Ev, Region};
use crate::kb::K;
use crate::kb::names::{is_operation_identity, is_resource_id};
use std::collections::HashSet;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a delayed task — a spawned task that sleeps, a `DelayQueue` entry, a delayed job —
    /// whose payload (captured variables, or the job struct's fields, resolved across files)
    /// names the resource (`seat_id`) but not the operation that scheduled it (reservation,
    /// attempt, generation, version, lease, token, operation id), and whose action writes state
    /// without comparing such an identity.
    ///
    /// ### Why is this bad?
    ///
    /// A timeout is a message from the past. By the time it fires the resource may belong to a
    /// new round:
    ///
    /// ```text
    /// t0   user A reserves seat 7; a 10-minute "release seat 7" timer is scheduled
    /// t5   user A cancels; user B reserves seat 7
    /// t10  the timer fires: UPDATE seats SET status = 'free' WHERE id = 7
    ///      <- user B's live reservation is released (ABA)
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(HOLD).await;
    ///     sqlx::query("UPDATE seats SET status = 'free' WHERE id = $1").bind(seat_id).execute(&pool).await
    /// });
    /// ```
    ///
    /// ### Use instead
    ///
    /// Carry the operation identity in the payload and compare it when the timer fires, in Rust
    /// or in the write's `WHERE`:
    ///
    /// ```rust,ignore
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(HOLD).await;
    ///     sqlx::query("UPDATE seats SET status = 'free' WHERE id = $1 AND reservation_id = $2")
    ///         .bind(seat_id).bind(reservation_id).execute(&pool).await
    /// });
    /// ```
    ///
    /// `#[staleguard::fenced(..)]` on the timer's handler generates the lock → re-read → verify
    /// identity sequence.
    ///
    /// ### Known problems
    ///
    /// Identities are recognised by name (`reservation_id`, `attempt`, `generation`, `version`,
    /// `lease`, `token`, ..). A `DelayQueue` consumer or job handler that the crate does not
    /// define is not inspected: the payload alone decides.
    pub static RULE = {
        name: "timeout-without-operation-id",
        level: Error,
        summary: "delayed task carries only the resource id and acts without checking the operation identity",
    };
}

pub fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let n = cx.body.events.len() as u32;
    for s in 0..n {
        if cx.has(s, K::Spawn) {
            spawned(cx, s, out);
        } else if cx.has(s, K::Schedule) {
            scheduled(cx, s, out);
        }
    }
}

/// The `[start, end)` event range of the closure regions attached to call `s`.
fn regions(cx: &RuleCx<'_>, s: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let evs = &cx.body.events;
    let mut i = s as usize + 1;
    while i < evs.len() {
        match &evs[i].kind {
            Ev::Enter(Region::Closure { call: Some(c) }) if *c == s => {
                let end = (i + 1..evs.len())
                    .find(|&j| cx.enter_of[j] == Some(i as u32))
                    .unwrap_or(evs.len());
                out.push((i as u32 + 1, end as u32));
                i = end + 1;
            }
            _ => break,
        }
    }
    out
}

fn spawned(cx: &RuleCx<'_>, s: u32, out: &mut Vec<Diagnostic>) {
    for (start, end) in regions(cx, s) {
        let Some(sleep) = (start..end).find(|&i| cx.has(i, K::Sleep)) else {
            continue;
        };
        let Some(write) = (sleep..end).find(|&i| cx.has(i, K::Write)) else {
            continue;
        };
        // Captured variables: places read in the region whose root is not bound inside it.
        let mut bound: HashSet<&str> = HashSet::new();
        let mut used: Vec<&str> = Vec::new();
        for ev in &cx.body.events[start as usize..end as usize] {
            match &ev.kind {
                Ev::Bind(b) => {
                    used.extend(b.deps.iter().map(String::as_str));
                    bound.extend(b.names.iter().map(String::as_str));
                }
                Ev::Cond { deps, .. } | Ev::Assign { deps, .. } => {
                    used.extend(deps.iter().map(String::as_str))
                }
                Ev::Call(c) => {
                    if let Some(r) = c.recv.first() {
                        used.push(r.as_str());
                    }
                    for a in c.all_args() {
                        used.extend(a.paths.iter().map(String::as_str));
                    }
                }
                _ => {}
            }
        }
        let captured: Vec<&str> = used
            .into_iter()
            .filter(|p| !bound.contains(root(p)) && root(p) != "self")
            .collect();
        let has_res = captured.iter().any(|p| is_resource_id(p));
        if !has_res {
            continue;
        }
        let ids: Vec<&str> = captured
            .iter()
            .copied()
            .filter(|p| is_operation_identity(p))
            .collect();
        let compares = !ids.is_empty() && compares_in(cx, start, end, &ids);
        if compares {
            continue;
        }
        let mut d = cx.diag(
            &RULE,
            s,
            "delayed task carries the resource id but acts without checking the operation identity"
                .to_string(),
        );
        d.primary_label = Some("timer scheduled here".to_string());
        d.labels.push(cx.label(sleep, "waits here"));
        d.labels
            .push(cx.label(write, "writes state here when it fires"));
        d.help = Some(help());
        if ids.is_empty() {
            let res: Vec<&str> = captured
                .iter()
                .copied()
                .filter(|p| is_resource_id(p))
                .collect();
            d.notes.push(format!(
                "the task captures `{}` but no reservation / attempt / generation / version id",
                res.join("`, `")
            ));
        }
        if let Some(w) = cx.eff(write, K::Write) {
            d.notes.extend(cx.chain_notes(w));
        }
        out.push(d);
    }
}

fn root(p: &str) -> &str {
    p.split('.').next().unwrap_or(p)
}

/// Is an identity compared (in a condition, a write's filter, or passed to a write) in the range?
fn compares_in(cx: &RuleCx<'_>, start: u32, end: u32, ids: &[&str]) -> bool {
    (start..end).any(|i| match &cx.body.events[i as usize].kind {
        Ev::Cond { deps, .. } => deps.iter().any(|d| {
            ids.contains(&d.as_str())
                || is_operation_identity(d) && ids.iter().any(|x| root(x) == root(d))
        }),
        Ev::Call(c) => {
            let passes = c.all_args().any(|a| {
                a.paths
                    .iter()
                    .any(|p| ids.contains(&p.as_str()) || is_operation_identity(p))
            });
            passes
                && cx
                    .effs(i)
                    .iter()
                    .any(|e| e.kind == K::Write || e.kind == K::Read || e.kind == K::Claim)
                || cx.effs(i).iter().any(|e| e.ident_guard) && passes
                || passes && !cx.fx.callees[i as usize].is_empty()
        }
        _ => false,
    })
}

fn scheduled(cx: &RuleCx<'_>, s: u32, out: &mut Vec<Diagnostic>) {
    let Some(eff) = cx.eff(s, K::Schedule) else {
        return;
    };
    let has_res = eff.payload.iter().any(|p| is_resource_id(p));
    if !has_res {
        return;
    }
    let ids: Vec<&str> = eff
        .payload
        .iter()
        .map(String::as_str)
        .filter(|p| is_operation_identity(p))
        .collect();
    // The job's handlers: methods on the payload type, or fns taking it.
    let mut handlers: Vec<BodyId> = Vec::new();
    if let Some(t) = &eff.payload_ty {
        for (fi, bodies) in cx.krate.bodies.iter().enumerate() {
            for (bi, b) in bodies.iter().enumerate() {
                if b.self_ty.as_deref() == Some(t.as_str())
                    && b.params.iter().any(|(n, _)| n == "self")
                    && b.is_async
                    || b.params.iter().any(|(n, ty)| {
                        n != "self" && ty.iter().any(|x| x.rsplit("::").next() == Some(t.as_str()))
                    })
                {
                    handlers.push(BodyId {
                        file: fi as u32,
                        body: bi as u32,
                    });
                }
            }
        }
    }
    let mut writer: Option<BodyId> = None;
    let mut compared = false;
    for h in &handlers {
        let body = cx.krate.body(*h);
        let fx = &cx.krate.effects[h];
        let sum = cx.krate.summaries.get(h);
        let writes = sum.is_some_and(|s| s.has(K::Write));
        if !writes {
            continue;
        }
        writer.get_or_insert(*h);
        for (i, ev) in body.events.iter().enumerate() {
            let hit = match &ev.kind {
                Ev::Cond { deps, .. } => deps
                    .iter()
                    .any(|d| is_operation_identity(d) && ids.iter().any(|x| d.ends_with(x))),
                Ev::Call(c) => {
                    c.all_args().any(|a| {
                        a.paths
                            .iter()
                            .any(|p| is_operation_identity(p) && ids.iter().any(|x| p.ends_with(x)))
                    }) || fx.effs[i].iter().any(|e| e.ident_guard)
                }
                _ => false,
            };
            if hit && !ids.is_empty() {
                compared = true;
            }
        }
    }
    if handlers.is_empty() || writer.is_none() {
        // No handler in the crate (or none that writes): the payload alone decides.
        if !ids.is_empty() || (writer.is_none() && !handlers.is_empty()) {
            return;
        }
    } else if compared {
        return;
    }
    let mut d = cx.diag(
        &RULE,
        s,
        "delayed task carries the resource id but no operation identity".to_string(),
    );
    d.primary_label = Some(format!("{} here", eff.what));
    d.help = Some(help());
    let res: Vec<&str> = eff
        .payload
        .iter()
        .map(String::as_str)
        .filter(|p| is_resource_id(p))
        .collect();
    match &eff.payload_ty {
        Some(t) => d.notes.push(format!(
            "the payload `{t}` carries `{}` but no reservation / attempt / generation / version id",
            res.join("`, `")
        )),
        None => d.notes.push(format!(
            "the payload carries `{}` but no reservation / attempt / generation / version id",
            res.join("`, `")
        )),
    }
    if let Some(w) = writer {
        let b = cx.krate.body(w);
        d.notes.push(format!(
            "`{}` handles it and writes state at {}:{}",
            b.name, cx.krate.paths[w.file as usize], b.sp.line
        ));
    }
    out.push(d);
}

fn help() -> String {
    "carry the operation identity (reservation / attempt / generation id) in the payload and compare it when the timer fires, in code or in the write's `WHERE`; `#[staleguard::fenced(..)]` generates the re-read and check".to_string()
}
