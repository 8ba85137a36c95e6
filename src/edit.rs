//! Writing to the linted files: `--fix` (the machine-applicable suggestions) and
//! `--add-suppressions` (a reasoned `// staleguard: allow(..) -- TODO` comment above every
//! finding, for adopting the linter in an old codebase).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use staleguard_rules::Applicability;

use crate::analyze::Outcome;

/// A byte range of a file and its new text.
type Replacement<'a> = (usize, usize, &'a str);

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

/// Applies the machine-applicable suggestions of the findings (identical edits once; an edit
/// that overlaps one already taken is left for a later run). A file whose text changed since
/// it was analysed is left alone.
pub fn fix(outcome: &Outcome) -> Result<Edited, String> {
    let mut per_file: BTreeMap<PathBuf, (Arc<str>, Vec<Replacement>)> = BTreeMap::new();
    for f in &outcome.findings {
        let Some(root) = &f.root else {
            continue;
        };
        for s in f
            .diag
            .suggestions
            .iter()
            .filter(|s| s.applicability == Applicability::MachineApplicable)
        {
            for e in &s.edits {
                let path = root.join(&e.span.file);
                let text = if e.span.file == f.diag.primary.file {
                    f.source.clone()
                } else {
                    std::fs::read_to_string(&path).ok().map(Arc::from)
                };
                let Some(text) = text else {
                    continue;
                };
                per_file
                    .entry(path)
                    .or_insert_with(|| (text, Vec::new()))
                    .1
                    .push((e.span.byte_start, e.span.byte_end, e.replacement.as_str()));
            }
        }
    }
    let mut edited = Edited::default();
    for (path, (text, mut edits)) in per_file {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if *now != *text {
            continue;
        }
        edits.sort_by_key(|(start, end, _)| (*start, *end));
        edits.dedup();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut applied = 0;
        for (start, end, replacement) in edits {
            let fits = start >= at
                && end >= start
                && end <= text.len()
                && text.is_char_boundary(start)
                && text.is_char_boundary(end);
            if !fits {
                continue;
            }
            out.push_str(&text[at..start]);
            out.push_str(replacement);
            at = end;
            applied += 1;
        }
        out.push_str(&text[at..]);
        if applied > 0 {
            write(&path, &out)?;
            edited.files += 1;
            edited.edits += applied;
        }
    }
    Ok(edited)
}
