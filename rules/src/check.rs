//! The check pipeline over lowered files: facts → classification → summaries → call-site
//! effects ([`analyse`]) → the rules that apply to each body → suppressions → sorted
//! diagnostics ([`run`]).

use crate::diagnostic::Diagnostic;
use crate::effects::{AllBodyEffects, CallSiteEffects};
use crate::facts::{BodyId, Facts, PerBody};
use crate::ir::Body;
use crate::kb;
use crate::par::{par_map, par_map_with};
use crate::rules::{ALL, CrateView, Rule, RuleCx};
use crate::summary::{self, Summary};
use crate::{CrateName, Knowledge, LoweredFile, suppress};

/// Everything known about a crate's bodies before the rules run.
pub(crate) struct CrateAnalysis<'a> {
    pub facts: Facts<'a>,
    /// Every body, in body order.
    pub ids: Vec<BodyId>,
    /// What each body's own events do.
    pub effects: AllBodyEffects,
    pub summaries: PerBody<Summary>,
    /// What each body's call sites gain from their callees.
    pub sites: PerBody<CallSiteEffects>,
}

/// Collects the crate facts, classifies every body's events (on up to `threads` threads),
/// summarises the bodies to a fixpoint, then widens each call site with its callees' effects.
pub(crate) fn analyse<'a>(
    knowledge: &Knowledge,
    crates: &[CrateName],
    files: &'a [LoweredFile],
    threads: usize,
) -> CrateAnalysis<'a> {
    let irs: Vec<&crate::ir::FileIr> = files.iter().map(|f| &f.ir).collect();
    let mut facts = Facts::collect(&irs);
    facts.add_module_paths(files.iter().map(|f| f.path.as_str()), crates);
    let counts = files.iter().map(|f| f.ir.bodies.len());
    // Sized up front: grown by doubling, the two lists held up to twice their bodies' worth at
    // the analysis' peak.
    let total: usize = files.iter().map(|f| f.ir.bodies.len()).sum();
    let (mut ids, mut in_order): (Vec<BodyId>, Vec<&Body>) =
        (Vec::with_capacity(total), Vec::with_capacity(total));
    for (id, body) in facts.all_bodies() {
        ids.push(id);
        in_order.push(body);
    }
    let bodies: PerBody<&Body> = PerBody::new(counts, in_order);
    let classified = par_map_with(&ids, threads, kb::types::Memo::default, |memo, id| {
        kb::classify_body(&facts, knowledge, id.file, bodies[id], memo)
    });
    let effects = AllBodyEffects::new(&bodies, classified);
    let summaries = summary::summarize(&facts, &ids, &bodies, &effects, threads);
    let sites = summary::widen(&ids, &bodies, &effects, &summaries, threads);
    CrateAnalysis {
        facts,
        ids,
        effects,
        summaries,
        sites,
    }
}

/// A file of test or bench targets (a `tests/`, `benches/` or `benchmarks/` folder), or of a
/// crate, folder or module of test support (`test-utils/`, `my_test_fakes/`, `mocks/`,
/// `src/tests.rs` compiled for other crates' tests, `cli_test_dal.rs`, `mock_gateway.rs`): it
/// runs alone against throw-away state, like `#[test]` code, so no rule is checked in it (its
/// bodies still count for summaries).
fn is_test_file(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split(['/', '\\']).collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let words = |c: &str| {
        c.split(['_', '-']).any(|w| {
            matches!(
                w,
                "test" | "tests" | "testing" | "fake" | "fakes" | "mock" | "mocks"
            )
        })
    };
    words(stem)
        || parts
            .iter()
            .any(|c| matches!(*c, "benches" | "benchmarks") || words(c))
}

/// Per file: is it the file of a module another file declares as test code
/// (`#[cfg(test)] mod tests;` in `src/db/mod.rs` makes `src/db/tests.rs`, `src/db/tests/mod.rs`
/// and everything under `src/db/tests/` test code)?
fn test_module_files(files: &[LoweredFile]) -> Vec<bool> {
    let norm = |p: &str| p.replace('\\', "/");
    let mut roots: Vec<String> = Vec::new();
    for f in files {
        if !f.ir.facts.mods.iter().any(|m| m.1) {
            continue;
        }
        let path = norm(&f.path);
        let (dir, file) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        let children = match file {
            "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
            _ => path.strip_suffix(".rs").unwrap_or(&path).to_string(),
        };
        for (m, _) in f.ir.facts.mods.iter().filter(|m| m.1) {
            roots.push(if children.is_empty() {
                m.to_string()
            } else {
                format!("{children}/{m}")
            });
        }
    }
    files
        .iter()
        .map(|f| {
            let path = norm(&f.path);
            roots.iter().any(|r| {
                path.strip_prefix(r.as_str())
                    .is_some_and(|rest| rest == ".rs" || rest.starts_with('/'))
            })
        })
        .collect()
}

