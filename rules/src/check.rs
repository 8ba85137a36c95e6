//! The check pipeline over lowered files: facts → classification → summaries → call-site
//! effects → rules → suppressions → sorted diagnostics.

use crate::diagnostic::{Diagnostic, Level};
use crate::facts::{BodyId, Facts, PerBody};
use crate::fxhash::FxHashSet;
use crate::ir::{Body, Ev};
use crate::kb::{self, BodyEffects, Eff, K};
use crate::par::{par_map, par_map_with};
use crate::rules::{CHECKS, CrateCx, RuleCx, to_span};
use crate::{Knowledge, LoweredFile, query, summary};

pub fn run(
    knowledge: &Knowledge,
    files: &[LoweredFile],
    enabled: &dyn Fn(&str) -> bool,
    threads: usize,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = files
        .iter()
        .filter_map(|f| f.parse_error.clone())
        .filter(|d| enabled(d.rule))
        .collect();
    let bodies: Vec<&[Body]> = files.iter().map(|f| f.ir.bodies.as_slice()).collect();
    let irs: Vec<&crate::ir::FileIr> = files.iter().map(|f| &f.ir).collect();
    let facts = Facts::collect(&irs);
    let counts = || bodies.iter().map(|bs| bs.len());
    let (ids, in_order): (Vec<BodyId>, Vec<&Body>) = facts.all_bodies().unzip();
    let by_id: PerBody<&Body> = PerBody::new(counts(), in_order);
    let classified = par_map_with(&ids, threads, kb::types::Memo::default, |memo, id| {
        kb::classify_body(&facts, knowledge, id.file, by_id[id], memo)
    });
    let mut effects: PerBody<BodyEffects> = PerBody::new(counts(), classified);
    let summaries = summary::summarize(&facts, &ids, &by_id, &effects, threads);
    // The project's own transaction helpers: fns that hand a closure to a transaction.
    let tx_helpers: FxHashSet<BodyId> = ids
        .iter()
        .copied()
        .filter(|id| {
            effects[id]
                .effs
                .iter()
                .flatten()
                .any(|e| e.kind == K::TxClosure)
        })
        .collect();
    // Call sites gain their callees' effects: worked out per body in parallel, then applied.
    let gained = par_map(&ids, threads, |id| {
        let fx = &effects[id];
        let mut gained = Vec::new();
        for i in 0..fx.callees.len() {
            let mut add: Vec<Eff> = Vec::new();
            let closure_arg =
                matches!(&by_id[id].events[i].kind, Ev::Call(c) if c.all_args().any(|a| a.closure));
            if closure_arg && fx.callees[i].iter().any(|c| tx_helpers.contains(c)) {
                let mut e = Eff::new(
                    K::TxClosure,
                    "runs a transaction closure (through a crate helper)",
                );
                e.via = fx.callees[i]
                    .iter()
                    .copied()
                    .find(|c| tx_helpers.contains(c));
                add.push(e);
            }
            for c in &fx.callees[i] {
                if let Some(s) = summaries.get(c) {
                    for (kind, token, _delete, _ev, _via, e) in &s.effects {
                        if add
                            .iter()
                            .any(|a| a.kind == *kind && a.token == *token && a.mem == e.mem)
                        {
                            continue;
                        }
                        let mut e = e.clone();
                        e.via = Some(*c);
                        e.token = *token;
                        if matches!(kind, K::Lock | K::TxBegin) && !bound(by_id[id], i) {
                            continue;
                        }
                        add.push(e);
                    }
                }
            }
            if !add.is_empty() {
                gained.push((i, add));
            }
        }
        gained
    });
    for (id, gained) in ids.iter().zip(gained) {
        let fx = effects.get_mut(id).expect("effects exist");
        for (i, add) in gained {
            fx.effs.extend(i, add);
        }
    }
    let krate = CrateCx {
        paths: files.iter().map(|f| f.path.as_str()).collect(),
        lines: files.iter().map(|f| &f.lines).collect(),
        bodies: bodies.clone(),
        facts: &facts,
        effects: &effects,
        summaries: &summaries,
    };
    let checks: Vec<_> = CHECKS.iter().filter(|(m, _)| enabled(m.name)).collect();
    if !checks.is_empty() {
        let found = par_map(&ids, threads, |id| {
            let body = by_id[id];
            let fx = &effects[id];
            let mut found = Vec::new();
            if !worth_checking(fx) {
                return found;
            }
            let cx = RuleCx {
                krate: &krate,
                id: *id,
                body,
                fx,
                states: query::states(body, fx),
                detached: query::detached(body, fx),
                enter_of: enter_of(body),
            };
            for (_, check) in &checks {
                check(&cx, &mut found);
            }
            found
        });
        out.extend(found.into_iter().flatten());
    }
    // Suppressions.
    let mut used = vec![Vec::new(); files.len()];
    for (fi, f) in files.iter().enumerate() {
        used[fi] = vec![false; f.suppressions.len()];
    }
    out.retain(|d| {
        let Some(fi) = files.iter().position(|f| f.path == d.primary.file) else {
            return true;
        };
        let line = d.primary.start.line;
        let mut keep = true;
        for (si, s) in files[fi].suppressions.iter().enumerate() {
            if s.rules.iter().any(|r| r == d.rule) && line >= s.first_line && line <= s.last_line {
                used[fi][si] = true;
                keep = false;
            }
        }
        keep
    });
    if enabled("unused-suppression") {
        for (fi, f) in files.iter().enumerate() {
            for (si, s) in f.suppressions.iter().enumerate() {
                if used[fi][si] {
                    continue;
                }
                let known = s.rules.iter().all(|r| crate::registry::find(r).is_some());
                if known && !s.rules.iter().any(|r| enabled(r)) {
                    continue;
                }
                let message = if known {
                    format!("`allow({})` suppresses nothing", s.rules.join(", "))
                } else {
                    let unknown: Vec<&str> = s
                        .rules
                        .iter()
                        .map(String::as_str)
                        .filter(|r| crate::registry::find(r).is_none())
                        .collect();
                    format!(
                        "unknown rule `{}` in `staleguard: allow(..)`",
                        unknown.join("`, `")
                    )
                };
                out.push(Diagnostic {
                    rule: "unused-suppression",
                    level: Level::Warning,
                    message,
                    primary: to_span(&f.path, &f.lines, s.sp),
                    primary_label: None,
                    labels: Vec::new(),
                    help: Some(
                        "remove the comment, or move it to the line the finding is reported on"
                            .to_string(),
                    ),
                    notes: Vec::new(),
                    function: None,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.primary.file, a.primary.start, a.rule, &a.message).cmp(&(
            &b.primary.file,
            b.primary.start,
            b.rule,
            &b.message,
        ))
    });
    out.dedup_by(|a, b| a.rule == b.rule && a.primary == b.primary && a.message == b.message);
    out
}

fn bound(body: &Body, call: usize) -> bool {
    body.events
        .iter()
        .any(|e| matches!(&e.kind, Ev::Bind(b) if b.calls.last() == Some(&(call as u32))))
}

fn enter_of(body: &Body) -> Vec<Option<u32>> {
    let mut out = vec![None; body.events.len()];
    let mut stack = Vec::new();
    for (i, ev) in body.events.iter().enumerate() {
        match ev.kind {
            Ev::Enter(_) => stack.push(i as u32),
            Ev::Leave => out[i] = stack.pop(),
            _ => {}
        }
    }
    out
}

/// Whether any rule can fire on a body: the rules need a write under a lock or transaction, a
/// remote call in a transaction, a token write, or a spawned / delayed task.
fn worth_checking(fx: &BodyEffects) -> bool {
    let mut has = [false; 7];
    has[1] = fx.tx_param.is_some();
    for e in fx.effs.iter().flatten() {
        match e.kind {
            K::Write => {
                has[0] = true;
                if e.token || e.mem {
                    has[5] = true;
                }
            }
            K::Lock | K::TxBegin | K::TxClosure | K::Claim => has[1] = true,
            K::Remote => has[2] = true,
            K::Spawn | K::Schedule => has[3] = true,
            K::Sleep => has[4] = true,
            K::Read if !e.mem => has[6] = true,
            _ => {}
        }
    }
    // A persisted read and a write with no protection at all: check-before-lock's lost update.
    ((has[0] || has[2]) && has[1]) || (has[0] && (has[4] || has[6])) || has[3] || has[5]
}
