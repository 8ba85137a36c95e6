//! What adding a rule takes, enforced: the rule list in `src/rules/mod.rs` is generated from the
//! rule files and the README's rule table from the registry (`STALEGUARD_BLESS=1` regenerates
//! both), every rule has a fixtures folder with a bad and a good case, the table's links
//! resolve, and every configuration key a doc page mentions exists.

#[path = "support/cases.rs"]
mod cases;

use staleguard_rules::{Knowledge, registry};
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo_root() -> PathBuf {
    crate_dir()
        .parent()
        .expect("rules/ has a parent")
        .to_path_buf()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn bless() -> bool {
    std::env::var_os("STALEGUARD_BLESS").is_some_and(|v| v == "1")
}

const BEGIN: &str = "// @generated begin\n";
const END: &str = "// @generated end\n";

/// The rule modules in `src/rules/`: `<name>.rs` files and `<name>/mod.rs` folders.
fn rule_modules() -> Vec<String> {
    let dir = crate_dir().join("src/rules");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/rules").flatten() {
        let path = entry.path();
        let name = path
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .to_string();
        if path.is_dir() && path.join("mod.rs").is_file()
            || path.extension().is_some_and(|e| e == "rs") && name != "mod"
        {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// The generated block for `modules`, listed in that order.
fn rule_list(modules: &[String]) -> String {
    let mut s = String::from(BEGIN);
    let mut sorted = modules.to_vec();
    sorted.sort();
    for m in &sorted {
        s.push_str(&format!("mod {m};\n"));
    }
    s.push_str("\n/// Every rule, in catalogue order.\npub(crate) static ALL: &[&Rule] = &[\n");
    for m in modules {
        s.push_str(&format!("    &{m}::RULE,\n"));
    }
    s.push_str("];\n");
    s.push_str(END);
    s
}

/// The rule list keeps its order (the catalogue's) and gains a line for each new rule file, at
/// the end; a removed file loses its line.
#[test]
fn the_rule_list_is_generated_from_the_rule_files() {
    let path = crate_dir().join("src/rules/mod.rs");
    let text = read(&path);
    let (start, end) = match (text.find(BEGIN), text.find(END)) {
        (Some(s), Some(e)) if s < e => (s, e + END.len()),
        _ => panic!("{}: no `@generated` markers", path.display()),
    };
    let files = rule_modules();
    // The order is the list's (`mod` lines are sorted, rustfmt keeps them so).
    let mut order: Vec<String> = text[start..end]
        .lines()
        .filter_map(|l| l.trim().strip_prefix('&')?.strip_suffix("::RULE,"))
        .map(str::to_string)
        .filter(|m| files.contains(m))
        .collect();
    for f in &files {
        if !order.contains(f) {
            order.push(f.clone());
        }
    }
    let want = rule_list(&order);
    if text[start..end] != want {
        if bless() {
            let fresh = format!("{}{want}{}", &text[..start], &text[end..]);
            std::fs::write(&path, fresh).expect("write src/rules/mod.rs");
        } else {
            panic!(
                "the rule list in {} is stale: run `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test conventions`",
                path.display()
            );
        }
    }
    // Each module declares the rule its file is named after, in the list's order.
    let declared: Vec<String> = registry::rules().map(|r| r.name.to_string()).collect();
    let named: Vec<String> = order.iter().map(|m| m.replace('_', "-")).collect();
    assert_eq!(
        declared, named,
        "a rule's id is its file name in kebab-case"
    );
}

#[test]
fn every_rule_has_fixtures_with_a_bad_and_a_good_case() {
    let cases = cases::all();
    let mut problems = Vec::new();
    for rule in registry::rules() {
        let mine: Vec<&cases::Case> = cases.iter().filter(|c| c.rule == rule.name).collect();
        if mine.is_empty() {
            problems.push(format!(
                "{}: no case under fixtures/{}/",
                rule.name, rule.name
            ));
            continue;
        }
        let bad = mine
            .iter()
            .any(|c| c.expected().iter().any(|(_, _, r)| r == rule.name));
        let good = mine
            .iter()
            .any(|c| c.files.iter().any(|(_, text)| text.contains("// GOOD")));
        if !bad {
            problems.push(format!(
                "{}: no bad case (a `//~` marker of the rule)",
                rule.name
            ));
        }
        if !good {
            problems.push(format!("{}: no `// GOOD` look-alike", rule.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const TABLE_BEGIN: &str = "<!-- rules: generated from the registry by `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test conventions` -->\n";
const TABLE_END: &str = "<!-- rules: end -->\n";

/// The README's rule table: every rule of the registry, with its doc page, summary and default
/// level.
fn rule_table() -> String {
    let mut s = String::from(TABLE_BEGIN);
    s.push_str("| rule | finds | default |\n| --- | --- | --- |\n");
    for r in registry::rules() {
        s.push_str(&format!(
            "| [`{0}`](docs/rules/{0}.md) | {1} | {2} |\n",
            r.name,
            r.summary,
            r.default_level.as_str()
        ));
    }
    s.push_str(TABLE_END);
    s
}

#[test]
fn the_readme_rule_table_is_the_registry() {
    let path = repo_root().join("README.md");
    let text = read(&path);
    let (start, end) = match (text.find(TABLE_BEGIN), text.find(TABLE_END)) {
        (Some(s), Some(e)) if s < e => (s, e + TABLE_END.len()),
        _ => panic!("README.md: no generated rule table markers"),
    };
    let want = rule_table();
    if text[start..end] != want {
        if bless() {
            let fresh = format!("{}{want}{}", &text[..start], &text[end..]);
            std::fs::write(&path, fresh).expect("write README.md");
        } else {
            panic!(
                "README.md's rule table differs from the registry: run `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test conventions`"
            );
        }
    }
    for r in registry::rules() {
        let page = repo_root().join(format!("docs/rules/{}.md", r.name));
        assert!(
            page.is_file(),
            "the README links {}, which does not exist",
            page.display()
        );
    }
}

/// `knowledge.<key>` mentions, `[knowledge]` tables and `[rules]` tables in the README, `docs/`
/// and the rules' own docs name keys the configuration accepts.
#[test]
fn every_configuration_key_a_doc_mentions_exists() {
    let mut texts: Vec<(String, String)> = Vec::new();
    let root = repo_root();
    texts.push(("README.md".into(), read(&root.join("README.md"))));
    for dir in ["docs", "docs/rules"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("docs").flatten() {
            let p = entry.path();
            if p.extension().is_some_and(|e| e == "md") {
                texts.push((p.display().to_string(), read(&p)));
            }
        }
    }
    for r in registry::all() {
        texts.push((format!("the doc of {}", r.name), r.doc.to_string()));
    }
    let keys: Vec<&str> = Knowledge::KEYS.iter().map(|k| k.key).collect();
    let mut bad = Vec::new();
    for (name, text) in &texts {
        for (i, _) in text.match_indices("knowledge.") {
            let key: String = text[i + "knowledge.".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            // (`knowledge.rs` is a file.)
            if !key.is_empty() && key != "rs" && !keys.contains(&key.as_str()) {
                bad.push(format!("{name}: `knowledge.{key}`"));
            }
        }
        let mut table = "";
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                table = line.split_whitespace().next().unwrap_or(line);
            } else if line.starts_with("```") {
                table = "";
            } else if let Some((key, _)) = line.split_once('=') {
                let key = key.trim();
                if table == "[knowledge]" && !keys.contains(&key) {
                    bad.push(format!("{name}: `{key}` under `[knowledge]`"));
                }
                if table == "[rules]" && registry::find(key).is_none() {
                    bad.push(format!("{name}: unknown rule `{key}` under `[rules]`"));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "unknown configuration keys (knowledge keys: {}):\n{}",
        keys.join(", "),
        bad.join("\n")
    );
}
