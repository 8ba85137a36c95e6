//! End-to-end tests that need real rule findings: exit code 1, levels from configuration and
//! the command line, project knowledge, suppression, baselines, and a finding across two
//! member crates of a workspace discovered through `cargo metadata`.
//!
//! Assertions name the rule, file and function, never the exact wording of a message.

use serde_json::Value;

use crate::schema;
use crate::support::{CLEAN, Project, Run, bin};

/// A workspace with one check-before-lock hazard in `src/ship.rs`.
fn hazard() -> Project {
    let p = Project::package("shop");
    p.write("src/lib.rs", "//! Shop.\n\npub mod ship;\n")
        .write("src/ship.rs", CHECK_BEFORE_LOCK);
    p
}

fn findings(json: &Value) -> Vec<&Value> {
    json["findings"]
        .as_array()
        .expect("findings array")
        .iter()
        .collect()
}

fn rules(json: &Value) -> Vec<&str> {
    findings(json)
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect()
}

#[test]
fn check_before_lock_is_found_and_fails_the_run() {
    let p = hazard();
    let run = p.run(&["--format", "json"]);
    run.code(1);
    let json = run.json();
    assert!(schema::validate(&schema::documented(), &json).is_empty());
    let found: Vec<_> = findings(&json)
        .into_iter()
        .filter(|f| f["rule"] == "check-before-lock")
        .collect();
    assert_eq!(found.len(), 1, "{json:#}");
    let f = found[0];
    assert_eq!(f["file"], "src/ship.rs");
    assert_eq!(f["level"], "error");
    let line = f["start"]["line"].as_u64().unwrap();
    assert!(
        fn_lines(CHECK_BEFORE_LOCK, "ship_order").contains(&line),
        "line {line}"
    );
    assert!(
        f["function"]
            .as_str()
            .unwrap_or_default()
            .contains("ship_order"),
        "{f:#}"
    );

    let human = p.run(&["--color", "never"]);
    human.code(1);
    assert!(
        human.stdout.contains("error[check-before-lock]"),
        "{}",
        human.stdout
    );
    assert!(
        human.stdout.contains("--> src/ship.rs:") || human.stdout.contains("┌─ src/ship.rs:"),
        "{}",
        human.stdout
    );
    assert!(
        human
            .stdout
            .contains("staleguard explain check-before-lock")
    );
    assert!(
        human
            .stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("staleguard: 1 error, "),
        "{}",
        human.stdout
    );

    let sarif = p.run(&["--format", "sarif"]).json();
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "check-before-lock");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "src/ship.rs"
    );
    assert_eq!(
        result["partialFingerprints"]["staleguard/v1"],
        f["fingerprint"]
    );
}

#[test]
fn levels_come_from_config_then_the_command_line() {
    let p = hazard();
    p.write("staleguard.toml", "[rules]\ncheck-before-lock = \"warn\"\n");
    let run = p.run(&["--format", "json"]);
    run.code(0);
    let json = run.json();
    assert_eq!(findings(&json)[0]["level"], "warning");
    assert_eq!(json["summary"]["warnings"], 1);

    p.write(
        "staleguard.toml",
        "[rules]\ncheck-before-lock = \"allow\"\n",
    );
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert!(!rules(&run.json()).contains(&"check-before-lock"));

    p.write("staleguard.toml", "");
    p.run(&["--ignore", "check-before-lock"]).code(0);
    p.run(&["--select", "rpc-in-transaction"]).code(0);
    p.run(&["--select", "check-before-lock"]).code(1);
    p.run(&["--exit-zero"]).code(0);
}

#[test]
fn package_metadata_overrides_the_workspace_level() {
    let p = hazard();
    p.write(
        "Cargo.toml",
        "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[package.metadata.staleguard.rules]\ncheck-before-lock = \"warn\"\n\n[workspace]\n\n[workspace.metadata.staleguard.rules]\ncheck-before-lock = \"deny\"\n",
    );
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert_eq!(findings(&run.json())[0]["level"], "warning");
}

