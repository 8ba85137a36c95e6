//! `docs/rules/<rule>.md` is generated from each rule's declaration: this test fails when a page
//! is missing or stale, and rewrites the pages when `STALEGUARD_BLESS=1`. It also checks that
//! every doc has the fixed headings.

use staleguard_rules::registry;
use std::path::PathBuf;

const HEADINGS: &[&str] = &[
    "### What it does",
    "### Why is this bad?",
    "### Example",
    "### Use instead",
    "### Known problems",
];

fn docs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("rules")
}

#[test]
fn every_rule_doc_has_the_fixed_headings() {
    for rule in registry::all() {
        let mut at = 0;
        for h in HEADINGS {
            let found = rule.doc[at..].find(h);
            assert!(
                found.is_some(),
                "`{}` doc lacks `{h}` (or it is out of order)",
                rule.name
            );
            at += found.unwrap_or(0);
        }
        assert!(
            !rule.doc.lines().any(|l| l.starts_with(" ###")),
            "`{}` doc is not dedented",
            rule.name
        );
    }
}

#[test]
fn generated_rule_pages_are_fresh() {
    let dir = docs_dir();
    let bless = std::env::var_os("STALEGUARD_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for rule in registry::all() {
        let path = dir.join(format!("{}.md", rule.name));
        let want = registry::doc_page(rule);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            if bless {
                std::fs::create_dir_all(&dir).expect("create docs/rules");
                std::fs::write(&path, &want).expect("write doc page");
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale or missing generated pages (run `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test docs`):\n{}",
        stale.join("\n")
    );
}
