//! Suppression comments: `// staleguard: allow(rule-a, rule-b) -- reason`, read from the source
//! text (syn drops comments). On a code line it covers that line; on its own line it covers the
//! next code line, or the whole item (fn / impl / mod / ..) that starts there.

use crate::diagnostic::{Diagnostic, Level};
use crate::ir::Sp;
use crate::rules::to_span;
use crate::{LoweredFile, registry};

/// One suppression comment and the lines it covers.
#[derive(Debug, Clone)]
pub struct Suppression {
    pub rules: Vec<String>,
    pub sp: Sp,
    pub first_line: u32,
    pub last_line: u32,
}

const MARK: &str = "staleguard:";

/// Scans a file's text. `items` are the line ranges of items (attributes included).
pub fn scan(text: &str, items: &[(u32, u32)]) -> Vec<Suppression> {
    if !text.contains(MARK) {
        return Vec::new();
    }
    let all: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (idx, line) in all.iter().enumerate() {
        let Some(c) = find_comment(line) else {
            continue;
        };
        let comment = &line[c..];
        let body = comment.trim_start_matches('/').trim_start();
        let Some(rest) = body.strip_prefix(MARK) else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix("allow") else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(rest) = rest.strip_prefix('(') else {
            continue;
        };
        let Some(close) = rest.find(')') else {
            continue;
        };
        let rules: Vec<String> = rest[..close]
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if rules.is_empty() {
            continue;
        }
        let line_no = idx as u32 + 1;
        let col = line[..c].chars().count();
        let sp = Sp {
            line: line_no,
            col: col as u32 + 1,
            end_line: line_no,
            end_col: (col + comment.trim_end().chars().count()) as u32 + 1,
        };
        let own_line = line[..c].trim().is_empty();
        let (first_line, last_line) = if own_line {
            // The next line holding code.
            let mut next = idx + 1;
            while next < all.len() {
                let t = all[next].trim();
                if t.is_empty() || t.starts_with("//") {
                    next += 1;
                } else {
                    break;
                }
            }
            let code_line = next as u32 + 1;
            let item_end = items
                .iter()
                .filter(|(s, _)| *s == code_line)
                .map(|(_, e)| *e)
                .max();
            (code_line, item_end.unwrap_or(code_line))
        } else {
            (line_no, line_no)
        };
        out.push(Suppression {
            rules,
            sp,
            first_line,
            last_line,
        });
    }
    out
}

/// The byte index of a `//` comment start outside string literals (a simple scan).
fn find_comment(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i + 1 < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && b[i + 1] == b'/' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Drops the findings a suppression covers and reports, when `unused-suppression` is enabled,
/// each suppression that covered nothing (or names an unknown rule); a suppression of rules
/// that are all disabled is not reported.
pub(crate) fn apply(
    files: &[LoweredFile],
    out: &mut Vec<Diagnostic>,
    enabled: &dyn Fn(&str) -> bool,
) {
    let mut used = vec![Vec::new(); files.len()];
    for (fi, f) in files.iter().enumerate() {
        used[fi] = vec![false; f.suppressions.len()];
    }
    out.retain(|d| {
        let Some(fi) = files.iter().position(|f| f.path == d.primary.file) else {
            return true;
        };
        let line = d.primary.start.line;
        let mut keep = true;
        for (si, s) in files[fi].suppressions.iter().enumerate() {
            if s.rules.iter().any(|r| r == d.rule) && line >= s.first_line && line <= s.last_line {
                used[fi][si] = true;
                keep = false;
            }
        }
        keep
    });
    if enabled("unused-suppression") {
        for (fi, f) in files.iter().enumerate() {
            for (si, s) in f.suppressions.iter().enumerate() {
                if used[fi][si] {
                    continue;
                }
                let known = s.rules.iter().all(|r| registry::find(r).is_some());
                if known && !s.rules.iter().any(|r| enabled(r)) {
                    continue;
                }
                let message = if known {
                    format!("`allow({})` suppresses nothing", s.rules.join(", "))
                } else {
                    let unknown: Vec<&str> = s
                        .rules
                        .iter()
                        .map(String::as_str)
                        .filter(|r| registry::find(r).is_none())
                        .collect();
                    format!(
                        "unknown rule `{}` in `staleguard: allow(..)`",
                        unknown.join("`, `")
                    )
                };
                out.push(Diagnostic {
                    rule: "unused-suppression",
                    level: Level::Warning,
                    message,
                    primary: to_span(&f.path, &f.lines, s.sp),
                    primary_label: None,
                    labels: Vec::new(),
                    help: Some(
                        "remove the comment, or move it to the line the finding is reported on"
                            .to_string(),
                    ),
                    notes: Vec::new(),
                    function: None,
                });
            }
        }
    }
}
