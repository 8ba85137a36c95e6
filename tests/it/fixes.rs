//! Suggestions and `--fix`: every format carries a finding's fixes with their applicability
//! (machine-applicable / maybe-incorrect); `--fix` applies the machine-applicable ones, says
//! what it changed, and the re-lint finds the finding gone and the file still parsing.

use std::io::Cursor;

use cargo_metadata::Message;
use cargo_metadata::diagnostic::Applicability;
use serde_json::Value;

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{Project, lib_with};

/// A project with stale suppressions of each kind: a comment on its own line, one after code,
/// one naming a used and an unused rule, and one naming an unknown rule.
fn stale() -> Project {
    let p = Project::package("shop");
    let ship = CHECK_BEFORE_LOCK.replace(
        "    sqlx::query(\"UPDATE orders",
        "    // staleguard: allow(check-before-lock, rpc-in-transaction) -- re-checked by a trigger\n    sqlx::query(\"UPDATE orders",
    );
    p.write("src/lib.rs", &lib_with(&["ship", "util"]))
        .write("src/ship.rs", &ship)
        .write(
            "src/util.rs",
            "//! Helpers.\n\n// staleguard: allow(check-before-lock) -- left over\npub fn add(a: i32, b: i32) -> i32 {\n    a + b // staleguard: allow(rpc-in-transaction)\n}\n\n// staleguard: allow(chek-before-lock) -- a typo: a person decides\npub fn one() -> i32 {\n    1\n}\n",
        );
    p
}

fn unused(json: &Value) -> Vec<(String, u64, String)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["start"]["line"].as_u64().unwrap(),
                f["suggestions"][0]["applicability"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn fix_applies_the_machine_applicable_suggestions_and_relints() {
    let p = stale();
    let json = p.run(&["--format", "json"]).json();
    assert_eq!(
        unused(&json),
        [
            ("src/ship.rs".into(), 14, "machine-applicable".into()),
            ("src/util.rs".into(), 3, "machine-applicable".into()),
            ("src/util.rs".into(), 5, "machine-applicable".into()),
            ("src/util.rs".into(), 8, "maybe-incorrect".into()),
        ],
        "{json:#}"
    );
    let run = p.run(&["--fix", "--format", "json"]);
    run.code(0);
    assert!(
        run.stderr
            .contains("staleguard: 3 fix(es) applied in 2 file(s)"),
        "{}",
        run.stderr
    );
    // The re-lint: only the maybe-incorrect one is left, and nothing fails to parse.
    let left = run.json();
    assert_eq!(
        unused(&left),
        [("src/util.rs".into(), 7, "maybe-incorrect".into())],
        "{left:#}"
    );
    assert_eq!(left["summary"]["skipped"], 0);
    assert_eq!(
        p.read("src/util.rs"),
        "//! Helpers.\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n// staleguard: allow(chek-before-lock) -- a typo: a person decides\npub fn one() -> i32 {\n    1\n}\n"
    );
    // The used rule stays, the unused one is gone from the list.
    assert!(
        p.read("src/ship.rs")
            .contains("    // staleguard: allow(check-before-lock) -- re-checked by a trigger\n"),
        "{}",
        p.read("src/ship.rs")
    );
    // Nothing more to do.
    let again = p.run(&["--fix"]);
    assert!(
        again.stderr.contains("0 fix(es) applied"),
        "{}",
        again.stderr
    );
}

#[test]
fn every_format_carries_the_applicability() {
    let p = stale();
    let human = p.run(&["--color", "never"]);
    assert!(
        human
            .stdout
            .contains("= fix: remove the comment (machine-applicable: `--fix` applies it)"),
        "{}",
        human.stdout
    );
    assert!(
        human
            .stdout
            .contains("(maybe-incorrect: check it before applying)")
    );

    let rd = p.run(&["--format", "rdjsonl"]);
    let first: Value = serde_json::from_str(rd.stdout.lines().next().unwrap()).unwrap();
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("machine-applicable")
    );
    assert_eq!(first["suggestions"][0]["text"], "");
    assert!(
        first["suggestions"][0]["range"]["start"]["line"]
            .as_u64()
            .is_some()
    );

    let sarif = p.run(&["--format", "sarif"]).json();
    let fix = &sarif["runs"][0]["results"][0]["fixes"][0];
    assert_eq!(fix["properties"]["applicability"], "machine-applicable");
    assert_eq!(
        fix["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"],
        ""
    );
    crate::formats::assert_valid_sarif(&sarif);

    let cargo = p.run(&["--message-format=json"]);
    let mut seen = Vec::new();
    for m in Message::parse_stream(Cursor::new(cargo.stdout.as_bytes())) {
        if let Message::CompilerMessage(m) = m.unwrap() {
            for child in &m.message.children {
                for s in &child.spans {
                    seen.push((
                        s.suggested_replacement.clone(),
                        s.suggestion_applicability.clone(),
                    ));
                }
            }
        }
    }
    assert!(seen.contains(&(Some(String::new()), Some(Applicability::MachineApplicable))));
    assert!(seen.contains(&(Some(String::new()), Some(Applicability::MaybeIncorrect))));
}

/// A plain `SELECT` read inside the transaction, tested, then the row updated.
const READ_THEN_UPDATE: &str = r#"//! Payments.

pub async fn pay(db: &sqlx::PgPool, id: i64) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    if status != "pending" {
        return Ok(());
    }
    sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
"#;

#[test]
fn a_plain_select_in_the_transaction_gains_for_update() {
    let p = Project::package("shop");
    p.write("src/lib.rs", READ_THEN_UPDATE);
    let json = p.run(&["--format", "json"]).json();
    let f = &json["findings"][0];
    assert_eq!(f["rule"], "check-before-lock", "{json:#}");
    assert_eq!(f["suggestions"][0]["applicability"], "machine-applicable");
    let run = p.run(&["--fix", "--format", "json"]);
    run.code(0);
    assert!(
        run.stderr.contains("1 fix(es) applied in 1 file(s)"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.json()["findings"].as_array().unwrap().len(),
        0,
        "{}",
        run.stdout
    );
    assert_eq!(
        p.read("src/lib.rs"),
        READ_THEN_UPDATE.replace(
            "WHERE id = $1\")\n        .bind(id)\n        .fetch_one",
            "WHERE id = $1 FOR UPDATE\")\n        .bind(id)\n        .fetch_one"
        )
    );

    // SQLite has no `FOR UPDATE`: there the fix is for a person to judge.
    let sqlite = Project::package("shop");
    sqlite.write(
        "src/lib.rs",
        &READ_THEN_UPDATE.replace("sqlx::PgPool", "sqlx::SqlitePool"),
    );
    let json = sqlite.run(&["--format", "json"]).json();
    assert_eq!(
        json["findings"][0]["suggestions"][0]["applicability"], "maybe-incorrect",
        "{json:#}"
    );
    let run = sqlite.run(&["--fix"]);
    run.code(1);
    assert!(!sqlite.read("src/lib.rs").contains("FOR UPDATE"));
}
