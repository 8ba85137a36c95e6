//! The one loader of fixture cases, shared by the fixture harness (`rules/tests/fixtures.rs`)
//! and the snapshot test of the CLI (`tests/it/snapshots.rs`, which includes this file with
//! `#[path]`).
//!
//! A case is a file `fixtures/<rule>/<name>.rs` or a folder `fixtures/<rule>/<name>/` whose
//! `.rs` files form one crate. Expected findings are marked `//~^ rule` (one line up per `^`)
//! or `//~ rule` (the same line). Directives on `//@` lines:
//! - `//@ also: rule-a, rule-b` enables more rules than the folder's own;
//! - `//@ knowledge.<field>: Name, Other::name` adds project knowledge (the field as in
//!   `staleguard_rules::Knowledge`, or its configuration key).
//!
//! Any other directive is an error, so a typo cannot silently change what a case tests.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

/// One fixture case.
pub struct Case {
    /// `<rule>/<file or folder name>`.
    pub name: String,
    /// The folder's rule.
    pub rule: String,
    /// The case's path relative to the repository root (`fixtures/<rule>/<name>`).
    pub rel: PathBuf,
    /// `(path relative to the case, text)` of each `.rs` file, in path order.
    pub files: Vec<(String, String)>,
    pub directives: Directives,
}

/// What a case's `//@` lines ask for.
#[derive(Default)]
pub struct Directives {
    pub also: Vec<String>,
    /// `(knowledge field, names)` in the order written.
    pub knowledge: Vec<(String, Vec<String>)>,
}

/// The repository root (where `fixtures/` lives).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.join("fixtures").is_dir() {
        here.to_path_buf()
    } else {
        here.parent().expect("rules/ has a parent").to_path_buf()
    }
}

pub fn fixtures_root() -> PathBuf {
    repo_root().join("fixtures")
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    entries
}

fn rs_files(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for p in sorted_entries(dir) {
        if p.is_dir() {
            rs_files(&p, base, out);
        } else if p.extension().is_some_and(|e| e == "rs" || e == "sql") {
            // A folder case's `.sql` files are its schema (migrations), as the CLI passes them.
            let rel = p
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, read(&p)));
        }
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every case under `fixtures/`, sorted by rule folder, then by name.
pub fn all() -> Vec<Case> {
    let root = fixtures_root();
    let mut out = Vec::new();
    for rule_dir in sorted_entries(&root).into_iter().filter(|p| p.is_dir()) {
        let rule = file_name(&rule_dir);
        for p in sorted_entries(&rule_dir) {
            let mut files = Vec::new();
            if p.is_dir() {
                rs_files(&p, &p, &mut files);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push((file_name(&p), read(&p)));
            }
            if files.is_empty() {
                continue;
            }
            let name = format!("{rule}/{}", file_name(&p));
            let directives = directives(&name, &files);
            out.push(Case {
                rel: p
                    .strip_prefix(repo_root())
                    .expect("under root")
                    .to_path_buf(),
                name,
                rule: rule.clone(),
                files,
                directives,
            });
        }
    }
    out
}

fn file_name(p: &Path) -> String {
    p.file_name().expect("a name").to_string_lossy().to_string()
}

fn split_list(s: &str) -> Vec<String> {
    s.split([',', ' '])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Reads the `//@` lines of every file of a case; panics on an unknown directive.
fn directives(case: &str, files: &[(String, String)]) -> Directives {
    let mut d = Directives::default();
    for (file, text) in files {
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim().strip_prefix("//@") else {
                continue;
            };
            let Some((key, value)) = rest.split_once(':') else {
                panic!("{case}: {file}:{}: `//@` without `key: value`", i + 1);
            };
            let key = key.trim();
            let values = split_list(value);
            if key == "also" {
                d.also.extend(values);
            } else if let Some(field) = key.strip_prefix("knowledge.") {
                d.knowledge.push((field.replace('-', "_"), values));
            } else {
                panic!("{case}: {file}:{}: unknown directive `//@ {key}`", i + 1);
            }
        }
    }
    d
}

impl Case {
    /// The rules the case runs: its folder's, `parse-error`, `unused-suppression` and those its
    /// `//@ also:` lines name.
    pub fn enables(&self, rule: &str) -> bool {
        rule == self.rule
            || rule == "parse-error"
            || rule == "unused-suppression"
            || self.directives.also.iter().any(|a| a == rule)
    }

    /// Expected findings, sorted: `(file, line, rule)`.
    pub fn expected(&self) -> Vec<(String, u32, String)> {
        let mut out = Vec::new();
        for (file, text) in &self.files {
            for (i, line) in text.lines().enumerate() {
                let Some(pos) = line.find("//~") else {
                    continue;
                };
                let rest = &line[pos + 3..];
                let ups = rest.chars().take_while(|c| *c == '^').count();
                let target = (i + 1).saturating_sub(ups) as u32;
                for r in split_list(&rest[ups..]) {
                    out.push((file.clone(), target, r));
                }
            }
        }
        out.sort();
        out
    }
}
