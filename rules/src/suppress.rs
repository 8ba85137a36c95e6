//! Suppression comments: `// staleguard: allow(rule-a, rule-b) -- reason` (or the same in a
//! `/* .. */` block comment), read from the source text (syn drops comments).
//!
//! - After code on a line, it covers that line.
//! - On its own line, it covers the next line of code — or the whole item (fn / impl / mod /
//!   ..) whose header that line is in: its doc comments and attributes count as the header, so
//!   the comment may sit above `/// doc`, between the doc comment and `fn`, or after
//!   `#[attr]`.
//! - As an inner doc comment (`//! staleguard: allow(..)`), or on the file's first line, it
//!   covers the whole file.
//!
//! `parse-error` cannot be suppressed. Each rule of a comment that suppresses nothing is
//! reported on its own as `unused-suppression`.

use crate::diagnostic::{Applicability, Diagnostic, Edit, Level, Suggestion};
use crate::ir::Sp;
use crate::lexical::{Comment, comments};
use crate::rules::to_span;
use crate::{LoweredFile, registry};

/// One suppression comment and the lines it covers.
#[derive(Debug, Clone)]
pub struct Suppression {
    /// Each named rule with its span inside the comment, and what to delete to drop it from
    /// the list (the name and one comma and the spaces beside it).
    pub rules: Vec<(String, Sp, Sp)>,
    /// The whole comment.
    pub sp: Sp,
    /// What to delete to remove the comment: its whole line when it stands alone, else the
    /// comment and the spaces before it.
    pub removal: Sp,
    pub first_line: u32,
    pub last_line: u32,
}

impl Suppression {
    fn covers(&self, line: u32) -> bool {
        line >= self.first_line && line <= self.last_line
    }
}

const MARK: &str = "staleguard:";

/// Scans a file's text. `items` are the items' (first line, keyword line, last line).
pub fn scan(text: &str, items: &[(u32, u32, u32)]) -> Vec<Suppression> {
    if !text.contains(MARK) {
        return Vec::new();
    }
    let comments = comments(text);
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |byte: usize| line_starts.partition_point(|s| *s <= byte) as u32;
    let col_of = |byte: usize| {
        let start = line_starts[line_of(byte) as usize - 1];
        text[start..byte].chars().count() as u32 + 1
    };
    // A line is code when it holds something outside plain (non-doc) comments.
    let mut code = vec![false; line_starts.len() + 1];
    {
        let mut c = comments
            .iter()
            .filter(|c| !c.outer_doc && !c.inner_doc)
            .peekable();
        let mut i = 0;
        let bytes = text.as_bytes();
        while i < bytes.len() {
            if let Some(cm) = c.peek()
                && cm.start == i
            {
                i = cm.end;
                c.next();
                continue;
            }
            if !bytes[i].is_ascii_whitespace() {
                code[line_of(i) as usize] = true;
            }
            i += 1;
        }
    }
    let mut out = Vec::new();
    for cm in &comments {
        let Some(rules) = parse_allow(text, cm) else {
            continue;
        };
        let line = line_of(cm.start);
        let end_line = line_of(cm.end.saturating_sub(1).max(cm.start));
        let sp = Sp {
            line,
            col: col_of(cm.start),
            end_line,
            end_col: col_of(cm.end),
        };
        let sp_of = |a: usize, b: usize| Sp {
            line: line_of(a),
            col: col_of(a),
            end_line: line_of(b),
            end_col: col_of(b),
        };
        let starts: Vec<usize> = rules.iter().map(|(_, at)| *at).collect();
        let rules: Vec<(String, Sp, Sp)> = rules
            .iter()
            .enumerate()
            .map(|(i, (name, at))| {
                let end = at + name.len();
                // Up to the next name, or from the end of the previous one.
                let drop = match (starts.get(i + 1), i.checked_sub(1)) {
                    (Some(next), _) => sp_of(*at, *next),
                    (None, Some(prev)) => sp_of(starts[prev] + rules[prev].0.len(), end),
                    (None, None) => sp_of(*at, end),
                };
                (name.clone(), sp_of(*at, end), drop)
            })
            .collect();
        let line_start = line_starts[line as usize - 1];
        let own_line = text[line_start..cm.start].trim().is_empty();
        let line_end = text[cm.end..].find('\n').map_or(text.len(), |n| cm.end + n);
        let removal = if own_line && text[cm.end..line_end].trim().is_empty() {
            // The whole line, with its line break.
            sp_of(line_start, (line_end + 1).min(text.len()))
        } else {
            let before = text[line_start..cm.start].trim_end().len() + line_start;
            sp_of(before, cm.end)
        };
        let (first_line, last_line) = if cm.inner_doc || (line == 1 && own_line) {
            (1, u32::MAX)
        } else if !own_line {
            (line, line)
        } else {
            // The next line holding code (doc comments and attributes are code).
            let mut next = end_line + 1;
            while (next as usize) < code.len() && !code[next as usize] {
                next += 1;
            }
            // The item whose header (doc comments, attributes, keyword line) holds that line.
            match items
                .iter()
                .filter(|(start, head, _)| *start <= next && next <= *head)
                .max_by_key(|(_, _, end)| *end)
            {
                Some((start, _, end)) => ((*start).min(next), *end),
                None => (next, next),
            }
        };
        out.push(Suppression {
            rules,
            sp,
            removal,
            first_line,
            last_line,
        });
    }
    out
}