/// Runs every enabled rule over the lowered files of one crate or workspace: parse errors,
/// then each body's findings from the rules that apply to it, with suppressions applied (and
/// unused ones reported), sorted by file and position.
pub fn run(
    knowledge: &Knowledge,
    crates: &[CrateName],
    files: &[LoweredFile],
    enabled: &dyn Fn(&str) -> bool,
    threads: usize,
) -> Vec<Diagnostic> {
    run_with(knowledge, crates, files, enabled, threads, true)
}

/// [`run`], with `skip_inapplicable` saying whether a rule is checked only on the bodies its
/// `applies` accepts (always, but in the test that `applies` hides no finding).
fn run_with(
    knowledge: &Knowledge,
    crates: &[CrateName],
    files: &[LoweredFile],
    enabled: &dyn Fn(&str) -> bool,
    threads: usize,
    skip_inapplicable: bool,
) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = files
        .iter()
        .filter_map(|f| f.parse_error.as_deref().cloned())
        .filter(|d| enabled(d.rule))
        .collect();
    let rules: Vec<&Rule> = ALL
        .iter()
        .copied()
        .filter(|r| enabled(r.meta.name))
        .collect();
    if !rules.is_empty() {
        let a = analyse(knowledge, crates, files, threads);
        let krate = CrateView {
            paths: files.iter().map(|f| f.path.as_str()).collect(),
            lines: files.iter().map(|f| &f.lines).collect(),
            bodies: files.iter().map(|f| f.ir.bodies.as_slice()).collect(),
            fix_anchors: files.iter().map(|f| f.ir.fix_anchors.as_slice()).collect(),
            facts: &a.facts,
            effects: &a.effects,
            sites: &a.sites,
            summaries: &a.summaries,
            reapers: Default::default(),
            requeuers: Default::default(),
            callers: Default::default(),
            responses: Default::default(),
            updates: Default::default(),
            columns: Default::default(),
            handouts: Default::default(),
            registrations: Default::default(),
        };
        let test_mods = test_module_files(files);
        let found = par_map(&a.ids, threads, |id| {
            if is_test_file(krate.paths[id.file as usize])
                || test_mods[id.file as usize]
                || krate
                    .body(*id)
                    .self_ty
                    .as_deref()
                    .is_some_and(crate::kb::names::is_test_double)
            {
                return Vec::new();
            }
            let cx = RuleCx::new(&krate, *id);
            let mut found = Vec::new();
            for rule in &rules {
                if !skip_inapplicable || (rule.applies)(&cx) {
                    (rule.check)(&cx, &mut found);
                }
            }
            found
        });
        out.extend(found.into_iter().flatten());
    }
    suppress::apply(files, &mut out, enabled);
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

