//! `--format gitlab`: a GitLab Code Quality report (a JSON array of Code Climate issues):
//! description, check name, severity, a fingerprint that includes the location (GitLab needs
//! each one unique in a report), and the path relative to the repository root with the first
//! line.

use std::io::{self, Write};

use serde_json::{Value, json};
use staleguard_rules::Level;

use super::Report;
use crate::baseline::fnv;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let mut issues: Vec<Value> = report
        .outcome
        .findings
        .iter()
        .map(|f| {
            let d = &f.diag;
            let path = report.file(f, &d.primary);
            let severity = match f.level {
                _ if f.is_bad_input() => "critical",
                Level::Error => "major",
                Level::Warning => "minor",
                Level::Note => "info",
            };
            let line = d.primary.start.line.max(1);
            let column = d.primary.start.column.to_string();
            let mut body = String::new();
            for note in &d.notes {
                body.push_str(&format!("note: {}\n", report.text(f, note)));
            }
            if let Some(help) = &d.help {
                body.push_str(&format!("help: {help}\n"));
            }
            json!({
                "type": "issue",
                "engine_name": "staleguard",
                "check_name": d.rule,
                "description": format!("{} [{}]", d.message, d.rule),
                "content": { "body": body },
                "categories": ["Bug Risk"],
                "severity": severity,
                "fingerprint": fnv(&[&f.fingerprint, &path, &line.to_string(), &column]),
                "location": {
                    "path": path,
                    "lines": { "begin": line, "end": d.primary.end.line.max(line) },
                },
            })
        })
        .collect();
    // Inputs that could not be read are issues too: a job reading only this file sees them.
    issues.extend(report.outcome.errors.iter().map(|e| {
        let path = report.error_path(&e.path);
        json!({
            "type": "issue",
            "engine_name": "staleguard",
            "check_name": "input-error",
            "description": e.message,
            "categories": ["Bug Risk"],
            "severity": "critical",
            "fingerprint": fnv(&["input-error", &path, &e.message]),
            "location": { "path": path, "lines": { "begin": 1 } },
        })
    }));
    let text = serde_json::to_string_pretty(&issues).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}
