//! `--format json`: the versioned schema documented in `docs/json-schema.md` (machine-readable
//! copy in `docs/json-schema.json`).

use std::io::{self, Write};

use serde_json::{Value, json};
use staleguard_rules::{Position, Span};

use super::{Report, counts, help_uri};
use crate::analyze::Finding;

/// Bumped on any incompatible change to the output.
pub const SCHEMA_VERSION: u32 = 1;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let outcome = report.outcome;
    let findings: Vec<Value> = outcome
        .findings
        .iter()
        .map(|f| {
            let d = &f.diag;
            json!({
                "rule": d.rule,
                "level": f.level.as_str(),
                "message": d.message,
                "file": report.file(f, &d.primary),
                "start": position(d.primary.start),
                "end": position(d.primary.end),
                "byte_range": [d.primary.byte_start, d.primary.byte_end],
                "label": d.primary_label,
                "labels": d.labels.iter().map(|l| {
                    let mut v = span(report, f, &l.span);
                    v["message"] = json!(l.message);
                    v
                }).collect::<Vec<_>>(),
                "help": d.help,
                "notes": d.notes.iter().map(|n| report.text(f, n)).collect::<Vec<_>>(),
                "help_uri": help_uri(d.rule),
                "suggestions": d.suggestions.iter().map(|s| json!({
                    "message": s.message,
                    "applicability": s.applicability.as_str(),
                    "edits": s.edits.iter().map(|e| {
                        let mut v = span(report, f, &e.span);
                        v["byte_range"] = json!([e.span.byte_start, e.span.byte_end]);
                        v["replacement"] = json!(e.replacement);
                        v
                    }).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "function": d.function,
                "fingerprint": f.fingerprint,
            })
        })
        .collect();
    let (errors, warnings, notes) = counts(outcome);
    let value = json!({
        "version": SCHEMA_VERSION,
        "tool": { "name": "staleguard", "version": env!("CARGO_PKG_VERSION") },
        "root": report.paths.base.display().to_string(),
        "findings": findings,
        "errors": outcome.errors.iter().map(|e| json!({"path": report.error_path(&e.path), "message": e.message})).collect::<Vec<_>>(),
        "summary": {
            "files": outcome.files,
            "errors": errors,
            "warnings": warnings,
            "notes": notes,
            "skipped": outcome.errors.len() + outcome.findings.iter().filter(|f| f.is_bad_input()).count(),
            "baselined": outcome.baselined,
            "unreached": outcome.unreached.len(),
            "outside_diff": outcome.outside_diff,
        },
    });
    let text = serde_json::to_string_pretty(&value).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

fn position(p: Position) -> Value {
    json!({ "line": p.line, "column": p.column })
}

fn span(report: &Report, f: &Finding, s: &Span) -> Value {
    json!({ "file": report.file(f, s), "start": position(s.start), "end": position(s.end) })
}
