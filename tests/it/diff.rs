//! `--diff-base REV`: only findings on lines added or changed since REV (committed, staged,
//! unstaged or untracked), with every file still analysed; combined with `--baseline`; clear
//! errors (exit 2) outside git and for an unknown revision.

use serde_json::Value;

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{Project, Run, bin, lib_with};

fn functions(json: &Value) -> Vec<String> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn hazard(name: &str) -> String {
    CHECK_BEFORE_LOCK
        .replace("ship_order", name)
        .replace("//! Shipping.\n\nuse sqlx::PgPool;\n", "")
        .replace("db: &PgPool", "db: &sqlx::PgPool")
}

#[test]
fn only_findings_on_changed_lines_are_reported() {
    let p = Project::package("shop");
    p.write("src/lib.rs", &lib_with(&["ship", "refund"]))
        .write(
            "src/ship.rs",
            &format!("//! Shipping.\n{}", hazard("ship_order")),
        )
        .write("src/refund.rs", "//! Refunds.\n");
    p.git_init();
    let base = p.git(&["rev-parse", "HEAD"]);
    let base = base.trim();

    // A commit adds a second hazard; the old one stays.
    p.write(
        "src/ship.rs",
        &format!(
            "//! Shipping.\n{}\n{}",
            hazard("ship_order"),
            hazard("ship_gift")
        ),
    );
    p.commit_all("gift shipping");
    let all = p.run(&["--format", "json"]).json();
    assert_eq!(functions(&all).len(), 2);
    let run = p.run(&["--format", "json", "--diff-base", base]);
    run.code(1);
    let json = run.json();
    assert_eq!(functions(&json), ["ship_gift"], "{json:#}");
    assert_eq!(json["summary"]["outside_diff"], 1);

    // Uncommitted and untracked changes count too.
    p.write(
        "src/refund.rs",
        &format!("//! Refunds.\n{}", hazard("refund_order")),
    );
    p.write("src/lib.rs", &lib_with(&["ship", "refund", "returns"]))
        .write(
            "src/returns.rs",
            &format!("//! Returns.\n{}", hazard("take_back")),
        );
    let json = p.run(&["--format", "json", "--diff-base", "HEAD"]).json();
    let mut got = functions(&json);
    got.sort();
    assert_eq!(got, ["refund_order", "take_back"], "{json:#}");

    // Combined with a baseline: both filters apply.
    p.run(&["--write-baseline", "baseline.json"]).code(0);
    let run = p.run(&[
        "--format",
        "json",
        "--diff-base",
        base,
        "--baseline",
        "baseline.json",
    ]);
    run.code(0);
    assert!(functions(&run.json()).is_empty());

    // A line that only moved is no change: a blank line above the old hazard shifts it.
    p.commit_all("more");
    p.write(
        "src/ship.rs",
        &format!(
            "//! Shipping.\n\n{}\n{}",
            hazard("ship_order"),
            hazard("ship_gift")
        ),
    );
    let run = p.run(&["--format", "json", "--diff-base", "HEAD"]);
    run.code(0);
    assert!(functions(&run.json()).is_empty());
}

#[test]
fn diff_base_errors_are_clear() {
    let p = Project::package("shop");
    p.write("src/lib.rs", "//! Shop.\n");
    let run = p.run(&["--diff-base", "main"]);
    run.code(2);
    assert!(
        run.stderr
            .contains("error: `--diff-base` needs a git repository"),
        "{}",
        run.stderr
    );
    p.git_init();
    let run = Run::of(
        bin()
            .current_dir(p.root())
            .args(["--diff-base", "no-such-branch"]),
    );
    run.code(2);
    assert!(
        run.stderr
            .contains("error: unknown revision `no-such-branch` for `--diff-base`"),
        "{}",
        run.stderr
    );
    p.run(&["--diff-base", "main"]).code(0);
}
