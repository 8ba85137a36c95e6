//! End-to-end tests of the `cargo-staleguard` binary on temporary projects: invocation, file
//! discovery, bad input, output formats, configuration errors, exit codes and the informational
//! commands. (Tests that need real rule findings live in `cli_rules.rs`.)

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::Value;
use staleguard_rules::registry;

use crate::schema;
use crate::support::{BROKEN, CLEAN, Project, Run, bin, hermetic, lib_with, repo_root};

/// The files of a `--format short` run's findings, in order.
fn files(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .filter(|l| !l.starts_with("staleguard: "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn help_matches_snapshot() {
    let run = Run::of(bin().arg("--help"));
    run.code(0);
    let path = repo_root().join("tests/it/snapshots/help.stdout");
    if std::env::var_os("STALEGUARD_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &run.stdout).unwrap();
    }
    let expected =
        std::fs::read_to_string(&path).expect("snapshot exists (bless with STALEGUARD_BLESS=1)");
    assert_eq!(
        run.stdout, expected,
        "`--help` changed; rerun with STALEGUARD_BLESS=1 if intended"
    );
}

#[test]
fn works_as_a_cargo_subcommand_and_standalone() {
    // cargo runs `cargo-staleguard staleguard ARGS...`.
    let as_cargo = Run::of(bin().args(["staleguard", "rules", "--format", "json"]));
    let standalone = Run::of(bin().args(["rules", "--format", "json"]));
    as_cargo.code(0);
    standalone.code(0);
    assert_eq!(as_cargo.stdout, standalone.stdout);
    let version = Run::of(bin().args(["staleguard", "--version"]));
    version.code(0);
    assert!(
        version.stdout.contains(env!("CARGO_PKG_VERSION")),
        "{}",
        version.stdout
    );
}

#[test]
fn clean_workspace_exits_zero_with_summary() {
    let p = Project::package("demo");
    p.write("src/lib.rs", CLEAN)
        .write("tests/t.rs", CLEAN)
        .write("examples/e.rs", CLEAN);
    let run = p.run(&[]);
    run.code(0);
    let last = run.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("staleguard: all checks passed in 3 files ("),
        "{last}"
    );
}

#[test]
fn parse_error_is_reported_once_and_the_run_goes_on() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["broken"]))
        .write("src/broken.rs", BROKEN);
    let run = p.run(&["--color", "never"]);
    run.code(2);
    assert_eq!(
        occurrences(&run.stdout, "src/broken.rs:2:13"),
        1,
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("error[parse-error]"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("= note: for more information, run `cargo staleguard explain parse-error`")
    );
    assert!(
        run.stdout.contains("in 2 files"),
        "both files were read: {}",
        run.stdout
    );
    assert!(run.stdout.contains("1 file skipped"), "{}", run.stdout);
}

#[test]
fn bad_input_is_reported_once_with_its_path() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["latin1", "gone"]));
    p.write_bytes("src/latin1.rs", b"// caf\xe9\nfn f() {}\n");
    std::os::unix::fs::symlink("missing.rs", p.path("src/gone.rs")).unwrap();
    std::os::unix::fs::symlink("..", p.path("src/loop")).unwrap();
    let run = p.run(&[]);
    run.code(2);
    assert_eq!(
        occurrences(&run.stderr, "src/latin1.rs"),
        1,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("not valid UTF-8"), "{}", run.stderr);
    assert_eq!(occurrences(&run.stderr, "src/gone.rs"), 1, "{}", run.stderr);
    // A directory that cannot be walked holds no file a target compiles: a warning only.
    assert_eq!(occurrences(&run.stderr, "src/loop"), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: src/loop: symlink loop"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("in 1 file"),
        "the good file was still linted: {}",
        run.stdout
    );
}

#[test]
fn nothing_to_lint_exits_two() {
    let p = Project::empty();
    p.write("notes.txt", "not rust");
    let run = p.run(&["."]);
    run.code(2);
    assert!(run.stderr.contains("no Rust files found"), "{}", run.stderr);

    let missing = p.run(&["no-such-dir"]);
    missing.code(2);
    assert_eq!(
        occurrences(&missing.stderr, "no-such-dir: cannot read path"),
        1,
        "{}",
        missing.stderr
    );
}