#[test]
fn suppression_comments_hide_findings_and_unused_ones_are_reported() {
    let p = hazard();
    let suppressed = CHECK_BEFORE_LOCK.replace(
        "pub async fn ship_order",
        "// staleguard: allow(check-before-lock) -- shipping re-checks the status in a trigger\npub async fn ship_order",
    );
    p.write("src/ship.rs", &suppressed);
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert!(rules(&run.json()).is_empty(), "{}", run.stdout);

    p.write("src/ship.rs", CHECK_BEFORE_LOCK);
    p.write(
        "src/lib.rs",
        "//! Shop.\n\npub mod ship;\n\n// staleguard: allow(rpc-in-transaction) -- nothing here makes a call\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    );
    let run = p.run(&["--format", "json"]);
    run.code(1);
    let json = run.json();
    let unused: Vec<_> = findings(&json)
        .into_iter()
        .filter(|f| f["rule"] == "unused-suppression")
        .collect();
    assert_eq!(unused.len(), 1, "{json:#}");
    assert_eq!(unused[0]["file"], "src/lib.rs");
    assert_eq!(unused[0]["start"]["line"], 5);
}

#[test]
fn baseline_round_trip_survives_unrelated_edits() {
    let p = hazard();
    let write = p.run(&["--write-baseline", "baseline.json"]);
    write.code(0);
    let recorded: Value = serde_json::from_str(&p.read("baseline.json")).unwrap();
    assert_eq!(recorded["version"], 1);
    assert_eq!(recorded["findings"].as_array().unwrap().len(), 1);
    assert_eq!(recorded["findings"][0]["rule"], "check-before-lock");

    let run = p.run(&["--baseline", "baseline.json", "--format", "json"]);
    run.code(0);
    assert!(rules(&run.json()).is_empty());
    assert_eq!(run.json()["summary"]["baselined"], 1);

    // Lines added above the finding move it; the baseline still matches.
    let moved = CHECK_BEFORE_LOCK.replace(
        "use sqlx::PgPool;\n",
        "use sqlx::PgPool;\n\n/// Unrelated.\npub const LIMIT: usize = 3;\n\npub fn unrelated() -> usize {\n    LIMIT * 2\n}\n",
    );
    p.write("src/ship.rs", &moved);
    p.run(&["--baseline", "baseline.json"]).code(0);

    // A new hazard (same shape, another function) is reported.
    let second = CHECK_BEFORE_LOCK
        .replace("ship_order", "deliver_order")
        .replace("//! Shipping.\n", "");
    p.write("src/ship.rs", &format!("{moved}\n{}", second.trim_start()));
    let run = p.run(&["--baseline", "baseline.json", "--format", "json"]);
    run.code(1);
    let json = run.json();
    let left = findings(&json);
    assert_eq!(left.len(), 1, "{json:#}");
    assert!(
        left[0]["function"]
            .as_str()
            .unwrap_or_default()
            .contains("deliver_order")
    );
}

#[test]
fn knowledge_from_config_names_remote_calls() {
    let p = Project::package("billing");
    let source = r#"//! Billing.

use sqlx::PgPool;

pub struct PaymentGateway;

impl PaymentGateway {
    pub async fn charge(&self, cents: i64) -> Result<(), String> {
        let _ = cents;
        Ok(())
    }
}

pub async fn settle(db: &PgPool, gateway: &PaymentGateway, id: i64) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE invoices SET status = 'settling' WHERE id = $1 AND status = 'open'")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    gateway.charge(100).await.ok();
    tx.commit().await?;
    Ok(())
}
"#;
    p.write("src/lib.rs", source);
    let without = p.run(&["--format", "json"]).json();
    assert!(
        !rules(&without).contains(&"rpc-in-transaction"),
        "{without:#}"
    );
    p.write(
        "staleguard.toml",
        "[knowledge]\nremote-calls = [\"PaymentGateway::charge\"]\n",
    );
    let with = p.run(&["--format", "json"]);
    with.code(1);
    let json = with.json();
    let found: Vec<_> = findings(&json)
        .into_iter()
        .filter(|f| f["rule"] == "rpc-in-transaction")
        .collect();
    assert_eq!(found.len(), 1, "{json:#}");
    assert!(fn_lines(source, "settle").contains(&found[0]["start"]["line"].as_u64().unwrap()));
}

