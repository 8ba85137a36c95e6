//! Blessed human output for every fixture case: `fixtures/<rule>/<case>.rs` (or the folder
//! `<case>/`) is linted by the binary with `--format human --color never` and compared with
//! `fixtures/<rule>/<case>.stdout`. `STALEGUARD_BLESS=1` rewrites the snapshots.
//!
//! The run sees what the fixture harness sees: `--select` the folder's rule, `parse-error`,
//! `unused-suppression` and the case's `//@ also:` rules, and a `--config` file holding its
//! `//@ knowledge.<field>:` entries.

use std::path::{Path, PathBuf};

use staleguard_rules::{Knowledge, registry};

use crate::cases::{self, Case};
use crate::support::{Run, bin, repo_root};

/// Command-line arguments and configuration text reproducing the harness's settings.
fn settings(case: &Case) -> (String, String) {
    let mut select = vec!["parse-error".to_string(), "unused-suppression".to_string()];
    if registry::find(&case.rule).is_some() {
        select.push(case.rule.clone());
    }
    select.extend(case.directives.also.iter().cloned());
    let mut knowledge = String::new();
    for (field, values) in &case.directives.knowledge {
        let key = Knowledge::KEYS
            .iter()
            .find(|k| k.field == field)
            .unwrap_or_else(|| panic!("{}: unknown knowledge field `{field}`", case.name))
            .key;
        let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
        knowledge.push_str(&format!("{key} = [{}]\n", quoted.join(", ")));
    }
    (select.join(","), format!("[knowledge]\n{knowledge}"))
}

/// The summary's elapsed time is the only part that varies between runs.
fn normalize(stdout: &str) -> String {
    stdout
        .lines()
        .map(
            |line| match (line.starts_with("staleguard: "), line.rfind(" (")) {
                (true, Some(open)) => {
                    let close = line[open..].find("s)").map_or(line.len(), |i| open + i + 2);
                    format!("{} (TIME){}", &line[..open], &line[close..])
                }
                _ => line.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn snapshot_path(case: &Path) -> PathBuf {
    repo_root().join(case.with_extension("stdout"))
}

#[test]
fn fixture_output_matches_blessed_snapshots() {
    let bless = std::env::var_os("STALEGUARD_BLESS").is_some();
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, case) in cases::all().iter().enumerate() {
        let (select, config) = settings(case);
        let config_path = scratch.path().join(format!("case{i}.toml"));
        std::fs::write(&config_path, config).unwrap();
        let run = Run::of(
            bin()
                .current_dir(repo_root())
                .args([
                    "--format", "human", "--color", "never", "--select", &select, "--config",
                ])
                .arg(&config_path)
                .arg(&case.rel),
        );
        let actual = normalize(&run.stdout);
        let path = snapshot_path(&case.rel);
        if bless {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{}: output differs\n--- expected\n{expected}--- actual\n{actual}",
                case.rel.display()
            )),
            Err(_) => failures.push(format!(
                "{}: no snapshot {}",
                case.rel.display(),
                path.display()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n\nrerun with STALEGUARD_BLESS=1 if the changes are intended",
        failures.join("\n\n")
    );
}

#[test]
fn normalize_replaces_only_the_time() {
    let out = normalize(
        "x (1.5s)\nstaleguard: 1 error, 0 warnings, 0 notes in 3 files (0.42s), 1 file skipped\n",
    );
    assert_eq!(
        out,
        "x (1.5s)\nstaleguard: 1 error, 0 warnings, 0 notes in 3 files (TIME), 1 file skipped\n"
    );
}