#[test]
fn plain_paths_are_linted_as_loose_files() {
    let p = Project::empty();
    p.write("scripts/a.rs", CLEAN)
        .write("scripts/b.rs", BROKEN)
        .write("scripts/readme.md", "x");
    let run = p.run(&["--format", "short", "scripts"]);
    run.code(2);
    assert!(
        run.stdout
            .starts_with("scripts/b.rs:2:13: error[parse-error]: "),
        "{}",
        run.stdout
    );
    let single = p.run(&["--format", "short", "scripts/a.rs"]);
    single.code(0);
    assert!(
        single
            .stdout
            .starts_with("staleguard: all checks passed in 1 file ("),
        "{}",
        single.stdout
    );
}

#[test]
fn gitignored_files_and_target_are_skipped() {
    let p = Project::package("demo");
    p.write("src/lib.rs", CLEAN)
        .write(".gitignore", "/src/generated.rs\n")
        .write("src/generated.rs", BROKEN)
        .write("target/debug/build/out.rs", BROKEN);
    let run = p.run(&[]);
    run.code(0);
    assert!(run.stdout.contains("in 1 file"), "{}", run.stdout);
}

#[test]
fn config_excludes_are_globs() {
    let p = Project::package("demo");
    p.write(
        "src/lib.rs",
        &lib_with(&["#[path = \"gen/deep/broken.rs\"] mod broken;"]),
    )
    .write("src/gen/deep/broken.rs", BROKEN)
    .write("staleguard.toml", "exclude = [\"src/gen/**\"]\n");
    p.run(&[]).code(0);
    p.write("staleguard.toml", "exclude = [\"src/gen/*.rs\"]\n");
    let run = p.run(&["--format", "short"]);
    run.code(2);
    assert!(
        run.stdout.contains("src/gen/deep/broken.rs"),
        "`*` stays within a component: {}",
        run.stdout
    );
}

#[test]
fn short_format_is_one_line_per_finding() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["a", "b"]))
        .write("src/a.rs", BROKEN)
        .write("src/b.rs", BROKEN);
    let run = p.run(&["--format", "short"]);
    run.code(2);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(
        lines[2].starts_with("staleguard: 2 errors, 0 warnings, 0 notes in 3 files"),
        "{}",
        lines[2]
    );
    assert!(
        lines[0].starts_with("src/a.rs:2:13: error[parse-error]: file does not parse"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("src/b.rs:2:13: error[parse-error]: "),
        "{}",
        lines[1]
    );
}

#[test]
fn json_output_follows_the_documented_schema() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["broken", "latin1"]))
        .write("src/broken.rs", BROKEN);
    p.write_bytes("src/latin1.rs", b"\xff\n");
    let run = p.run(&["--format", "json"]);
    run.code(2);
    let json = run.json();
    let errors = schema::validate(&schema::documented(), &json);
    assert!(
        errors.is_empty(),
        "JSON does not follow docs/json-schema.json: {errors:#?}\n{json:#}"
    );
    assert_eq!(json["version"], 1);
    let finding = &json["findings"][0];
    assert_eq!(finding["rule"], "parse-error");
    assert_eq!(finding["file"], "src/broken.rs");
    assert_eq!(finding["start"]["line"], 2);
    assert!(
        finding["fingerprint"]
            .as_str()
            .unwrap()
            .chars()
            .all(|c| c.is_ascii_hexdigit())
    );
    assert_eq!(json["errors"][0]["path"], "src/latin1.rs");
    assert_eq!(json["summary"]["files"], 2);
    assert_eq!(json["summary"]["skipped"], 2);
}

