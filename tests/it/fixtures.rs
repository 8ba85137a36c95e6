//! The fixture harness: every `fixtures/<rule>/` case is analysed with `staleguard_rules` and its
//! findings compared exactly with the `//~^ rule` / `//~ rule` markers (file:line rule).
//!
//! A case is a file `fixtures/<rule>/<name>.rs` or a folder `fixtures/<rule>/<name>/` whose `.rs`
//! files form one crate. Only the folder's rule, `parse-error` and `unused-suppression` are
//! enabled, plus those named on a `//@ also: rule-a, rule-b` line. `//@ knowledge.<field>: a, b`
//! lines fill [`staleguard_rules::Knowledge`].

use staleguard_rules::{Analyzer, Diagnostic, Knowledge};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

struct Case {
    name: String,
    rule: String,
    files: Vec<(String, String)>,
}

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn rs_files(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("readable fixture dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, base, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, fs::read_to_string(&p).expect("utf-8 fixture")));
        }
    }
}

fn cases() -> Vec<Case> {
    let root = fixtures_root();
    let mut out = Vec::new();
    let Ok(rules) = fs::read_dir(&root) else {
        return out;
    };
    let mut rules: Vec<_> = rules
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    rules.sort();
    for rule_dir in rules {
        let rule = rule_dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let mut entries: Vec<_> = fs::read_dir(&rule_dir)
            .expect("readable")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            let name = format!("{rule}/{}", p.file_name().expect("name").to_string_lossy());
            let mut files = Vec::new();
            if p.is_dir() {
                rs_files(&p, &p, &mut files);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.file_name().expect("name").to_string_lossy().to_string();
                files.push((rel, fs::read_to_string(&p).expect("utf-8 fixture")));
            }
            if !files.is_empty() {
                out.push(Case {
                    name,
                    rule: rule.clone(),
                    files,
                });
            }
        }
    }
    out
}

fn split_list(s: &str) -> Vec<String> {
    s.split([',', ' '])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// `//@ also:` rules and `//@ knowledge.*:` entries from every file of a case.
fn directives(case: &Case) -> (Vec<String>, Knowledge) {
    let mut also = Vec::new();
    let mut k = Knowledge::default();
    for (_, text) in &case.files {
        for line in text.lines() {
            let Some(d) = line.trim().strip_prefix("//@") else {
                continue;
            };
            let Some((key, value)) = d.split_once(':') else {
                continue;
            };
            let key = key.trim();
            let values = split_list(value);
            match key {
                "also" => also.extend(values),
                "knowledge.locks" => k.locks.extend(values),
                "knowledge.transactions" => k.transactions.extend(values),
                "knowledge.remote_calls" => k.remote_calls.extend(values),
                "knowledge.state_reads" => k.state_reads.extend(values),
                "knowledge.state_writes" => k.state_writes.extend(values),
                "knowledge.token_checks" => k.token_checks.extend(values),
                "knowledge.token_deletes" => k.token_deletes.extend(values),
                "knowledge.schedulers" => k.schedulers.extend(values),
                other => panic!("{}: unknown directive `//@ {other}`", case.name),
            }
        }
    }
    (also, k)
}

/// Expected findings: `(file, line, rule)` from `//~^ rule` (one line up per `^`) or `//~ rule`.
fn expected(case: &Case) -> Vec<(String, u32, String)> {
    let mut out = Vec::new();
    for (file, text) in &case.files {
        for (i, line) in text.lines().enumerate() {
            let Some(pos) = line.find("//~") else {
                continue;
            };
            let rest = &line[pos + 3..];
            let ups = rest.chars().take_while(|c| *c == '^').count();
            let rules = split_list(&rest[ups..]);
            let target = (i + 1).saturating_sub(ups) as u32;
            for r in rules {
                out.push((file.clone(), target, r));
            }
        }
    }
    out.sort();
    out
}

fn analyse(case: &Case) -> Vec<Diagnostic> {
    let (also, knowledge) = directives(case);
    let analyzer = Analyzer::new(knowledge);
    let lowered: Vec<_> = case
        .files
        .iter()
        .map(|(p, t)| analyzer.lower(p, t))
        .collect();
    let rule = case.rule.clone();
    let enabled = move |r: &str| {
        r == rule || r == "parse-error" || r == "unused-suppression" || also.iter().any(|a| a == r)
    };
    analyzer.check(&lowered, &enabled)
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
    let cases = cases();
    assert!(
        !cases.is_empty(),
        "no fixtures found under {}",
        fixtures_root().display()
    );
    let mut failures = String::new();
    let mut checked = 0;
    for case in &cases {
        let want = expected(case);
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
        checked += 1;
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
                let d = diags.iter().find(|d| {
                    d.primary.file == k.0 && d.primary.start.line == k.1 && d.rule == k.2
                });
                report.push_str(&format!("  + extra    {}:{} {}\n", k.0, k.1, k.2));
                if let Some(d) = d {
                    for l in render(d).lines() {
                        report.push_str(&format!("             {l}\n"));
                    }
                }
            }
        }
        if !report.is_empty() {
            failures.push_str(&format!("{}\n{report}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "fixture findings differ from markers ({checked} cases):\n{failures}"
    );
}

#[test]
fn fixture_messages_follow_the_style() {
    let mut bad = Vec::new();
    for case in cases() {
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