/// See [`crate::Analyzer::dump_effects`].
#[cfg(feature = "dev")]
pub(crate) fn dump_effects(
    knowledge: &Knowledge,
    crates: &[CrateName],
    files: &[LoweredFile],
    threads: usize,
) -> String {
    use std::fmt::Write as _;
    let a = analyse(knowledge, crates, files, threads);
    let body_of = |c: &BodyId| &files[c.file as usize].ir.bodies[c.body as usize];
    let name = |c: &BodyId| {
        let b = body_of(c);
        format!("{}@{}:{}", b.name(), files[c.file as usize].path, b.sp.line)
    };
    let mut out = String::new();
    for id in &a.ids {
        let own = &a.effects[id];
        let sum = &a.summaries[id];
        let view = crate::effects::Effects {
            body: own,
            sites: &a.sites[id],
        };
        let any = view.all().next().is_some()
            || own.callees.iter().any(|c| !c.is_empty())
            || !sum.effects.is_empty();
        if !any {
            continue;
        }
        let body = body_of(id);
        let _ = writeln!(
            out,
            "fn {} txparam={:?} events={}",
            name(id),
            own.tx_param.as_deref().map(crate::name::Name::as_str),
            body.events.len()
        );
        for i in 0..body.events.len() as u32 {
            for e in view.at(i) {
                let _ = writeln!(
                    out,
                    "  {i} {:?} t={:?} lk={} cond={} idg={} del={} mem={} ins={} purge={} tok={} where={:?} sets={:?} what={:?} tx={:?} guard={:?} delayed={} sql={:?} lockclaim={} conf={} via={:?} pay={:?} pty={:?} det={} ro={}",
                    e.kind,
                    e.table.as_deref(),
                    e.locking,
                    e.conditional,
                    e.ident_guard,
                    e.delete,
                    e.in_memory,
                    e.insert,
                    e.purge,
                    e.token,
                    e.where_cols.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
                    e.sets
                        .iter()
                        .map(|s| format!("{}={:?}", s.column, s.value))
                        .collect::<Vec<_>>(),
                    e.what,
                    e.tx_local(),
                    e.guard,
                    e.delayed,
                    e.sql,
                    e.lock_claim,
                    e.configured,
                    e.via.as_ref().map(name),
                    e.payload
                        .iter()
                        .flat_map(|p| &p.names)
                        .map(|n| n.as_str())
                        .collect::<Vec<_>>(),
                    e.payload.as_ref().and_then(|p| p.ty.as_deref()),
                    view.detached(i),
                    e.read_only()
                );
            }
            let cs = view.callees(i);
            if !cs.is_empty() {
                let _ = writeln!(
                    out,
                    "  {i} callees {:?}",
                    cs.iter().map(name).collect::<Vec<_>>()
                );
            }
        }
        for exp in &sum.effects {
            let e = &exp.effect;
            let _ = writeln!(
                out,
                "  sum {:?} tok={} del={} ev={} via={:?} what={:?} t={:?} mem={}",
                e.kind,
                e.token,
                e.delete,
                exp.at,
                exp.callee.as_ref().map(name),
                e.what,
                e.table.as_deref(),
                e.in_memory
            );
        }
    }
    out
}

/// The fixture cases (the loader the fixture harness uses).
#[cfg(test)]
#[path = "../tests/support/cases.rs"]
mod cases;

#[cfg(test)]
mod tests {
    use super::cases;
    use crate::{Analyzer, Knowledge};

    #[test]
    fn test_targets_and_test_support_are_test_files() {
        for p in [
            "tests/flows.rs",
            "crates/x/tests/a.rs",
            "benches/b.rs",
            "crates/docs_rs_test_fakes/src/lib.rs",
            "test-utils/src/db.rs",
            "src/mocks/gateway.rs",
            "src/tests.rs",
            "src/test_helpers.rs",
            "crates/db/src/cli_test_dal.rs",
            "src/mock_gateway.rs",
            "benchmarks/src/lib.rs",
        ] {
            assert!(super::is_test_file(p), "{p}");
        }
        for p in [
            "crates/attest/src/lib.rs",
            "src/latest.rs",
            "src/mocking_bird.rs",
            "src/contest/mod.rs",
            "fixtures/a/b.rs",
        ] {
            assert!(!super::is_test_file(p), "{p}");
        }
    }

    #[test]
    fn test_doubles_are_known_by_their_type_names() {
        for t in ["MockDb", "FakeGateway", "StubStore", "Mock"] {
            assert!(crate::kb::names::is_test_double(t), "{t}");
        }
        for t in ["Mockingbird", "Fakeout", "Stubborn", "OrderStore", "Db"] {
            assert!(!crate::kb::names::is_test_double(t), "{t}");
        }
    }

    /// A rule's `applies` must answer yes wherever its `check` reports: on every fixture case,
    /// checking every body with every rule finds exactly what checking the applicable ones
    /// finds.
    #[test]
    fn applies_hides_no_finding() {
        let mut compared = 0;
        for case in cases::all() {
            let analyzer = Analyzer::new(Knowledge::default());
            let files: Vec<_> = case
                .files
                .iter()
                .map(|(p, t)| analyzer.lower(p, t))
                .collect();
            let all = |_: &str| true;
            let mut k = Knowledge::default();
            for (field, names) in &case.directives.knowledge {
                let key = Knowledge::KEYS
                    .iter()
                    .find(|x| x.field == field)
                    .expect("a field");
                k.list_mut(key.key)
                    .expect("a key")
                    .extend(names.iter().cloned());
            }
            let applicable = super::run_with(&k, &[], &files, &all, 1, true);
            let everywhere = super::run_with(&k, &[], &files, &all, 1, false);
            assert_eq!(applicable, everywhere, "{}", case.name);
            compared += applicable.len();
        }
        assert!(compared > 100, "only {compared} findings compared");
    }
}