/// The rules a comment allows, each with the byte offset of its name, when the comment is a
/// suppression (`staleguard: allow(a, b)`, whatever follows).
fn parse_allow(text: &str, cm: &Comment) -> Option<Vec<(String, usize)>> {
    let body = &text[cm.body..cm.body_end];
    let rest = body.trim_start().strip_prefix(MARK)?;
    let rest = rest.trim_start().strip_prefix("allow")?.trim_start();
    let list = rest.strip_prefix('(')?;
    let close = list.find(')')?;
    // `list` is a suffix of `body`.
    let list_at = cm.body + body.len() - list.len();
    let mut rules = Vec::new();
    let mut offset = 0;
    for part in list[..close].split(',') {
        let name = part.trim();
        if !name.is_empty() {
            let at = list_at + offset + (part.len() - part.trim_start().len());
            rules.push((name.to_string(), at));
        }
        offset += part.len() + 1;
    }
    (!rules.is_empty()).then_some(rules)
}

/// Drops the findings a suppression covers (never a `parse-error`) and reports, when
/// `unused-suppression` is enabled, each named rule that covered nothing: unknown, not
/// suppressible, or with no finding in reach. A rule that is disabled is not reported.
pub(crate) fn apply(
    files: &[LoweredFile],
    out: &mut Vec<Diagnostic>,
    enabled: &dyn Fn(&str) -> bool,
) {
    let mut used: Vec<Vec<Vec<bool>>> = files
        .iter()
        .map(|f| {
            f.suppressions
                .iter()
                .map(|s| vec![false; s.rules.len()])
                .collect()
        })
        .collect();
    out.retain(|d| {
        if d.rule == "parse-error" {
            return true;
        }
        let Some(fi) = files.iter().position(|f| f.path == d.primary.file) else {
            return true;
        };
        let line = d.primary.start.line;
        let mut keep = true;
        for (si, s) in files[fi].suppressions.iter().enumerate() {
            if !s.covers(line) {
                continue;
            }
            for (ri, (rule, _, _)) in s.rules.iter().enumerate() {
                if rule == d.rule {
                    used[fi][si][ri] = true;
                    keep = false;
                }
            }
        }
        keep
    });
    if !enabled("unused-suppression") {
        return;
    }
    for (fi, f) in files.iter().enumerate() {
        for (si, s) in f.suppressions.iter().enumerate() {
            for (ri, (rule, rule_sp, drop)) in s.rules.iter().enumerate() {
                if used[fi][si][ri] {
                    continue;
                }
                let known = registry::find(rule).is_some();
                let message = match registry::find(rule) {
                    None => format!("unknown rule `{rule}` in `staleguard: allow(..)`"),
                    Some(_) if rule == "parse-error" || rule == "unused-suppression" => {
                        format!("`{rule}` cannot be suppressed")
                    }
                    Some(_) if !enabled(rule) => continue,
                    Some(_) => format!("`allow({rule})` suppresses nothing"),
                };
                // One rule named: the whole comment; several: the unused rule's name. The fix
                // removes the comment when no rule of it is used, else the rule from the list.
                let sp = if s.rules.len() == 1 { s.sp } else { *rule_sp };
                let all_unused = used[fi][si].iter().all(|u| !u);
                let (fix, removal) = if all_unused {
                    ("remove the comment", s.removal)
                } else {
                    ("remove the rule from the list", *drop)
                };
                out.push(Diagnostic {
                    rule: "unused-suppression",
                    level: Level::Warning,
                    message,
                    primary: to_span(&f.path, &f.lines, sp),
                    primary_label: None,
                    labels: Vec::new(),
                    help: Some(if s.rules.len() == 1 {
                        "remove the comment, or move it to the line the finding is reported on"
                            .to_string()
                    } else {
                        format!("remove `{rule}` from the list")
                    }),
                    notes: Vec::new(),
                    function: None,
                    suggestions: vec![Suggestion {
                        message: fix.to_string(),
                        // An unknown name may be a typo of the rule meant: a person decides.
                        applicability: if known {
                            Applicability::MachineApplicable
                        } else {
                            Applicability::MaybeIncorrect
                        },
                        edits: vec![Edit {
                            span: to_span(&f.path, &f.lines, removal),
                            replacement: String::new(),
                        }],
                    }],
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan;
    use crate::lexical::comments;

    fn lines(text: &str, items: &[(u32, u32, u32)]) -> Vec<(Vec<String>, u32, u32)> {
        scan(text, items)
            .into_iter()
            .map(|s| {
                (
                    s.rules.into_iter().map(|(r, _, _)| r).collect(),
                    s.first_line,
                    s.last_line,
                )
            })
            .collect()
    }

    #[test]
    fn comments_inside_literals_are_not_comments() {
        let text = "let a = \"// x\"; let b = r#\"/* y \"# ; let c = '\"'; // z\nfn f<'a>() {} /* w /* nested */ */\n";
        let found: Vec<&str> = comments(text)
            .iter()
            .map(|c| &text[c.start..c.end])
            .collect();
        assert_eq!(found, ["// z", "/* w /* nested */ */"]);
    }

    #[test]
    fn item_headers_count_doc_comments_and_attributes() {
        // Items: (first line, keyword line, last line).
        let items = [(2, 4, 6)];
        let above = "// staleguard: allow(a) -- why\n/// doc\n#[attr]\nfn f() {\n    x();\n}\n";
        assert_eq!(
            lines(&format!("\n{above}"), &[(3, 5, 7)]),
            [(vec!["a".to_string()], 3, 7)]
        );
        let between = "\n/// doc\n// staleguard: allow(a) -- why\nfn f() {\n    x();\n}\n";
        assert_eq!(lines(between, &items), [(vec!["a".to_string()], 2, 6)]);
        let block = "\n/// doc\n/* staleguard: allow(a, b) */\nfn f() {\n    x();\n}\n";
        assert_eq!(
            lines(block, &items),
            [(vec!["a".to_string(), "b".to_string()], 2, 6)]
        );
    }

    #[test]
    fn file_level_forms() {
        let inner = "//! Module.\n//! staleguard: allow(a) -- generated\n\nfn f() {}\n";
        assert_eq!(lines(inner, &[]), [(vec!["a".to_string()], 1, u32::MAX)]);
        let first = "// staleguard: allow(a) -- generated\nfn f() {}\n";
        assert_eq!(lines(first, &[]), [(vec!["a".to_string()], 1, u32::MAX)]);
        let trailing = "fn f() {} // staleguard: allow(a)\nfn g() {}\n";
        assert_eq!(lines(trailing, &[]), [(vec!["a".to_string()], 1, 1)]);
    }

    #[test]
    fn rule_spans_point_at_each_name() {
        let text = "x(); // staleguard: allow(a,  bee) -- why\n";
        let s = &scan(text, &[])[0];
        let col = |name: &str| text.find(name).unwrap() as u32 + 1;
        assert_eq!(s.rules[0].1.col, col("a,"));
        assert_eq!(s.rules[1].1.col, col("bee"));
        assert_eq!(s.rules[1].1.end_col, col("bee") + 3);
        assert_eq!(s.sp.col, col("//"));
    }
}
