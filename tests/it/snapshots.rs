//! Blessed human output for every fixture case: `fixtures/<rule>/<case>.rs` (or the folder
//! `<case>/`) is linted with `--format human --color never` and compared with
//! `fixtures/<rule>/<case>.stdout`. `STALEGUARD_BLESS=1` rewrites the snapshots.

use std::path::{Path, PathBuf};

use crate::support::{Run, bin, repo_root};

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
    let mut failures = Vec::new();
    for case in cases() {
        let run = Run::of(
            bin()
                .current_dir(repo_root())
                .args(["--format", "human", "--color", "never"])
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