#[test]
fn two_member_workspace_finds_a_hazard_across_crates() {
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/store\", \"crates/api\"]\nresolver = \"2\"\n",
    );
    p.write(
        "crates/store/Cargo.toml",
        "[package]\nname = \"store\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nsqlx = { version = \"0.8\", features = [\"postgres\"] }\n",
    );
    p.write("crates/store/src/lib.rs", LOAD_STATUS_LIB);
    p.write(
        "crates/api/Cargo.toml",
        "[package]\nname = \"api\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nstore = { path = \"../store\" }\nsqlx = { version = \"0.8\", features = [\"postgres\"] }\n",
    );
    let api = format!("{HANDLERS}{}", shipper("ship", "store"));
    let api = api.as_str();
    p.write("crates/api/src/lib.rs", api);
    p.write("crates/api/tests/smoke.rs", CLEAN);
    let run = p.run(&["--format", "json"]);
    run.code(1);
    let json = run.json();
    assert_eq!(
        json["summary"]["files"], 3,
        "both members, tests included: {json:#}"
    );
    let found: Vec<_> = findings(&json)
        .into_iter()
        .filter(|f| f["rule"] == "check-before-lock")
        .collect();
    assert_eq!(found.len(), 1, "{json:#}");
    assert_eq!(found[0]["file"], "crates/api/src/lib.rs");
    assert!(fn_lines(api, "ship").contains(&found[0]["start"]["line"].as_u64().unwrap()));

    // From a member's directory only that package is read, as cargo does: the facts of store
    // are not there, and `--workspace` brings them back.
    let in_api = |args: &[&str]| {
        Run::of(
            bin()
                .current_dir(p.path("crates/api"))
                .args(["--format", "json"])
                .args(args),
        )
    };
    let api_only = in_api(&[]);
    api_only.code(0);
    assert_eq!(api_only.json()["summary"]["files"], 2, "api's files only");
    let whole = in_api(&["--workspace"]);
    whole.code(1);
    assert_eq!(rules(&whole.json()), ["check-before-lock"]);
}

#[test]
fn a_path_through_a_package_resolves_by_its_crate_name_not_its_directory() {
    // Two members define `load_status`, in directories named unlike their packages: only the
    // crate names in the paths say which one a call runs.
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"crates/storage\", \"crates/memo\", \"crates/api\"]\nresolver = \"2\"\n",
    );
    let sqlx_dep = "sqlx = { version = \"0.8\", features = [\"postgres\"] }\n";
    p.write(
        "crates/storage/Cargo.toml",
        &format!("[package]\nname = \"order-store\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{sqlx_dep}"),
    );
    p.write("crates/storage/src/lib.rs", LOAD_STATUS_LIB);
    p.write(
        "crates/memo/Cargo.toml",
        &format!("[package]\nname = \"order-memo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{sqlx_dep}"),
    );
    p.write(
        "crates/memo/src/lib.rs",
        r#"//! What the caller last asked for, kept in the request.

use sqlx::PgPool;

/// The status the request carries; reads nothing.
pub async fn load_status(_db: &PgPool, order_id: i64) -> Result<String, sqlx::Error> {
    Ok(if order_id % 2 == 0 { "paid".into() } else { "open".into() })
}
"#,
    );
    p.write(
        "crates/api/Cargo.toml",
        &format!("[package]\nname = \"api\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\norder-store = {{ path = \"../storage\" }}\norder-memo = {{ path = \"../memo\" }}\n{sqlx_dep}"),
    );
    let api = format!(
        "{HANDLERS}{}\n{}",
        shipper("ship", "order_store"),
        shipper("ship_by_request", "order_memo")
    );
    let api = api.as_str();
    p.write("crates/api/src/lib.rs", api);
    let run = p.run(&["--format", "json", "--select", "check-before-lock"]);
    run.code(1);
    let json = run.json();
    let found = findings(&json);
    assert_eq!(found.len(), 1, "{json:#}");
    assert_eq!(found[0]["file"], "crates/api/src/lib.rs");
    assert!(fn_lines(api, "ship").contains(&found[0]["start"]["line"].as_u64().unwrap()));
}

