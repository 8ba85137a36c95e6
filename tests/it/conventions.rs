//! CLI conventions of clippy and ruff: `-D` / `-W` / `-A` (with `warnings`), `-q` / `-v`,
//! `--show-files`, `--show-settings`, a success line in every human-facing format, a warning
//! when one configuration shadows another, `CARGO_TERM_COLOR`, and parse errors worded as
//! rustc words them.

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{CLEAN, Project, Run, bin, lib_with};

fn shop() -> Project {
    let p = Project::package("shop");
    p.write("src/lib.rs", &lib_with(&["ship"]))
        .write("src/ship.rs", CHECK_BEFORE_LOCK);
    p
}

fn levels(run: &Run) -> Vec<(String, String)> {
    run.json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["level"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn levels_on_the_command_line() {
    let p = shop();
    // A stale suppression is a warning: exit 0, unless `-D warnings`.
    p.write(
        "src/lib.rs",
        "//! Shop.\n\npub mod ship;\n\n// staleguard: allow(rpc-in-transaction) -- stale\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    );
    let run = p.run(&["--format", "json", "-A", "check-before-lock"]);
    run.code(0);
    assert_eq!(
        levels(&run),
        [("unused-suppression".into(), "warning".into())]
    );
    let run = p.run(&[
        "--format",
        "json",
        "-A",
        "check-before-lock",
        "-D",
        "warnings",
    ]);
    run.code(1);
    assert_eq!(
        levels(&run),
        [("unused-suppression".into(), "error".into())]
    );
    // A later setting wins; a rule's own setting after `-D warnings` keeps it a warning.
    let run = p.run(&[
        "--format",
        "json",
        "-D",
        "warnings",
        "--warn",
        "check-before-lock",
        "-W",
        "unused-suppression",
    ]);
    run.code(0);
    let mut got = levels(&run);
    got.sort();
    assert_eq!(
        got,
        [
            ("check-before-lock".into(), "warning".into()),
            ("unused-suppression".into(), "warning".into())
        ]
    );
    // `-A warnings` hides every warning; `--deny` raises a rule the configuration lowered.
    p.write("staleguard.toml", "[rules]\ncheck-before-lock = \"warn\"\n");
    let run = p.run(&["--format", "json", "-A", "warnings"]);
    run.code(0);
    assert!(levels(&run).is_empty(), "{}", run.stdout);
    let run = p.run(&[
        "--format",
        "json",
        "--deny",
        "check-before-lock",
        "-A",
        "unused-suppression",
    ]);
    run.code(1);
    assert_eq!(levels(&run), [("check-before-lock".into(), "error".into())]);
    // Configuration allows it, the command line turns it back on.
    p.write(
        "staleguard.toml",
        "[rules]\ncheck-before-lock = \"allow\"\n",
    );
    p.run(&["-W", "check-before-lock", "-A", "unused-suppression"])
        .code(0);
    let run = p.run(&["--format", "json", "-D", "check-before-lock"]);
    run.code(1);
    // Unknown names are errors with a suggestion.
    let bad = p.run(&["-D", "chek-before-lock"]);
    bad.code(2);
    assert!(
        bad.stderr.contains("did you mean `check-before-lock`?"),
        "{}",
        bad.stderr
    );
}

#[test]
fn quiet_verbose_and_the_success_line() {
    let p = Project::package("demo");
    p.write("src/lib.rs", CLEAN);
    for format in ["human", "short", "github"] {
        let run = p.run(&["--format", format]);
        run.code(0);
        let last = run.stdout.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("staleguard: all checks passed in 1 file ("),
            "{format}: {}",
            run.stdout
        );
        let quiet = p.run(&["--format", format, "-q"]);
        quiet.code(0);
        assert_eq!(quiet.stdout, "", "{format}");
    }
    // Machine formats print only their document.
    p.run(&["--format", "json"]).json();
    let verbose = p.run(&["-v"]);
    verbose.code(0);
    assert!(
        verbose.stderr.contains("staleguard: paths relative to "),
        "{}",
        verbose.stderr
    );
    assert!(
        verbose.stderr.contains("linted 1 files"),
        "{}",
        verbose.stderr
    );
    p.run(&["-q", "-v"]).code(2);
}

#[test]
fn show_files_and_show_settings() {
    let p = shop();
    p.write("assets/sample.rs", "fn broken( {\n");
    let run = p.run(&["--show-files"]);
    run.code(0);
    assert_eq!(
        run.stdout,
        "src/lib.rs\nsrc/ship.rs\nskipped: assets/sample.rs (no target compiles it)\n"
    );
    p.write("staleguard.toml", "[rules]\ncheck-before-lock = \"warn\"\n");
    let run = p.run(&["--show-settings", "-D", "rpc-in-transaction"]);
    run.code(0);
    for expected in [
        "configuration: ",
        "staleguard.toml",
        "check-before-lock",
        "warning (configuration)",
        "error (command line)",
        "parse-error",
        "package path+file://",
    ] {
        assert!(run.stdout.contains(expected), "{expected}:\n{}", run.stdout);
    }
}

#[test]
fn a_shadowed_configuration_is_a_warning() {
    let p = shop();
    p.write(
        "Cargo.toml",
        "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n[workspace.metadata.staleguard.rules]\ncheck-before-lock = \"warn\"\n",
    )
    .write("staleguard.toml", "[rules]\ncheck-before-lock = \"deny\"\n");
    let run = p.run(&["--format", "json"]);
    run.code(1);
    assert!(
        run.stderr.contains(
            "warning: staleguard.toml: this configuration shadows `[workspace.metadata.staleguard]`"
        ),
        "{}",
        run.stderr
    );
    assert!(!p.run(&["-q"]).stderr.contains("shadows"));
    std::fs::remove_file(p.path("staleguard.toml")).unwrap();
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn cargo_term_color_is_honoured() {
    let p = Project::package("demo");
    p.write("src/lib.rs", "fn broken( {\n");
    let with = |value: &str, args: &[&str]| {
        Run::of(
            bin()
                .current_dir(p.root())
                .env("CARGO_TERM_COLOR", value)
                .args(args),
        )
    };
    assert!(with("always", &[]).stdout.contains("\u{1b}["));
    assert!(!with("never", &[]).stdout.contains('\u{1b}'));
    // `--color` wins over it.
    assert!(
        !with("always", &["--color", "never"])
            .stdout
            .contains('\u{1b}')
    );
    let bad = with("sometimes", &[]);
    bad.code(2);
    assert!(
        bad.stderr.contains("invalid CARGO_TERM_COLOR `sometimes`"),
        "{}",
        bad.stderr
    );
}

#[test]
fn parse_errors_say_what_rustc_says() {
    let p = Project::package("demo");
    let unclosed = "//! Demo.\n\npub fn f(x: bool) {\n    if x {\n        g();\n}\n\nfn g() {}\n";
    p.write("src/lib.rs", unclosed);
    let run = p.run(&["--format", "json"]);
    run.code(2);
    let json = run.json();
    let f = &json["findings"][0];
    assert_eq!(f["message"], "this file contains an unclosed delimiter");
    // At the opening delimiter left open: the fn's `{` (the `if` took the first `}`).
    assert_eq!(f["start"]["line"], 3);
    assert_eq!(f["start"]["column"], 19);
    assert_eq!(f["label"], "unclosed delimiter");

    p.write(
        "src/lib.rs",
        "//! Demo.\n\npub fn f() {\n    g(1, 2]);\n}\n",
    );
    let f = &p.run(&["--format", "json"]).json()["findings"][0].clone();
    assert_eq!(f["message"], "mismatched closing delimiter: `]`");
    assert_eq!(
        (f["start"]["line"].as_u64(), f["start"]["column"].as_u64()),
        (Some(4), Some(11))
    );
    assert_eq!(f["labels"][0]["message"], "unclosed delimiter");
    assert_eq!(f["labels"][0]["start"]["column"], 6);

    let human = p.run(&["--color", "never"]);
    assert!(
        human
            .stdout
            .contains("error[parse-error]: mismatched closing delimiter: `]`"),
        "{}",
        human.stdout
    );
}

#[test]
fn add_suppressions_writes_a_reasoned_comment_above_every_finding() {
    let p = shop();
    let run = p.run(&["--add-suppressions", "--format", "json"]);
    run.code(0);
    assert!(
        run.stderr
            .contains("staleguard: 1 suppression comment(s) added in 1 file(s)"),
        "{}",
        run.stderr
    );
    // Nothing is left, and nothing added is unused.
    assert_eq!(
        run.json()["findings"].as_array().unwrap().len(),
        0,
        "{}",
        run.stdout
    );
    let text = p.read("src/ship.rs");
    let line = text
        .lines()
        .find(|l| l.contains("staleguard: allow("))
        .expect("a comment was added");
    assert_eq!(line, "    // staleguard: allow(check-before-lock) -- TODO");
    // The comment is right above the write the finding is reported at.
    let next = text
        .lines()
        .skip_while(|l| !l.contains("staleguard: allow("))
        .nth(1)
        .unwrap();
    assert!(
        next.trim_start().starts_with("sqlx::query(\"UPDATE orders"),
        "{next}"
    );
    // The file still parses and a second run has nothing to add.
    let again = p.run(&["--add-suppressions"]);
    again.code(0);
    assert!(
        again.stderr.contains("0 suppression comment(s) added"),
        "{}",
        again.stderr
    );
}
