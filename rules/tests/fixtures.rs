//! The fixture harness: every `fixtures/<rule>/` case is analysed with `staleguard_rules` and its
//! findings compared exactly with its `//~^ rule` / `//~ rule` markers (file:line rule); a
//! missing finding and an extra one both fail. Also: the message style of every finding.
//!
//! Cases are read by `support/cases.rs`, the loader the CLI's snapshot test shares.

#[path = "support/cases.rs"]
mod cases;

use cases::Case;
use staleguard_rules::{Analyzer, Diagnostic, Knowledge};
use std::collections::BTreeMap;

fn knowledge(case: &Case) -> Knowledge {
    let mut k = Knowledge::default();
    for (field, names) in &case.directives.knowledge {
        let Some(kind) = Knowledge::KEYS.iter().find(|k| k.field == field) else {
            panic!("{}: unknown directive `//@ knowledge.{field}`", case.name);
        };
        let list = k.list_mut(kind.key).expect("a key of the table");
        list.extend(names.iter().cloned());
    }
    k
}

fn analyse(case: &Case) -> Vec<Diagnostic> {
    let analyzer = Analyzer::new(knowledge(case));
    let lowered: Vec<_> = case
        .files
        .iter()
        .map(|(p, t)| analyzer.lower(p, t))
        .collect();
    analyzer.check(&lowered, &|r| case.enables(r))
}

fn render(d: &Diagnostic) -> String {
    let mut s = format!(
        "{}[{}]: {}\n  --> {}:{}:{}\n",
        d.level.as_str(),
        d.rule,
        d.message,
        d.primary.file,
        d.primary.start.line,
        d.primary.start.column
    );
    if let Some(l) = &d.primary_label {
        s.push_str(&format!("   = primary: {l}\n"));
    }
    for l in &d.labels {
        s.push_str(&format!(
            "   = {}:{}: {}\n",
            l.span.start.line, l.span.start.column, l.message
        ));
    }
    for n in &d.notes {
        s.push_str(&format!("   = note: {n}\n"));
    }
    if let Some(h) = &d.help {
        s.push_str(&format!("   = help: {h}\n"));
    }
    s
}

#[test]
fn fixtures_match_their_markers() {
    let cases = cases::all();
    assert!(
        !cases.is_empty(),
        "no fixtures found under {}",
        cases::fixtures_root().display()
    );
    let mut failures = String::new();
    for case in &cases {
        let want = case.expected();
        let diags = analyse(case);
        let mut got: Vec<(String, u32, String)> = diags
            .iter()
            .map(|d| {
                (
                    d.primary.file.clone(),
                    d.primary.start.line,
                    d.rule.to_string(),
                )
            })
            .collect();
        got.sort();
        let mut missing: BTreeMap<&(String, u32, String), i32> = BTreeMap::new();
        for w in &want {
            *missing.entry(w).or_default() += 1;
        }
        for g in &got {
            *missing.entry(g).or_default() -= 1;
        }
        let mut report = String::new();
        for (k, n) in &missing {
            if *n > 0 {
                report.push_str(&format!("  - missing  {}:{} {}\n", k.0, k.1, k.2));
            } else if *n < 0 {
                report.push_str(&format!("  + extra    {}:{} {}\n", k.0, k.1, k.2));
                let found = diags.iter().find(|d| {
                    d.primary.file == k.0 && d.primary.start.line == k.1 && d.rule == k.2
                });
                for l in found.map(render).unwrap_or_default().lines() {
                    report.push_str(&format!("             {l}\n"));
                }
            }
        }
        if !report.is_empty() {
            failures.push_str(&format!("{}\n{report}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "fixture findings differ from markers ({} cases):\n{failures}",
        cases.len()
    );
}

#[test]
fn fixture_messages_follow_the_style() {
    let mut bad = Vec::new();
    for case in cases::all() {
        for d in analyse(&case) {
            let first = d.message.chars().next().unwrap_or('x');
            if first.is_uppercase() || d.message.ends_with('.') || d.message.is_empty() {
                bad.push(format!("{}: message `{}`", case.name, d.message));
            }
            if d.rule != "parse-error" && d.help.is_none() {
                bad.push(format!("{}: {} has no help", case.name, d.rule));
            }
            for l in &d.labels {
                if l.message.ends_with('.')
                    || l.message.chars().next().is_some_and(char::is_uppercase)
                {
                    bad.push(format!("{}: label `{}`", case.name, l.message));
                }
            }
        }
    }
    assert!(bad.is_empty(), "style problems:\n{}", bad.join("\n"));
}