/// A package's library that reads an order's status from the database.
const LOAD_STATUS_LIB: &str = r#"//! Order storage.

use sqlx::PgPool;

/// Reads an order's status.
pub async fn load_status(db: &PgPool, order_id: i64) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(order_id)
        .fetch_one(db)
        .await
}
"#;

/// The head of a handlers file.
const HANDLERS: &str = "//! Handlers.\n\nuse sqlx::PgPool;\n\n";

/// A handler `name` that tests the status `krate::load_status` gives, then ships the order in a
/// transaction by its id alone.
fn shipper(name: &str, krate: &str) -> String {
    format!(
        r#"pub async fn {name}(db: &PgPool, order_id: i64) -> Result<(), sqlx::Error> {{
    let status = {krate}::load_status(db, order_id).await?;
    if status != "paid" {{
        return Ok(());
    }}
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE orders SET status = 'shipped' WHERE id = $1")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}}
"#
    )
}

/// A check-before-lock hazard: order status read and tested on the pool, then a transaction
/// begins and the UPDATE filters on the id only, with no re-read.
pub const CHECK_BEFORE_LOCK: &str = r#"//! Shipping.

use sqlx::PgPool;

pub async fn ship_order(db: &PgPool, order_id: i64) -> Result<(), sqlx::Error> {
    let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE id = $1")
        .bind(order_id)
        .fetch_one(db)
        .await?;
    if status != "paid" {
        return Ok(());
    }
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE orders SET shipped_at = now() WHERE id = $1")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
"#;

/// The 1-based line range of `fn name` in `text` (from its line to the closing `}` at column 1).
pub fn fn_lines(text: &str, name: &str) -> std::ops::RangeInclusive<u64> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains(&format!("fn {name}(")))
        .expect("function present");
    let end = (start..lines.len())
        .find(|i| lines[*i] == "}")
        .expect("function closes");
    (start as u64 + 1)..=(end as u64 + 1)
}

#[test]
fn a_workspace_cargo_cannot_read_is_still_linted_with_a_warning() {
    // A `cargo-features` entry this cargo does not know (as a stable cargo meets a nightly-only
    // one): `cargo metadata` fails, but the sources are there and nothing needs building.
    let p = hazard();
    p.write(
        "Cargo.toml",
        "cargo-features = [\"staleguard-test-unknown\"]\n\n[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\nmembers = [\"tools\"]\n",
    )
    .write("tools/Cargo.toml", "[package]\nname = \"tools\"\nversion = \"0.1.0\"\nedition = \"2021\"\n")
    .write("tools/src/lib.rs", CLEAN)
    .write("target/debug/build/out.rs", "fn broken( {\n");
    let run = p.run(&["--format", "json"]);
    run.code(1);
    assert!(
        run.stderr
            .contains("warning: cannot read the Cargo workspace")
            && run.stderr.contains("staleguard-test-unknown"),
        "{}",
        run.stderr
    );
    let json = run.json();
    assert_eq!(rules(&json), ["check-before-lock"], "{json:#}");
    assert_eq!(findings(&json)[0]["file"], "src/ship.rs");
    // The member's files are linted too, and `target/` is not.
    assert_eq!(json["summary"]["files"], 3, "{json:#}");

    // With `--manifest-path` the fallback is that manifest's directory.
    let elsewhere = Project::empty();
    let manifest = p.path("Cargo.toml");
    let run = elsewhere.run(&[
        "--manifest-path",
        manifest.to_str().unwrap(),
        "--format",
        "short",
    ]);
    run.code(1);
    assert!(run.stdout.contains("src/ship.rs:"), "{}", run.stdout);

    // Run from the member's directory, the fallback is the workspace's root.
    let run = Run::of(
        bin()
            .current_dir(p.path("tools"))
            .args(["--format", "json"]),
    );
    assert_eq!(run.json()["summary"]["files"], 3, "{}", run.stdout);

    // Packages cannot be told apart without cargo: `-p` is an error that says why.
    let run = p.run(&["-p", "tools"]);
    run.code(2);
    assert!(
        run.stderr.contains("cannot read the Cargo workspace"),
        "{}",
        run.stderr
    );

    // A directory with no manifest at all is still an error.
    let none = Project::empty();
    none.write("notes.txt", "not a crate\n");
    none.run(&[]).code(2);
}

