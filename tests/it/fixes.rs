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

    // A package on SQLite alone: its transactions are serializable, nothing to report.
    let sqlite_only = Project::package("shop");
    sqlite_only.write(
        "src/lib.rs",
        &READ_THEN_UPDATE.replace("sqlx::PgPool", "sqlx::SqlitePool"),
    );
    let json = sqlite_only.run(&["--format", "json"]).json();
    assert_eq!(json["findings"].as_array().unwrap().len(), 0, "{json:#}");

    // Beside PostgreSQL, a function whose own types name only SQLite (its pool) runs an
    // SQLite transaction: serializable, nothing to report.
    let sqlite_store = Project::package("shop");
    sqlite_store.write(
        "src/lib.rs",
        &format!(
            "{}\nuse sqlx::PgPool;\n\npub fn main_store(pool: &PgPool) -> &PgPool {{\n    pool\n}}\n",
            READ_THEN_UPDATE.replace("sqlx::PgPool", "sqlx::SqlitePool")
        ),
    );
    let json = sqlite_store.run(&["--format", "json"]).json();
    assert_eq!(json["findings"].as_array().unwrap().len(), 0, "{json:#}");

    // A function handed both an SQLite and a PostgreSQL pool is still reported, but its
    // transaction may be SQLite's, which has no `FOR UPDATE`: the fix is for a person to judge.
    let sqlite = Project::package("shop");
    sqlite.write(
        "src/lib.rs",
        &READ_THEN_UPDATE.replace(
            "db: &sqlx::PgPool, id: i64",
            "db: &sqlx::SqlitePool, audit: &sqlx::PgPool, id: i64",
        ),
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

/// The findings of a JSON report as (rule, line, message, applicability of the first
/// suggestion, or "" when there is none).
fn findings(json: &Value) -> Vec<(String, u64, String, String)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["start"]["line"].as_u64().unwrap(),
                f["message"].as_str().unwrap().to_string(),
                f["suggestions"][0]["applicability"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// (rule, line, applicability) of each finding.
fn rows(json: &Value) -> Vec<(String, u64, String)> {
    findings(json)
        .into_iter()
        .map(|(rule, line, _, fix)| (rule, line, fix))
        .collect()
}

fn owned(rows: &[(&str, u64, &str)]) -> Vec<(String, u64, String)> {
    rows.iter()
        .map(|(r, l, a)| (r.to_string(), *l, a.to_string()))
        .collect()
}

/// `text` with each `(from, to)` made, every `from` found exactly once (so a changed fixture
/// fails here, not silently).
#[track_caller]
fn replaced(text: &str, edits: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (from, to) in edits {
        assert_eq!(out.matches(from).count(), 1, "{from:?} in:\n{out}");
        out = out.replacen(from, to, 1);
    }
    out
}

/// Applies `--fix` to fixture `case` (under `fixtures/`) linted as a package's `src/lib.rs`:
/// the findings before are `before` (rule, line, applicability, "" for none), `applied`
/// fixes are reported, the file becomes the fixture's text with `edits` made, and the
/// re-lint reads every file (none fails to parse) and finds `after`. Returns the re-lint.
#[track_caller]
fn fix_fixture(
    case: &str,
    before: &[(&str, u64, &str)],
    applied: usize,
    edits: &[(&str, &str)],
    after: &[(&str, u64, &str)],
) -> Value {
    let text = std::fs::read_to_string(crate::support::repo_root().join("fixtures").join(case))
        .expect("the fixture exists");
    let p = Project::package("shop");
    p.write("src/lib.rs", &text);
    let json = p.run(&["--format", "json"]).json();
    assert_eq!(rows(&json), owned(before), "{json:#}");
    let run = p.run(&["--fix", "--format", "json"]);
    let said = format!("staleguard: {applied} fix(es) applied in 1 file(s)");
    assert!(run.stderr.contains(&said), "{}", run.stderr);
    assert_eq!(p.read("src/lib.rs"), replaced(&text, edits));
    let json = run.json();
    assert_eq!(json["summary"]["skipped"], 0, "{json:#}");
    assert_eq!(rows(&json), owned(after), "{json:#}");
    json
}

#[test]
fn a_get_then_del_of_a_token_becomes_getdel() {
    let rule = "token-deleted-before-effect";
    let after = fix_fixture(
        "token-deleted-before-effect/getdel_fix.rs",
        &[
            (rule, 19, "machine-applicable"),
            (rule, 30, "machine-applicable"),
            (rule, 41, "machine-applicable"),
            (rule, 56, "maybe-incorrect"),
            (rule, 70, ""),
        ],
        3,
        &[
            (
                "con.get(&key).await?;\n    if pending",
                "con.get_del(&key).await?;\n    if pending",
            ),
            (
                "    let _: () = con.del(&key).await?;\n    //~^ token-deleted-before-effect\n    Ok(true)",
                "    //~^ token-deleted-before-effect\n    Ok(true)",
            ),
            ("con.get::<_, Option<i64>>", "con.get_del::<_, Option<i64>>"),
            (
                "    con.del::<_, ()>(format!(\"voucher:{voucher}\")).await?; //~ token-deleted-before-effect\n",
                "",
            ),
            ("redis::cmd(\"GET\")", "redis::cmd(\"GETDEL\")"),
            (
                "    let _: () = redis::cmd(\"DEL\").arg(format!(\"payout-nonce:{nonce}\")).query_async(con).await?;\n",
                "",
            ),
        ],
        // The three check-then-delete races are gone; the maybe-incorrect one and the one
        // without a fix are left as they were. What the re-lint reports at each `GETDEL` is
        // the trade-off the fix's message names: the token is now consumed before the effect,
        // so a failed effect cannot be retried with it.
        &[
            (rule, 14, ""),
            (rule, 25, ""),
            (rule, 34, ""),
            (rule, 53, "maybe-incorrect"),
            (rule, 67, ""),
        ],
    );
    let messages: Vec<String> = findings(&after).into_iter().map(|f| f.2).collect();
    assert_eq!(
        messages,
        [
            "token deleted before the effect it guards",
            "token deleted before the effect it guards",
            "token deleted before the effect it guards",
            "token checked and deleted in separate steps around the effect",
            "token checked and deleted in separate steps around the effect",
        ]
    );
}

#[test]
fn a_setnx_then_expire_becomes_one_set_nx_with_the_expiry() {
    let rule = "processing-without-lease";
    let options = |expiry: &str| {
        format!(
            "redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::{expiry})"
        )
    };
    let digest = format!(
        "con.set_options(&key, \"sending\", {}).await?; //~",
        options("EX(172_800)")
    );
    let upload = format!(
        "        .set_options(\n            \"lock:upload\",\n            me,\n        {}, )",
        options("PX(30_000)")
    );
    fix_fixture(
        "processing-without-lease/redis_claim_then_expire.rs",
        &[
            (rule, 15, "machine-applicable"),
            (rule, 25, "machine-applicable"),
            (rule, 36, "machine-applicable"),
            (rule, 48, "machine-applicable"),
            (rule, 64, ""),
            (rule, 75, "maybe-incorrect"),
        ],
        4,
        &[
            ("con.set_nx(&key, \"sending\").await?; //~", &digest),
            ("    let _: () = con.expire(&key, 172_800).await?;\n", ""),
            (
                "redis::cmd(\"SETNX\").arg(\"lock:export\").arg(1)",
                "redis::cmd(\"SET\").arg(\"lock:export\").arg(1).arg(\"NX\").arg(\"EX\").arg(60)",
            ),
            (
                "    let _: () = redis::cmd(\"EXPIRE\").arg(\"lock:export\").arg(60).query_async(con).await?;\n",
                "",
            ),
            (
                ".arg(me).arg(\"NX\")",
                ".arg(me).arg(\"NX\").arg(\"PX\").arg(30_000)",
            ),
            (
                "    con.pexpire::<_, ()>(\"lock:report\", 30_000).await?;\n",
                "",
            ),
            (
                "        .set_nx(\n            \"lock:upload\",\n            me,\n        )",
                &upload,
            ),
            (
                "    con.pexpire::<_, ()>(\"lock:upload\", 30_000).await?;\n",
                "",
            ),
        ],
        // The four two-step claims are gone and nothing is reported in their place; the one
        // without a fix and the maybe-incorrect one are left.
        &[(rule, 60, ""), (rule, 71, "maybe-incorrect")],
    );
}

#[test]
fn an_update_by_key_gains_the_state_the_function_expects() {
    let rule = "unguarded-state-transition";
    let after = fix_fixture(
        "unguarded-state-transition/expected_state_fix.rs",
        &[
            (rule, 25, "machine-applicable"),
            (rule, 44, "machine-applicable"),
            (rule, 63, "machine-applicable"),
            (rule, 79, "maybe-incorrect"),
            (rule, 98, ""),
            (rule, 113, ""),
        ],
        3,
        &[
            (
                "\n    sqlx::query(\"UPDATE orders SET status = 'shipped' WHERE id = $1\"",
                "\n    sqlx::query(\"UPDATE orders SET status = 'shipped' WHERE id = $1 AND status = 'paid'\"",
            ),
            (
                "WHERE id = $1 OR legacy_id = $1\n",
                "WHERE (id = $1 OR legacy_id = $1) AND status = 'requested'\n",
            ),
            (
                "SET status = 'captured' WHERE id = $1\"",
                "SET status = 'captured' WHERE id = $1 AND status = 'capturing'\"",
            ),
        ],
        // The three writes are compare-and-sets now and nothing else is reported in their
        // place; the guess and the writes without a fix are left.
        &[
            (rule, 79, "maybe-incorrect"),
            (rule, 98, ""),
            (rule, 113, ""),
        ],
    );
    assert!(
        after["findings"][0]["suggestions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("`.. AND status = 'open'`")
    );
}

#[test]
fn the_state_fix_says_to_check_the_rows_affected_where_the_write_does_not() {
    let text = std::fs::read_to_string(
        crate::support::repo_root()
            .join("fixtures/unguarded-state-transition/expected_state_fix.rs"),
    )
    .unwrap();
    let p = Project::package("shop");
    p.write("src/lib.rs", &text);
    let json = p.run(&["--format", "json"]).json();
    let message = |i: usize| json["findings"][i]["suggestions"][0]["message"].clone();
    // `ship` drops the write's result; `approve_refund` tests its rows affected.
    assert_eq!(
        message(0),
        "expect the state the function relies on: `.. AND status = 'paid'`, and check the rows affected (0 means the record moved on first), which this write does not do yet"
    );
    assert_eq!(
        message(1),
        "expect the state the function relies on: `.. AND status = 'requested'`"
    );
}
