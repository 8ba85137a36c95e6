//! The README's snippets stay true: its suppression example suppresses exactly the finding it
//! is about (and nothing is left unused), and its configuration examples are accepted (see also
//! `cli::configuration_examples_in_the_readme_and_docs_are_accepted`).

use serde_json::Value;

use crate::support::{Project, repo_root};

/// The fenced blocks of `lang` under the Markdown heading `heading` (up to the next heading of
/// the same level).
pub fn blocks_under(markdown: &str, heading: &str, lang: &str) -> Vec<String> {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let mut out = Vec::new();
    let mut inside = false;
    let mut cur: Option<String> = None;
    for line in markdown.lines() {
        if cur.is_none() && line.starts_with('#') {
            let this = line.chars().take_while(|c| *c == '#').count();
            if line.trim_end() == heading {
                inside = true;
                continue;
            } else if this <= level {
                inside = false;
            }
        }
        if !inside {
            continue;
        }
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
