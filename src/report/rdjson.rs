//! `--format rdjsonl`: reviewdog's Diagnostic Format, one JSON object per line: message,
//! location (path relative to the repository root, 1-based lines and UTF-8 byte columns),
//! severity, source, the rule as `code` with its documentation URL, the evidence as related
//! locations, and suggestions where a finding has a fix.

use std::io::{self, Write};

use serde_json::{Value, json};
use staleguard_rules::{Level, Span};

use super::{Report, help_uri};
use crate::analyze::Finding;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for f in &report.outcome.findings {
        let d = &f.diag;
        let mut message = d.message.clone();
        for note in &d.notes {
            message.push_str(&format!("\nnote: {}", report.text(f, note)));
        }
        if let Some(help) = &d.help {
            message.push_str(&format!("\nhelp: {help}"));
        }
        for s in &d.suggestions {
            message.push_str(&format!("\nfix: {}", super::suggestion_line(s)));
        }
        let mut code = json!({ "value": d.rule });
        if let Some(url) = help_uri(d.rule) {
            code["url"] = json!(url);
        }
        let mut line = json!({
            "message": message,
            "location": location(report, f, &d.primary),
            "severity": match f.level {
                Level::Error => "ERROR",
                Level::Warning => "WARNING",
                Level::Note => "INFO",
            },
            "source": { "name": "staleguard" },
            "code": code,
        });
        if !d.labels.is_empty() {
            line["related_locations"] = d
                .labels
                .iter()
                .map(|l| json!({ "message": l.message, "location": location(report, f, &l.span) }))
                .collect();
        }
        let suggestions = suggestions(report, f);
        if !suggestions.is_empty() {
            line["suggestions"] = json!(suggestions);
        }
        writeln!(
            out,
            "{}",
            serde_json::to_string(&line).map_err(io::Error::other)?
        )?;
    }
    for e in &report.outcome.errors {
        let line = json!({
            "message": e.message,
            "location": { "path": report.error_path(&e.path) },
            "severity": "ERROR",
            "source": { "name": "staleguard" },
            "code": { "value": "input-error" },
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string(&line).map_err(io::Error::other)?
        )?;
    }
    Ok(())
}

fn location(report: &Report, f: &Finding, span: &Span) -> Value {
    json!({ "path": report.file(f, span), "range": range(f, span) })
}

/// A span's range with UTF-8 byte columns when the file's text is at hand (the primary file),
/// else its character columns.
fn range(f: &Finding, span: &Span) -> Value {
    let text = f
        .source
        .as_deref()
        .filter(|_| span.file == f.diag.primary.file);
    let column = |byte: usize, chars: u32| match text {
        Some(t) if byte <= t.len() && t.is_char_boundary(byte) => {
            let line_start = t[..byte].rfind('\n').map_or(0, |i| i + 1);
            (byte - line_start) as u32 + 1
        }
        _ => chars,
    };
    json!({
        "start": { "line": span.start.line, "column": column(span.byte_start, span.start.column) },
        "end": { "line": span.end.line, "column": column(span.byte_end, span.end.column) },
    })
}

/// The finding's suggested edits, in reviewdog's form (the applicability is in the message:
/// the format has no field for it).
fn suggestions(_report: &Report, f: &Finding) -> Vec<Value> {
    f.diag
        .suggestions
        .iter()
        .flat_map(|s| &s.edits)
        .map(|e| json!({ "range": range(f, &e.span), "text": e.replacement }))
        .collect()
}