/// A lookup then an insert of the same key, with no lock.
const CHECK_THEN_INSERT: &str = r#"//! Follows.

pub async fn follow(db: &sqlx::PgPool, a: i64, b: i64) -> sqlx::Result<bool> {
    let found: Option<i64> = sqlx::query_scalar("SELECT id FROM follows WHERE follower = $1 AND followee = $2")
        .bind(a)
        .bind(b)
        .fetch_optional(db)
        .await?;
    if found.is_some() {
        return Ok(false);
    }
    sqlx::query("INSERT INTO follows (follower, followee) VALUES ($1, $2)")
        .bind(a)
        .bind(b)
        .execute(db)
        .await?;
    Ok(true)
}
"#;

#[test]
fn schema_files_decide_whether_a_check_then_insert_can_duplicate() {
    let p = Project::package("social");
    p.write("src/lib.rs", CHECK_THEN_INSERT).write(
        "migrations/0001_init.sql",
        "CREATE TABLE follows (id BIGSERIAL PRIMARY KEY, follower BIGINT, followee BIGINT);\n",
    );
    let json = p.run(&["--format", "json"]).json();
    assert_eq!(rules(&json), ["check-before-lock"], "{json:#}");
    assert_eq!(
        json["summary"]["files"], 1,
        "schema files are read, not counted as linted"
    );

    // A later migration adds the unique key: the second insert fails, nothing to report.
    p.write(
        "migrations/0002_once.sql",
        "CREATE UNIQUE INDEX follows_once ON follows (follower, followee);\n",
    );
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert!(rules(&run.json()).is_empty());

    // A down migration undoes the schema: what it declares is not the live schema.
    std::fs::remove_file(p.path("migrations/0002_once.sql")).unwrap();
    p.write(
        "migrations/0002_once/down.sql",
        "CREATE UNIQUE INDEX follows_once ON follows (follower, followee);\n",
    );
    assert_eq!(
        rules(&p.run(&["--format", "json"]).json()),
        ["check-before-lock"]
    );

    // A file over 1 MiB is a data dump, not read.
    std::fs::remove_dir_all(p.path("migrations/0002_once")).unwrap();
    let mut dump =
        String::from("CREATE UNIQUE INDEX follows_once ON follows (follower, followee);\n");
    while dump.len() <= 1 << 20 {
        dump.push_str("INSERT INTO follows (follower, followee) VALUES (1, 2);\n");
    }
    p.write("migrations/0003_seed.sql", &dump);
    assert_eq!(
        rules(&p.run(&["--format", "json"]).json()),
        ["check-before-lock"]
    );

    // A schema file that is not UTF-8 (a Latin-1 export) is read as far as it goes, and is no
    // error of the run.
    p.write_bytes(
        "migrations/0004_export.sql",
        b"-- caf\xe9\nINSERT INTO follows VALUES (1, 2, 3);\n",
    );
    let run = p.run(&["--format", "json"]);
    run.code(1);
    assert_eq!(rules(&run.json()), ["check-before-lock"]);
    assert_eq!(
        run.json()["summary"]["files"],
        1,
        "schema files are not counted as linted"
    );

    // With no schema file for the table, whether it has a unique key is unknown: silent.
    std::fs::remove_dir_all(p.path("migrations")).unwrap();
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert!(rules(&run.json()).is_empty());
}

#[test]
fn a_virtual_workspaces_root_migrations_are_read() {
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"api\"]\nresolver = \"2\"\n",
    )
    .write(
        "api/Cargo.toml",
        "[package]\nname = \"api\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write("api/src/lib.rs", CHECK_THEN_INSERT)
    .write(
        "migrations/0001_init/up.sql",
        "CREATE TABLE follows (id BIGSERIAL PRIMARY KEY, follower BIGINT, followee BIGINT);\n",
    );
    let json = p.run(&["--format", "json"]).json();
    assert_eq!(rules(&json), ["check-before-lock"], "{json:#}");
    assert_eq!(findings(&json)[0]["file"], "api/src/lib.rs");
}
