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

/// After `--fix`: the re-lint read every file (none failed to parse).
#[track_caller]
fn all_files_parse(json: &Value) {
    assert_eq!(json["summary"]["skipped"], 0, "{json:#}");
    assert!(
        findings(json).iter().all(|f| f.0 != "parse-error"),
        "{json:#}"
    );
}

/// A one-time token read with `GET`, the effect, then deleted with `DEL` as a statement: in
/// the method form with a presence test, with a `let .. else` and a turbofish, as raw
/// commands, and with the `DEL` only on the success path (a fix for a person to check).
const GET_THEN_DEL: &str = r#"//! Tokens.

use redis::AsyncCommands;

pub async fn confirm(con: &mut redis::aio::MultiplexedConnection, http: &reqwest::Client, token: &str) -> anyhow::Result<bool> {
    let key = format!("transfer-confirm:{token}");
    let pending: Option<String> = con.get(&key).await?;
    if pending.is_none() {
        return Ok(false);
    }
    http.post("https://bank.example/transfers").json(&token).send().await?;
    let _: () = con.del(&key).await?;
    Ok(true)
}

pub async fn redeem(con: &mut redis::aio::MultiplexedConnection, http: &reqwest::Client, voucher: &str) -> anyhow::Result<()> {
    let Some(amount) = con.get::<_, Option<i64>>(format!("voucher:{voucher}")).await? else {
        anyhow::bail!("voucher already used");
    };
    http.post("https://wallet.example/credit").json(&amount).send().await?;
    con.del::<_, ()>(format!("voucher:{voucher}")).await?;
    Ok(())
}

pub async fn payout(con: &mut redis::aio::MultiplexedConnection, http: &reqwest::Client, nonce: &str) -> anyhow::Result<()> {
    let seen: Option<String> = redis::cmd("GET").arg(format!("payout-nonce:{nonce}")).query_async(con).await?;
    if seen.is_none() {
        anyhow::bail!("unknown nonce");
    }
    http.post("https://bank.example/payouts").json(&nonce).send().await?;
    let _: () = redis::cmd("DEL").arg(format!("payout-nonce:{nonce}")).query_async(con).await?;
    Ok(())
}

pub async fn invite(con: &mut redis::aio::MultiplexedConnection, http: &reqwest::Client, invite: &str) -> anyhow::Result<bool> {
    let key = format!("invite-token:{invite}");
    let found: Option<String> = con.get(&key).await?;
    if found.is_none() {
        return Ok(false);
    }
    let sent = http.post("https://mail.example/send").json(&invite).send().await;
    if sent.is_ok() {
        let _: () = con.del(&key).await?;
    }
    Ok(sent.is_ok())
}
"#;

#[test]
fn a_get_then_del_of_a_token_becomes_getdel() {
    let p = Project::package("shop");
    p.write("src/lib.rs", GET_THEN_DEL);
    let separate = "token checked and deleted in separate steps around the effect";
    let before = findings(&p.run(&["--format", "json"]).json());
    let fix = |line: u64, applicability: &str| {
        (
            "token-deleted-before-effect".to_string(),
            line,
            separate.to_string(),
            applicability.to_string(),
        )
    };
    assert_eq!(
        before,
        [
            fix(12, "machine-applicable"),
            fix(21, "machine-applicable"),
            fix(31, "machine-applicable"),
            fix(43, "maybe-incorrect"),
        ]
    );

    let run = p.run(&["--fix", "--format", "json"]);
    assert!(
        run.stderr.contains("3 fix(es) applied in 1 file(s)"),
        "{}",
        run.stderr
    );
    let expected = GET_THEN_DEL
        .replace(
            "con.get(&key).await?;\n    if pending",
            "con.get_del(&key).await?;\n    if pending",
        )
        .replace("    let _: () = con.del(&key).await?;\n    Ok(true)", "    Ok(true)")
        .replace("con.get::<_, Option<i64>>", "con.get_del::<_, Option<i64>>")
        .replace(
            "    con.del::<_, ()>(format!(\"voucher:{voucher}\")).await?;\n",
            "",
        )
        .replace("redis::cmd(\"GET\")", "redis::cmd(\"GETDEL\")")
        .replace(
            "    let _: () = redis::cmd(\"DEL\").arg(format!(\"payout-nonce:{nonce}\")).query_async(con).await?;\n",
            "",
        );
    assert_eq!(p.read("src/lib.rs"), expected);
    // The re-lint: the three check-then-delete races are gone and the file parses; the
    // maybe-incorrect one is left as it was. What remains of the fixed ones is the trade-off
    // the fix's message names: the token is now consumed before the effect, so a failed
    // effect cannot be retried with it.
    let after = run.json();
    all_files_parse(&after);
    let left = findings(&after);
    assert_eq!(
        left.iter()
            .filter(|f| f.2 == separate)
            .map(|f| (f.1, f.3.as_str()))
            .collect::<Vec<_>>(),
        [(40, "maybe-incorrect")],
        "{after:#}"
    );
    assert_eq!(
        left.iter()
            .filter(|f| f.2 != separate)
            .map(|f| (f.1, f.2.as_str()))
            .collect::<Vec<_>>(),
        [
            (7, "token deleted before the effect it guards"),
            (16, "token deleted before the effect it guards"),
            (24, "token deleted before the effect it guards"),
        ],
        "{after:#}"
    );
}