#[test]
fn sarif_has_what_github_code_scanning_needs() {
    let p = Project::package("demo");
    p.write(
        "src/lib.rs",
        &lib_with(&["#[path = \"deep dir/broken.rs\"] mod broken;"]),
    )
    .write("src/deep dir/broken.rs", BROKEN);
    let run = p.run(&["--format", "sarif"]);
    run.code(2);
    let sarif = run.json();
    assert!(sarif["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    assert_eq!(sarif["version"], "2.1.0");
    let run0 = &sarif["runs"][0];
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), registry::all().len());
    for (rule, meta) in rules.iter().zip(registry::all()) {
        assert_eq!(rule["id"], meta.name);
        for field in ["shortDescription", "fullDescription", "help"] {
            let text = rule[field]["text"].as_str().unwrap_or_default();
            assert!(!text.trim().is_empty(), "{} has no {field}", meta.name);
        }
        assert!(rule["help"]["markdown"].is_string());
        assert_eq!(
            rule["defaultConfiguration"]["level"],
            meta.default_level.as_str()
        );
    }
    let result = &run0["results"][0];
    assert_eq!(result["ruleId"], "parse-error");
    let index = result["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[index]["id"], "parse-error");
    assert_eq!(result["level"], "error");
    assert!(
        result["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("file does not parse")
    );
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(
        location["artifactLocation"]["uri"],
        "src/deep%20dir/broken.rs"
    );
    assert_eq!(location["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(location["region"]["startLine"], 2);
    assert_eq!(location["region"]["startColumn"], 13);
    let fingerprints = result["partialFingerprints"].as_object().unwrap();
    assert!(!fingerprints.is_empty());
    let base = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert!(
        base.starts_with("file:///") && base.ends_with('/'),
        "{base}"
    );
}

#[test]
fn github_format_prints_workflow_commands() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["broken", "latin1"]))
        .write("src/broken.rs", BROKEN);
    p.write_bytes("src/latin1.rs", b"\xff\n");
    let run = p.run(&["--format", "github"]);
    run.code(2);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("::error file=src/broken.rs,line=2,col=13,")
            && lines[0].contains(",title=staleguard(parse-error)::file does not parse"),
        "{}",
        lines[0]
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("::error file=src/latin1.rs::file is not valid UTF-8")),
        "{}",
        run.stdout
    );
}

#[test]
fn output_flag_writes_the_report_to_a_file() {
    let p = Project::package("demo");
    p.write("src/lib.rs", BROKEN);
    let run = p.run(&["--format", "json", "--output", "report.json"]);
    run.code(2);
    assert_eq!(run.stdout, "");
    let json: Value = serde_json::from_str(&p.read("report.json")).unwrap();
    assert_eq!(json["findings"][0]["rule"], "parse-error");
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let p = Project::package("demo");
    p.write("src/lib.rs", BROKEN);
    let plain = p.run(&[]);
    assert!(
        !plain.stdout.contains('\u{1b}'),
        "piped output has no escapes"
    );
    let coloured = p.run(&["--color", "always"]);
    assert!(coloured.stdout.contains("\u{1b}["), "{}", coloured.stdout);
}

#[test]
fn config_errors_point_at_the_line_with_suggestions() {
    let p = Project::package("demo");
    p.write("src/lib.rs", CLEAN);
    p.write("staleguard.toml", "[rules]\nchek-before-lock = \"deny\"\n");
    let run = p.run(&[]);
    run.code(2);
    assert!(
        run.stderr
            .contains("unknown rule `chek-before-lock`, did you mean `check-before-lock`?"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("staleguard.toml:2:1"), "{}", run.stderr);

    p.write(
        "staleguard.toml",
        "exclud = []\n\n[rules]\ncheck-before-lock = 3\nrpc-in-transaction = \"denny\"\n\n[knowledge]\nremote_calls = [\"Gateway::charge\"]\nlocks = \"Lock::acquire\"\n",
    );
    let run = p.run(&[]);
    run.code(2);
    for expected in [
        "5 problems in configuration",
        "unknown key `exclud`, did you mean `exclude`?",
        "staleguard.toml:1:1",
        "wrong type for `check-before-lock`",
        "staleguard.toml:4:21",
        "unknown level `denny`, did you mean `deny`?",
        "unknown knowledge key `remote_calls`, did you mean `remote-calls`?",
        "wrong type for `locks`: expected an array of strings, found string",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing {expected:?} in\n{}",
            run.stderr
        );
    }

    p.write("staleguard.toml", "[rules\n");
    let run = p.run(&[]);
    run.code(2);
    assert!(run.stderr.contains("invalid TOML"), "{}", run.stderr);
}

