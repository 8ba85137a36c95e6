//! The CI and tool formats: paths relative to the repository root (else the working
//! directory) with `--path-prefix`, SARIF as GitHub renders it (validated against the official
//! SARIF 2.1.0 schema), GitLab Code Quality, reviewdog's rdjsonl, and documentation pointers
//! (`cargo staleguard explain RULE` and a help URI from the package metadata).

use serde_json::Value;

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{BROKEN, CLEAN, Project, Run, bin, repo_root};

/// A git repository holding a workspace in `services/shop` with one check-before-lock hazard.
fn monorepo() -> Project {
    let p = Project::empty();
    p.write("README.md", "monorepo\n")
        .write(
            "services/shop/Cargo.toml",
            "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        )
        .write("services/shop/src/lib.rs", "//! Shop.\n\npub mod ship;\n")
        .write("services/shop/src/ship.rs", CHECK_BEFORE_LOCK);
    p.git_init();
    p
}

/// The official SARIF 2.1.0 schema (OASIS), kept under `tests/it/data/`.
fn sarif_schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo_root().join("tests/it/data/sarif-schema-2.1.0.json"))
        .expect("schema copy");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .build(&schema)
        .expect("the schema compiles")
}

pub fn assert_valid_sarif(sarif: &Value) {
    let validator = sarif_schema();
    let errors: Vec<String> = validator
        .iter_errors(sarif)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "invalid SARIF: {errors:#?}\n{sarif:#}");
}

#[test]
fn the_sarif_schema_copy_rejects_what_sarif_forbids() {
    let validator = sarif_schema();
    let bad = serde_json::json!({ "version": "2.1.0", "runs": [{ "tool": { "driver": {} } }] });
    assert!(
        !validator.is_valid(&bad),
        "a driver without a name is invalid"
    );
    let bad_level = serde_json::json!({ "version": "2.1.0", "runs": [{
        "tool": { "driver": { "name": "x" } },
        "results": [{ "message": { "text": "m" }, "level": "fatal" }]
    }] });
    assert!(!validator.is_valid(&bad_level));
}