/// Redis claims whose expiry a second command sets: `set_nx` then `expire`, `cmd("SETNX")`
/// then `cmd("EXPIRE")`, `SET .. NX` then `pexpire` (with the claim's argument list spread
/// over lines, ending in a comma), and an `expire` made before the claim's answer is looked
/// at (a fix for a person to check).
const CLAIM_THEN_EXPIRE: &str = r#"//! Claims.

use redis::AsyncCommands;

pub async fn digest(con: &mut redis::aio::MultiplexedConnection, id: i64) -> redis::RedisResult<bool> {
    let key = format!("digest:{id}");
    let fresh: bool = con.set_nx(&key, "sending").await?;
    if !fresh {
        return Ok(false);
    }
    let _: () = con.expire(&key, 172_800).await?;
    Ok(true)
}

pub async fn export(con: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
    let got: bool = redis::cmd("SETNX").arg("lock:export").arg(1).query_async(con).await?;
    if !got {
        return Ok(());
    }
    let _: () = redis::cmd("EXPIRE").arg("lock:export").arg(60).query_async(con).await?;
    Ok(())
}

pub async fn report(con: &mut redis::aio::MultiplexedConnection, me: &str) -> redis::RedisResult<()> {
    let got: bool = con
        .set_nx(
            "lock:report",
            me,
        )
        .await?;
    if !got {
        return Ok(());
    }
    con.pexpire::<_, ()>("lock:report", 30_000).await?;
    Ok(())
}

pub async fn refresh(con: &mut redis::aio::MultiplexedConnection, id: i64) -> redis::RedisResult<bool> {
    let key = format!("refresh:{id}");
    let fresh: bool = con.set_nx(&key, 1).await?;
    let _: () = con.expire(&key, 300).await?;
    Ok(fresh)
}
"#;

#[test]
fn a_setnx_then_expire_becomes_one_set_nx_with_the_expiry() {
    let p = Project::package("shop");
    p.write("src/lib.rs", CLAIM_THEN_EXPIRE);
    let rule = "processing-without-lease";
    let claims = |json: &Value| -> Vec<(u64, String)> {
        findings(json)
            .into_iter()
            .filter(|f| f.0 == rule)
            .map(|f| (f.1, f.3))
            .collect()
    };
    let before = p.run(&["--format", "json"]).json();
    assert_eq!(
        claims(&before),
        [
            (7, "machine-applicable".to_string()),
            (16, "machine-applicable".to_string()),
            (25, "machine-applicable".to_string()),
            (40, "maybe-incorrect".to_string()),
        ],
        "{before:#}"
    );
    assert!(
        findings(&before)[0]
            .2
            .contains("is claimed with no expiry, and a second command sets one")
    );

    let run = p.run(&["--fix", "--format", "json"]);
    assert!(
        run.stderr.contains("3 fix(es) applied in 1 file(s)"),
        "{}",
        run.stderr
    );
    let expected = CLAIM_THEN_EXPIRE
        .replace(
            "con.set_nx(&key, \"sending\")",
            "con.set_options(&key, \"sending\", redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::EX(172_800)))",
        )
        .replace("    let _: () = con.expire(&key, 172_800).await?;\n", "")
        .replace(
            "redis::cmd(\"SETNX\").arg(\"lock:export\").arg(1)",
            "redis::cmd(\"SET\").arg(\"lock:export\").arg(1).arg(\"NX\").arg(\"EX\").arg(60)",
        )
        .replace(
            "    let _: () = redis::cmd(\"EXPIRE\").arg(\"lock:export\").arg(60).query_async(con).await?;\n",
            "",
        )
        .replace(
            "        .set_nx(\n            \"lock:report\",\n            me,\n        )",
            "        .set_options(\n            \"lock:report\",\n            me,\n        redis::SetOptions::default().conditional_set(redis::ExistenceCheck::NX).with_expiration(redis::SetExpiry::PX(30_000)), )",
        )
        .replace(
            "    con.pexpire::<_, ()>(\"lock:report\", 30_000).await?;\n",
            "",
        );
    assert_eq!(p.read("src/lib.rs"), expected);
    // The re-lint: the three two-step claims are gone, nothing else is reported in their
    // place, and the file parses; the maybe-incorrect one is left.
    let after = run.json();
    all_files_parse(&after);
    assert_eq!(
        findings(&after)
            .iter()
            .map(|f| (f.0.as_str(), f.1, f.3.as_str()))
            .collect::<Vec<_>>(),
        [(rule, 37, "maybe-incorrect")],
        "{after:#}"
    );
}

