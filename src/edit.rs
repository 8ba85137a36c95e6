//! Writing to the linted files: `--add-suppressions` (a reasoned `// staleguard: allow(..) --
//! TODO` comment above every finding, for adopting the linter in an old codebase).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::analyze::Outcome;

/// Per line, the rules to allow there.
type Rules<'a> = BTreeMap<u32, Vec<&'a str>>;

/// What an edit run changed.
#[derive(Debug, Default)]
pub struct Edited {
    pub files: usize,
    pub edits: usize,
}

/// Inserts one suppression comment above each line holding findings (every rule of the line
/// in one comment), indented as that line. Parse errors cannot be suppressed and stale
/// suppressions are removed, not suppressed: both are left alone.
pub fn add_suppressions(outcome: &Outcome) -> Result<Edited, String> {
    // Per file: its text and, per line, the rules to allow there.
    let mut per_file: BTreeMap<PathBuf, (Arc<str>, Rules)> = BTreeMap::new();
    for f in &outcome.findings {
        let d = &f.diag;
        if matches!(d.rule, "parse-error" | "unused-suppression") {
            continue;
        }
        let (Some(root), Some(source)) = (&f.root, &f.source) else {
            continue;
        };
        let entry = per_file
            .entry(root.join(&d.primary.file))
            .or_insert_with(|| (source.clone(), BTreeMap::new()));
        let rules = entry.1.entry(d.primary.start.line).or_default();
        if !rules.contains(&d.rule) {
            rules.push(d.rule);
        }
    }
    let mut edited = Edited::default();
    for (path, (text, lines)) in per_file {
        let mut out = String::with_capacity(text.len() + lines.len() * 64);
        for (i, line) in text.split_inclusive('\n').enumerate() {
            if let Some(rules) = lines.get(&(i as u32 + 1)) {
                let indent: String = line
                    .chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect();
                let eol = if line.ends_with("\r\n") { "\r\n" } else { "\n" };
                out.push_str(&format!(
                    "{indent}// staleguard: allow({}) -- TODO{eol}",
                    rules.join(", ")
                ));
                edited.edits += 1;
            }
            out.push_str(line);
        }
        write(&path, &out)?;
        edited.files += 1;
    }
    Ok(edited)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