#[test]
fn paths_are_relative_to_the_repository_root() {
    let p = monorepo();
    let manifest = ["--manifest-path", "services/shop/Cargo.toml"];
    let github = p.run(&[&manifest[..], &["--format", "github"]].concat());
    github.code(1);
    assert!(
        github
            .stdout
            .starts_with("::error file=services/shop/src/ship.rs,line="),
        "{}",
        github.stdout
    );
    // From a subdirectory of the repository: still relative to its root.
    let inside = Run::of(
        bin()
            .current_dir(p.path("services/shop/src"))
            .args(["--format", "short"]),
    );
    inside.code(1);
    assert!(
        inside.stdout.starts_with("services/shop/src/ship.rs:"),
        "{}",
        inside.stdout
    );
    let json = p
        .run(&[&manifest[..], &["--format", "json"]].concat())
        .json();
    assert_eq!(json["findings"][0]["file"], "services/shop/src/ship.rs");
    assert_eq!(
        std::fs::canonicalize(json["root"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(p.root()).unwrap()
    );
    for label in json["findings"][0]["labels"].as_array().unwrap() {
        assert_eq!(label["file"], "services/shop/src/ship.rs");
    }

    // --path-prefix, for a repository checked out below the CI's working directory.
    let prefixed = p.run(
        &[
            &manifest[..],
            &["--format", "short", "--path-prefix", "repo/"],
        ]
        .concat(),
    );
    assert!(
        prefixed
            .stdout
            .starts_with("repo/services/shop/src/ship.rs:"),
        "{}",
        prefixed.stdout
    );

    // Outside git: relative to the working directory.
    std::fs::remove_dir_all(p.path(".git")).unwrap();
    let plain = Run::of(bin().current_dir(p.path("services")).args([
        "--format",
        "short",
        "--manifest-path",
        "shop/Cargo.toml",
    ]));
    plain.code(1);
    assert!(
        plain.stdout.starts_with("shop/src/ship.rs:"),
        "{}",
        plain.stdout
    );
}

#[test]
fn sarif_is_valid_and_renders_fully_on_github() {
    let p = monorepo();
    let run = p.run(&[
        "--manifest-path",
        "services/shop/Cargo.toml",
        "--format",
        "sarif",
    ]);
    run.code(1);
    let sarif = run.json();
    assert_valid_sarif(&sarif);
    let run0 = &sarif["runs"][0];
    assert_eq!(run0["invocations"][0]["executionSuccessful"], true);
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    for rule in rules {
        let id = rule["id"].as_str().unwrap();
        assert!(
            rule["helpUri"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/{id}.md")),
            "{rule:#}"
        );
        assert!(rule["help"]["markdown"].as_str().unwrap().contains("### "));
        assert!(
            ["very-high", "high", "medium", "low"]
                .contains(&rule["properties"]["precision"].as_str().unwrap()),
            "{rule:#}"
        );
    }
    let result = &run0["results"][0];
    assert_eq!(result["ruleId"], "check-before-lock");
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(
        location["artifactLocation"]["uri"],
        "services/shop/src/ship.rs"
    );
    assert_eq!(location["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    // Every related location is linked from the message by its id.
    let text = result["message"]["text"].as_str().unwrap();
    let related = result["relatedLocations"].as_array().unwrap();
    assert!(!related.is_empty());
    for r in related {
        let link = format!("]({})", r["id"]);
        assert!(text.contains(&link), "{link} not in {text}");
        assert!(
            text.contains(&format!("[{}]", r["message"]["text"].as_str().unwrap())),
            "{text}"
        );
    }
    assert!(text.contains("\nhelp: "), "{text}");
    let base = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(
        base.starts_with("file:///") && base.ends_with('/'),
        "{base}"
    );
}

#[test]
fn sarif_keeps_the_call_chain_notes() {
    let p = Project::package("shop");
    // The read happens in a helper: the finding's notes name the chain.
    p.write(
        "src/lib.rs",
        r#"//! Shop.

use sqlx::PgPool;

pub async fn load_status(db: &PgPool, id: i64) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("SELECT status FROM orders WHERE id = $1").bind(id).fetch_one(db).await
}

pub async fn ship(db: &PgPool, id: i64) -> Result<(), sqlx::Error> {
    let status = load_status(db, id).await?;
    if status != "paid" {
        return Ok(());
    }
    let mut tx = db.begin().await?;
    sqlx::query("UPDATE orders SET status = 'shipped' WHERE id = $1").bind(id).execute(&mut *tx).await?;
    tx.commit().await
}
"#,
    );
    let json = p.run(&["--format", "json"]).json();
    let notes = json["findings"][0]["notes"].as_array().unwrap().clone();
    assert!(!notes.is_empty(), "{json:#}");
    let sarif = p.run(&["--format", "sarif"]).json();
    assert_valid_sarif(&sarif);
    let text = sarif["runs"][0]["results"][0]["message"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    for note in notes {
        let note = note
            .as_str()
            .unwrap()
            .replace('[', "\\[")
            .replace(']', "\\]");
        assert!(
            text.contains(&format!("note: {note}")),
            "{note} not in {text}"
        );
    }
}

#[test]
fn sarif_says_when_the_run_could_not_do_its_job() {
    let p = Project::package("demo");
    p.write("src/lib.rs", "//! Demo.\n\nmod broken;\n")
        .write("src/broken.rs", BROKEN);
    let run = p.run(&["--format", "sarif"]);
    run.code(2);
    let sarif = run.json();
    assert_valid_sarif(&sarif);
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        false
    );
    p.write("src/broken.rs", CLEAN);
    let run = p.run(&["--format", "sarif"]);
    run.code(0);
    let sarif = run.json();
    assert_valid_sarif(&sarif);
    assert_eq!(
        sarif["runs"][0]["invocations"][0]["executionSuccessful"],
        true
    );
}

#[test]
fn gitlab_code_quality_report() {
    let p = monorepo();
    // The same hazard twice in one file: fingerprints still differ (they include the location).
    let twice = format!(
        "{CHECK_BEFORE_LOCK}\n{}",
        CHECK_BEFORE_LOCK
            .replace("ship_order", "deliver_order")
            .replace("//! Shipping.\n", "")
    );
    p.write("services/shop/src/ship.rs", &twice);
    let run = p.run(&[
        "--manifest-path",
        "services/shop/Cargo.toml",
        "--format",
        "gitlab",
    ]);
    run.code(1);
    let issues = run.json();
    let issues = issues.as_array().expect("a JSON array");
    assert_eq!(issues.len(), 2, "{issues:#?}");
    for issue in issues {
        assert_eq!(issue["check_name"], "check-before-lock");
        assert_eq!(issue["severity"], "major");
        assert!(!issue["description"].as_str().unwrap().is_empty());
        assert_eq!(issue["location"]["path"], "services/shop/src/ship.rs");
        assert!(issue["location"]["lines"]["begin"].as_u64().unwrap() >= 1);
    }
    assert_ne!(issues[0]["fingerprint"], issues[1]["fingerprint"]);
    // A warning is minor.
    p.write(
        "services/shop/staleguard.toml",
        "[rules]\ncheck-before-lock = \"warn\"\n",
    );
    let warn = p.run(&[
        "--manifest-path",
        "services/shop/Cargo.toml",
        "--format",
        "gitlab",
    ]);
    warn.code(0);
    assert_eq!(warn.json()[0]["severity"], "minor");
}

#[test]
fn rdjsonl_is_one_reviewdog_diagnostic_per_line() {
    let p = monorepo();
    let run = p.run(&[
        "--manifest-path",
        "services/shop/Cargo.toml",
        "--format",
        "rdjsonl",
    ]);
    run.code(1);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    let d = &lines[0];
    assert_eq!(d["severity"], "ERROR");
    assert_eq!(d["source"]["name"], "staleguard");
    assert_eq!(d["code"]["value"], "check-before-lock");
    assert!(
        d["code"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/check-before-lock.md")
    );
    assert_eq!(d["location"]["path"], "services/shop/src/ship.rs");
    let start = &d["location"]["range"]["start"];
    let line = start["line"].as_u64().unwrap() as usize;
    let column = start["column"].as_u64().unwrap() as usize;
    let text = CHECK_BEFORE_LOCK.lines().nth(line - 1).unwrap();
    assert!(
        text[column - 1..].starts_with("sqlx::query(\"UPDATE"),
        "{text}"
    );
    assert!(!d["related_locations"].as_array().unwrap().is_empty());
}

#[test]
fn documentation_pointers_are_the_explain_command_and_a_uri_from_the_package_metadata() {
    let p = monorepo();
    let human = p.run(&[
        "--manifest-path",
        "services/shop/Cargo.toml",
        "--color",
        "never",
    ]);
    assert!(
        human.stdout.contains(
            "= note: for more information, run `cargo staleguard explain check-before-lock`"
        ),
        "{}",
        human.stdout
    );
    assert!(!human.stdout.contains("docs/rules/"), "{}", human.stdout);
    // The URI's base is the package's `repository` (this repository's Cargo.toml).
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let repository = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|r| r.strip_suffix('"'))
        .expect("the workspace declares its repository");
    let json = p
        .run(&[
            "--manifest-path",
            "services/shop/Cargo.toml",
            "--format",
            "json",
        ])
        .json();
    assert_eq!(
        json["findings"][0]["help_uri"],
        format!("{repository}/blob/HEAD/docs/rules/check-before-lock.md")
    );
}
