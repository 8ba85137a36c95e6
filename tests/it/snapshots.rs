//! Blessed human output for every fixture case: `fixtures/<rule>/<case>.rs` (or the folder
//! `<case>/`) is linted by the binary with `--format human --color never` and compared with
//! `fixtures/<rule>/<case>.stdout`. `STALEGUARD_BLESS=1` rewrites the snapshots.
//!
//! The run sees what the fixture harness sees: `--select` the folder's rule, `parse-error`,
//! `unused-suppression` and the case's `//@ also:` rules, and a `--config` file holding its
//! `//@ knowledge.<field>:` entries.

use std::path::{Path, PathBuf};

use staleguard_rules::registry;

use crate::support::{Run, bin, repo_root};

/// The `.rs` files of a case (the file itself, or every file under the folder).
fn case_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            case_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// Command-line arguments and configuration text reproducing the harness's settings.
fn settings(case: &Path) -> (String, String) {
    let rule = case
        .parent()
        .and_then(|p| p.file_name())
        .unwrap()
        .to_string_lossy()
        .to_string();
    let mut select = vec!["parse-error".to_string(), "unused-suppression".to_string()];
    if registry::find(&rule).is_some() {
        select.push(rule);
    }
    let mut knowledge = String::new();
    let mut files = Vec::new();
    case_files(&repo_root().join(case), &mut files);
    for file in files {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let Some((key, value)) = line
                .trim()
                .strip_prefix("//@")
                .and_then(|d| d.split_once(':'))
            else {
                continue;
            };
            let values: Vec<String> = value
                .split([',', ' '])
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
                .collect();
            match key.trim().strip_prefix("knowledge.") {
                Some(field) => {
                    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                    knowledge.push_str(&format!(
                        "{} = [{}]\n",
                        field.replace('_', "-"),
                        quoted.join(", ")
                    ));
                }
                None if key.trim() == "also" => select.extend(values),
                None => {}
            }
        }
    }
    (select.join(","), format!("[knowledge]\n{knowledge}"))
}

/// Every case under `fixtures/`: `.rs` files and folders, relative to the repository root.
fn cases() -> Vec<PathBuf> {
    let root = repo_root();
    let Ok(rules) = std::fs::read_dir(root.join("fixtures")) else {
        return Vec::new();
    };
    let mut cases = Vec::new();
    for rule in rules.flatten().filter(|e| e.path().is_dir()) {
        for case in std::fs::read_dir(rule.path()).unwrap().flatten() {
            let path = case.path();
            if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
                cases.push(path.strip_prefix(&root).unwrap().to_path_buf());
            }
        }
    }
    cases.sort();
    cases
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
    for (i, case) in cases().into_iter().enumerate() {
        let (select, config) = settings(&case);
        let config_path = scratch.path().join(format!("case{i}.toml"));
        std::fs::write(&config_path, config).unwrap();
        let run = Run::of(
            bin()
                .current_dir(repo_root())
                .args([
                    "--format", "human", "--color", "never", "--select", &select, "--config",
                ])
                .arg(&config_path)
                .arg(&case),
        );
        let actual = normalize(&run.stdout);
        let path = snapshot_path(&case);
        if bless {
            std::fs::write(&path, &actual).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{}: output differs\n--- expected\n{expected}--- actual\n{actual}",
                case.display()
            )),
            Err(_) => failures.push(format!(
                "{}: no snapshot {}",
                case.display(),
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
