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

/// Applies the machine-applicable suggestions of the findings, each whole or not at all: one
/// whose edits overlap those of a suggestion already taken is left for a later run, and an
/// identical one is applied once. A file whose text changed since it was analysed is left
/// alone. Counts the suggestions applied.
pub fn fix(outcome: &Outcome) -> Result<Edited, String> {
    // Per file: its text and the suggestions to apply to it, each its list of edits.
    let mut per_file: BTreeMap<PathBuf, (Arc<str>, Vec<Vec<Replacement>>)> = BTreeMap::new();
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
            // A suggestion's edits are in one file.
            let Some(file) = s.edits.first().map(|e| &e.span.file) else {
                continue;
            };
            if s.edits.iter().any(|e| &e.span.file != file) {
                continue;
            }
            let path = root.join(file);
            let text = if *file == f.diag.primary.file {
                f.source.clone()
            } else {
                std::fs::read_to_string(&path).ok().map(Arc::from)
            };
            let Some(text) = text else {
                continue;
            };
            let mut edits: Vec<Replacement> = s
                .edits
                .iter()
                .map(|e| (e.span.byte_start, e.span.byte_end, e.replacement.as_str()))
                .collect();
            edits.sort_by_key(|(start, end, _)| (*start, *end));
            per_file
                .entry(path)
                .or_insert_with(|| (text, Vec::new()))
                .1
                .push(edits);
        }
    }
    let mut edited = Edited::default();
    for (path, (text, suggestions)) in per_file {
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        if *now != *text {
            continue;
        }
        let (out, applied) = apply(&text, suggestions);
        if applied == 0 {
            continue;
        }
        write(&path, &out)?;
        edited.files += 1;
        edited.edits += applied;
    }
    Ok(edited)
}

/// `text` with the suggestions applied, each whole or not at all (in order of their first
/// edit; one that clashes with a suggestion taken before it, or within itself, is left), and
/// how many were applied. Two edits clash when their ranges share text or both insert at one
/// point; an identical suggestion is applied once.
fn apply(text: &str, mut suggestions: Vec<Vec<Replacement<'_>>>) -> (String, usize) {
    suggestions.sort();
    suggestions.dedup();
    let fits = |&(start, end, _): &Replacement<'_>| {
        end >= start
            && end <= text.len()
            && text.is_char_boundary(start)
            && text.is_char_boundary(end)
    };
    let clash = |a: &Replacement<'_>, b: &Replacement<'_>| {
        a.0 < b.1 && b.0 < a.1 || a.0 == a.1 && b.0 == b.1 && a.0 == b.0
    };
    let mut taken: Vec<Replacement<'_>> = Vec::new();
    let mut applied = 0;
    for edits in suggestions {
        let alone = edits
            .iter()
            .enumerate()
            .all(|(i, a)| edits[i + 1..].iter().all(|b| !clash(a, b)));
        if edits.iter().all(fits)
            && alone
            && edits.iter().all(|a| taken.iter().all(|b| !clash(a, b)))
        {
            taken.extend(edits);
            applied += 1;
        }
    }
    taken.sort_by_key(|(start, end, _)| (*start, *end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, replacement) in taken {
        out.push_str(&text[at..start]);
        out.push_str(replacement);
        at = end;
    }
    out.push_str(&text[at..]);
    (out, applied)
}

#[cfg(test)]
mod tests {
    use super::apply;

    #[test]
    fn a_suggestion_applies_whole_or_not_at_all() {
        let text = "let a = get(k); effect(); del(k);";
        // Rename `get` and remove `del(k);`, and a second suggestion that renames `get`
        // differently and removes `effect();`: the one taken first (`fetch` sorts first) is
        // applied whole, and none of the other, which clashes with it on `get`.
        let first = vec![(8, 11, "get_del"), (26, 33, "")];
        let second = vec![(8, 11, "fetch"), (16, 25, "")];
        let (out, applied) = apply(text, vec![second.clone(), first.clone()]);
        assert_eq!((out.as_str(), applied), ("let a = fetch(k);  del(k);", 1));
        let (out, applied) = apply(text, vec![first.clone(), first.clone()]);
        assert_eq!(
            (out.as_str(), applied),
            ("let a = get_del(k); effect(); ", 1)
        );
        // Two insertions at one point clash; an insertion next to a replacement does not.
        let (out, applied) = apply(
            text,
            vec![vec![(3, 3, "X")], vec![(3, 3, "Y")], vec![(4, 5, "b")]],
        );
        assert_eq!(
            (out.as_str(), applied),
            ("letX b = get(k); effect(); del(k);", 2)
        );
        // An edit out of the text or off a char boundary takes its suggestion with it.
        let (out, applied) = apply(text, vec![vec![(0, 3, "var"), (30, 99, "")]]);
        assert_eq!((out.as_str(), applied), (text, 0));
    }
}