#[test]
fn config_in_cargo_metadata_is_validated_too() {
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"a\"]\n\n[workspace.metadata.staleguard.rules]\nrpc-in-transacton = \"warn\"\n",
    );
    p.write(
        "a/Cargo.toml",
        "[package]\nname = \"a\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[package.metadata.staleguard]\nexclude = \"src\"\n",
    );
    p.write("a/src/lib.rs", CLEAN);
    let run = p.run(&[]);
    run.code(2);
    assert!(
        run.stderr.contains("did you mean `rpc-in-transaction`?"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("Cargo.toml:5:1"), "{}", run.stderr);

    p.write("Cargo.toml", "[workspace]\nmembers = [\"a\"]\n");
    let run = p.run(&[]);
    run.code(2);
    assert!(
        run.stderr.contains("wrong type for `exclude`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("a/Cargo.toml:7:11"), "{}", run.stderr);
}

#[test]
fn unknown_rules_on_the_command_line_exit_two() {
    let p = Project::package("demo");
    p.write("src/lib.rs", CLEAN);
    let run = p.run(&["--select", "check-before-lock,rpc-in-transation"]);
    run.code(2);
    assert!(
        run.stderr
            .contains("unknown rule `rpc-in-transation`, did you mean `rpc-in-transaction`?"),
        "{}",
        run.stderr
    );
    let run = p.run(&["--ignore", "nonsense"]);
    run.code(2);
    p.run(&["--jobs", "0"]).code(2);
    p.run(&["--frobnicate"]).code(2);
}

#[test]
fn packages_are_selected_as_in_cargo() {
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"alpha\", \"beta\"]\nresolver = \"2\"\n",
    );
    for name in ["alpha", "beta"] {
        p.write(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        );
        p.write(&format!("{name}/src/lib.rs"), BROKEN);
    }
    let all = p.run(&["--format", "short"]);
    assert_eq!(files(&all), ["alpha/src/lib.rs", "beta/src/lib.rs"]);
    let one = p.run(&["--format", "short", "-p", "beta"]);
    assert_eq!(files(&one), ["beta/src/lib.rs"]);
    let by_path = p.run(&["--format", "short", "alpha"]);
    assert_eq!(files(&by_path), ["alpha/src/lib.rs"]);
    let by_manifest = p.run(&["--format", "short", "--manifest-path", "beta/Cargo.toml"]);
    assert_eq!(files(&by_manifest), ["beta/src/lib.rs"]);
    let whole = p.run(&[
        "--format",
        "short",
        "--workspace",
        "--manifest-path",
        "beta/Cargo.toml",
    ]);
    assert_eq!(files(&whole), ["alpha/src/lib.rs", "beta/src/lib.rs"]);
    let typo = p.run(&["-p", "bet"]);
    typo.code(2);
    assert!(
        typo.stderr.contains("did you mean `beta`?"),
        "{}",
        typo.stderr
    );
}

#[test]
fn jobs_do_not_change_the_result() {
    let p = Project::package("demo");
    let mods: Vec<String> = (0..12).map(|i| format!("m{i:02}")).collect();
    p.write(
        "src/lib.rs",
        &lib_with(&mods.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    for i in 0..12 {
        p.write(
            &format!("src/m{i:02}.rs"),
            if i % 3 == 0 { BROKEN } else { CLEAN },
        );
    }
    let one = p.run(&["--format", "short", "-q", "-j", "1"]);
    let many = p.run(&["--format", "short", "-q", "--jobs", "4"]);
    assert_eq!(one.stdout.lines().count(), 4);
    assert_eq!(one.stdout, many.stdout);
}

#[test]
fn statistics_count_findings_per_rule() {
    let p = Project::package("demo");
    p.write("src/lib.rs", &lib_with(&["a", "b"]))
        .write("src/a.rs", BROKEN)
        .write("src/b.rs", BROKEN);
    let run = p.run(&["--format", "short", "--statistics"]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["2", "parse-error", "error"]),
        "{}",
        run.stdout
    );
    let json = p.run(&["--format", "json", "--statistics"]);
    json.json();
    assert!(
        json.stderr.contains("parse-error"),
        "statistics go to stderr for machine formats: {}",
        json.stderr
    );
}

#[test]
fn exit_zero_never_hides_trouble() {
    let p = Project::package("demo");
    p.write("src/lib.rs", BROKEN);
    p.run(&["--exit-zero"]).code(2);
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let p = Project::package("demo");
    let mods: Vec<String> = (0..300).map(|i| format!("m{i:03}")).collect();
    p.write(
        "src/lib.rs",
        &lib_with(&mods.iter().map(String::as_str).collect::<Vec<_>>()),
    );
    for i in 0..300 {
        p.write(&format!("src/m{i:03}.rs"), BROKEN);
    }
    let mut child = bin()
        .current_dir(p.root())
        .args(["--color", "never"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("parse-error"), "{first}");
    // The reader is dropped here: the rest of the output hits a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

#[test]
fn explain_prints_every_rules_doc() {
    for meta in registry::all() {
        let run = Run::of(bin().args(["explain", meta.name]));
        run.code(0);
        if meta.doc.trim().is_empty() {
            assert!(run.stdout.contains(meta.summary), "{}", run.stdout);
        } else {
            // The doc, line for line, without the indentation `///` comments leave.
            let shown: Vec<&str> = run.stdout.lines().map(str::trim).collect();
            let doc: Vec<&str> = meta.doc.trim_matches('\n').lines().map(str::trim).collect();
            assert_eq!(
                shown, doc,
                "explain {} differs from the registry doc",
                meta.name
            );
            assert!(!run.stdout.starts_with(' '), "{}", run.stdout);
        }
    }
    let typo = Run::of(bin().args(["explain", "check-befor-lock"]));
    typo.code(2);
    assert!(
        typo.stderr.contains("did you mean `check-before-lock`?"),
        "{}",
        typo.stderr
    );
}

#[test]
fn rules_lists_the_registry() {
    let run = Run::of(bin().args(["rules", "--format", "json"]));
    run.code(0);
    let listed = run.json();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), registry::all().len());
    for (item, meta) in listed.iter().zip(registry::all()) {
        assert_eq!(item["name"], meta.name);
        assert_eq!(item["level"], meta.default_level.as_str());
        assert_eq!(item["summary"], meta.summary);
        assert_eq!(item.as_object().unwrap().len(), 3);
    }
    let human = Run::of(bin().arg("rules"));
    human.code(0);
    for meta in registry::all() {
        assert!(
            human
                .stdout
                .lines()
                .any(|l| l.starts_with(meta.name) && l.ends_with(meta.summary)),
            "{}",
            human.stdout
        );
    }
}

#[test]
fn readme_links_every_catalogue_rule() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    for meta in registry::all()
        .iter()
        .filter(|r| !matches!(r.name, "parse-error" | "unused-suppression"))
    {
        let link = format!("[`{0}`](docs/rules/{0}.md)", meta.name);
        assert!(readme.contains(&link), "README's rule table lacks {link}");
    }
}

#[test]
fn deeply_nested_expressions_do_not_crash() {
    let p = Project::package("demo");
    let depth = 5000;
    let body = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
    p.write(
        "src/lib.rs",
        &format!("pub fn f() -> i32 {{\n    {body}\n}}\n"),
    );
    let run = p.run(&[]);
    run.code(0);
    assert!(run.stdout.contains("in 1 file"), "{}", run.stdout);
}

#[test]
fn on_a_terminal_colour_is_automatic_unless_no_color() {
    // `script` (util-linux) gives the binary a pseudo-terminal as standard output.
    let p = Project::package("demo");
    p.write("src/lib.rs", BROKEN);
    let on_tty = |no_color: bool| {
        let mut cmd = std::process::Command::new("script");
        hermetic(&mut cmd).current_dir(p.root()).args([
            "-qec",
            env!("CARGO_BIN_EXE_cargo-staleguard"),
            "/dev/null",
        ]);
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        Run::of(&mut cmd)
    };
    let coloured = on_tty(false);
    assert!(
        coloured.stdout.contains("error[parse-error]"),
        "{coloured:?}"
    );
    assert!(
        coloured.stdout.contains("\u{1b}["),
        "a terminal gets colour: {}",
        coloured.stdout
    );
    let plain = on_tty(true);
    assert!(plain.stdout.contains("error[parse-error]"), "{plain:?}");
    assert!(
        !plain.stdout.contains('\u{1b}'),
        "NO_COLOR is honoured: {}",
        plain.stdout
    );
}

#[test]
fn a_member_directory_lints_its_package_and_workspace_lints_all() {
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"alpha\", \"beta\"]\nresolver = \"2\"\n",
    );
    for name in ["alpha", "beta"] {
        p.write(
            &format!("{name}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        );
        p.write(&format!("{name}/src/lib.rs"), BROKEN);
    }
    p.git_init();
    let in_alpha = |args: &[&str]| {
        Run::of(
            bin()
                .current_dir(p.path("alpha/src"))
                .args(["--format", "short"])
                .args(args),
        )
    };
    // As `cargo clippy`: the current package only.
    let run = in_alpha(&[]);
    run.code(2);
    assert_eq!(files(&run), ["alpha/src/lib.rs"], "{}", run.stdout);
    let all = in_alpha(&["--workspace"]);
    all.code(2);
    assert_eq!(files(&all), ["alpha/src/lib.rs", "beta/src/lib.rs"]);
    // The workspace root lints every member.
    let root = p.run(&["--format", "short"]);
    assert_eq!(files(&root), ["alpha/src/lib.rs", "beta/src/lib.rs"]);
}
