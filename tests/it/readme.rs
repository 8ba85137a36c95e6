//! The README's and the docs' snippets stay true: the suppression example suppresses exactly
//! the finding it is about (and nothing is left unused), the configuration examples are
//! accepted, the CI snippets install from something that exists.

use serde_json::Value;

use crate::support::{CLEAN, Project, repo_root};

/// The fenced blocks of `lang` under the Markdown heading `heading` (up to the next heading of
/// the same level or above).
pub fn blocks_under(markdown: &str, heading: &str, lang: &str) -> Vec<String> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let Some(start) = markdown.lines().position(|l| l.trim_end() == heading) else {
        return Vec::new();
    };
    let mut in_code = false;
    let section: Vec<&str> = markdown
        .lines()
        .skip(start + 1)
        .take_while(|l| {
            if l.trim_start().starts_with("```") {
                in_code = !in_code;
            }
            in_code || !l.starts_with('#') || l.chars().take_while(|c| *c == '#').count() > level
        })
        .collect();
    fenced(&section.join("\n"), lang)
}

fn readme() -> String {
    std::fs::read_to_string(repo_root().join("README.md")).expect("README.md")
}

fn rules_and_lines(json: &Value) -> Vec<(String, u64)> {
    json["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["start"]["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn readme_suppression_example_suppresses_its_finding() {
    let blocks = blocks_under(&readme(), "## Suppression", "rust");
    assert_eq!(blocks.len(), 1, "one Rust example under ## Suppression");
    let example = &blocks[0];
    assert!(example.contains("// staleguard: allow("), "{example}");
    let p = Project::package("shop");
    p.write("src/lib.rs", &format!("//! Shop.\n\n{example}"));
    let run = p.run(&["--format", "json"]);
    run.code(0);
    assert_eq!(
        rules_and_lines(&run.json()),
        [],
        "the example leaves a finding or an unused suppression"
    );

    // Without the comment, the finding is there, on the line below where the comment was.
    let comment_line = example
        .lines()
        .position(|l| l.contains("staleguard: allow("))
        .unwrap() as u64
        + 3;
    let bare: String = example
        .lines()
        .filter(|l| !l.contains("staleguard: allow("))
        .map(|l| format!("{l}\n"))
        .collect();
    p.write("src/lib.rs", &format!("//! Shop.\n\n{bare}"));
    let run = p.run(&["--format", "json"]);
    run.code(1);
    assert_eq!(
        rules_and_lines(&run.json()),
        [("check-before-lock".to_string(), comment_line)]
    );
}

#[test]
fn ci_snippets_install_from_something_that_exists() {
    let mut installs = 0;
    for doc in ["README.md", "docs/ci.md"] {
        let text = std::fs::read_to_string(repo_root().join(doc)).unwrap();
        for block in fenced(&text, "yaml") {
            for line in block.lines().filter(|l| l.contains("cargo install")) {
                installs += 1;
                assert!(line.contains("--locked"), "{doc}: {line}");
                let from_path = line.contains("--path");
                let marked = line.contains("\"$STALEGUARD_GIT\"")
                    && block.contains("# PLACEHOLDER: STALEGUARD_GIT must be the git URL");
                assert!(
                    from_path || marked,
                    "{doc}: `{line}` installs from neither a path nor a marked placeholder"
                );
            }
        }
    }
    assert!(installs >= 2, "{installs} install lines found");
    // `cargo install --locked --path .` from a checkout: the root package is the binary, and the
    // lock file is committed.
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"cargo-staleguard\""));
    assert!(repo_root().join("Cargo.lock").is_file());
    assert!(readme().contains("cargo install --locked --path ."));
}

/// Every fenced block of `lang` in a Markdown text.
pub fn fenced(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in markdown.lines() {
        match &mut cur {
            None if line.trim_start() == format!("```{lang}") => cur = Some(String::new()),
            Some(block) if line.trim_start().starts_with("```") => {
                out.push(std::mem::take(block));
                cur = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

#[test]
fn configuration_examples_in_the_readme_and_docs_are_accepted() {
    let mut checked = 0;
    for doc in ["README.md", "docs/configuration.md"] {
        let text = std::fs::read_to_string(repo_root().join(doc)).unwrap();
        for block in fenced(&text, "toml") {
            let p = Project::package("demo");
            p.write("src/lib.rs", CLEAN)
                .write("staleguard.toml", &block);
            let run = p.run(&[]);
            assert_eq!(
                run.code, 0,
                "{doc}: the example configuration is rejected:\n{block}\n--- stderr\n{}",
                run.stderr
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "found {checked} toml examples");
}

/// The hooks of `.pre-commit-hooks.yaml`: each runs the binary this repository builds, with
/// its arguments, on a git repository (the changed-lines hook sees only what changed).
#[test]
fn pre_commit_hooks_run() {
    let text = std::fs::read_to_string(repo_root().join(".pre-commit-hooks.yaml")).unwrap();
    let mut hooks: Vec<(String, String, Vec<String>)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        if let Some(id) = line.strip_prefix("- id: ") {
            hooks.push((id.to_string(), String::new(), Vec::new()));
        } else if let Some((key, value)) = line.trim().split_once(": ") {
            let hook = hooks.last_mut().expect("a key belongs to a hook");
            match key {
                "entry" => hook.1 = value.to_string(),
                "args" => hook.2 = serde_json::from_str(value).expect("args are a JSON list"),
                "language" => assert_eq!(value, "rust", "pre-commit builds it with cargo"),
                "pass_filenames" => assert_eq!(value, "false", "findings cross files"),
                _ => {}
            }
        }
    }
    let ids: Vec<&str> = hooks.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(ids, ["staleguard", "staleguard-changed"]);
    let p = Project::package("shop");
    p.write("src/lib.rs", CLEAN);
    p.git_init();
    p.write("src/lib.rs", &format!("{CLEAN}\npub mod ship;\n"))
        .write("src/ship.rs", crate::cli_rules::CHECK_BEFORE_LOCK);
    for (id, entry, args) in &hooks {
        assert_eq!(
            entry, "cargo-staleguard",
            "{id}: the binary this package installs"
        );
        let run = crate::support::Run::of(crate::support::bin().current_dir(p.root()).args(args));
        run.code(1);
        assert!(run.stdout.contains("src/ship.rs:"), "{id}: {}", run.stdout);
    }
    // Committed, the hazard is no change any more: the changed-lines hook passes.
    p.commit_all("ship");
    let changed = &hooks[1].2;
    crate::support::Run::of(crate::support::bin().current_dir(p.root()).args(changed)).code(0);
}