/// State writes by key alone where the function shows the state expected: a read tested with
/// `!=` (rows affected not checked), a `match` with one arm that goes on and an `OR` filter
/// before `RETURNING` in a raw literal (rows affected checked), an earlier write of the
/// function, and a Rust variant (a guess for a person to check).
const UPDATE_BY_KEY: &str = r##"//! States.

pub enum InvoiceStatus {
    Open,
    Paid,
}

pub async fn ship(db: &sqlx::PgPool, id: i64) -> sqlx::Result<()> {
    let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(id)
        .fetch_one(db)
        .await?;
    if status != "paid" {
        return Ok(());
    }
    sqlx::query("UPDATE orders SET status = 'shipped' WHERE id = $1")
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn approve(db: &sqlx::PgPool, id: i64) -> sqlx::Result<bool> {
    let refund: (String,) = sqlx::query_as("SELECT status FROM refunds WHERE id = $1")
        .bind(id)
        .fetch_one(db)
        .await?;
    let status = refund.0;
    match status.as_str() {
        "requested" => {}
        _ => return Ok(false),
    }
    let done = sqlx::query(
        r#"UPDATE refunds
           SET status = 'approved'
           WHERE id = $1 OR legacy_id = $1
           RETURNING id"#,
    )
    .bind(id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn capture(db: &sqlx::PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE payments SET status = 'capturing' WHERE id = $1 AND status = 'authorized'")
        .bind(id)
        .execute(db)
        .await?;
    sqlx::query("UPDATE payments SET status = 'captured' WHERE id = $1")
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn pay(db: &sqlx::PgPool, id: i64) -> sqlx::Result<()> {
    let row: (InvoiceStatus,) = sqlx::query_as("SELECT status FROM invoices WHERE id = $1")
        .bind(id)
        .fetch_one(db)
        .await?;
    let status = row.0;
    if let InvoiceStatus::Open = status {
        sqlx::query("UPDATE invoices SET status = 'paid' WHERE id = $1")
            .bind(id)
            .execute(db)
            .await?;
    }
    Ok(())
}

pub async fn reopen(db: &sqlx::PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = $1 AND status = 'paid'")
        .bind(id)
        .execute(db)
        .await?;
    sqlx::query("UPDATE refunds SET status = 'rejected' WHERE id = $1 AND status = 'requested'")
        .bind(id)
        .execute(db)
        .await?;
    sqlx::query("UPDATE invoices SET status = 'void' WHERE id = $1 AND status = 'open'")
        .bind(id)
        .execute(db)
        .await?;
    Ok(())
}
"##;

#[test]
fn an_update_by_key_gains_the_state_the_function_expects() {
    let p = Project::package("shop");
    p.write("src/lib.rs", UPDATE_BY_KEY);
    let rule = "unguarded-state-transition";
    let before = p.run(&["--format", "json"]).json();
    assert_eq!(
        findings(&before)
            .iter()
            .map(|f| (f.0.as_str(), f.1, f.3.as_str()))
            .collect::<Vec<_>>(),
        [
            (rule, 16, "machine-applicable"),
            (rule, 33, "machine-applicable"),
            (rule, 50, "machine-applicable"),
            (rule, 64, "maybe-incorrect"),
        ],
        "{before:#}"
    );
    let fix_message = |i: usize| before["findings"][i]["suggestions"][0]["message"].clone();
    // The help says to check the rows affected where the write does not.
    assert_eq!(
        fix_message(0),
        "expect the state the function relies on: `.. AND status = 'paid'`, and check the rows affected (0 means the record moved on first), which this write does not do yet"
    );
    assert_eq!(
        fix_message(1),
        "expect the state the function relies on: `.. AND status = 'requested'`"
    );
    assert!(
        fix_message(3)
            .as_str()
            .unwrap()
            .contains("`.. AND status = 'open'`")
    );

    let run = p.run(&["--fix", "--format", "json"]);
    assert!(
        run.stderr.contains("3 fix(es) applied in 1 file(s)"),
        "{}",
        run.stderr
    );
    let expected = UPDATE_BY_KEY
        .replace(
            "SET status = 'shipped' WHERE id = $1\"",
            "SET status = 'shipped' WHERE id = $1 AND status = 'paid'\"",
        )
        .replace(
            "WHERE id = $1 OR legacy_id = $1\n",
            "WHERE (id = $1 OR legacy_id = $1) AND status = 'requested'\n",
        )
        .replace(
            "SET status = 'captured' WHERE id = $1\"",
            "SET status = 'captured' WHERE id = $1 AND status = 'capturing'\"",
        );
    assert_eq!(p.read("src/lib.rs"), expected);
    // The re-lint: the three writes are compare-and-sets now and nothing else is reported in
    // their place; the file parses; the guess is left.
    let after = run.json();
    all_files_parse(&after);
    assert_eq!(
        findings(&after)
            .iter()
            .map(|f| (f.0.as_str(), f.1, f.3.as_str()))
            .collect::<Vec<_>>(),
        [(rule, 64, "maybe-incorrect")],
        "{after:#}"
    );
}
