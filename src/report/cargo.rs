//! `--message-format json`: cargo's `compiler-message` JSON lines with rustc's diagnostic
//! shape, so editors (rust-analyzer's `check.overrideCommand`) and tools that read clippy's
//! output show findings unchanged. Each span has byte offsets, 1-based lines and columns, the
//! line texts, whether it is primary, its label, and a suggested replacement where the finding
//! has a fix; notes and help are `children`; `rendered` is the human rendering. Paths are
//! relative to the Cargo workspace root, as cargo gives them. A `build-finished` line closes.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use serde_json::{Value, json};
use staleguard_rules::{Applicability, Level, Span};

use super::{Report, doc_note, human};
use crate::analyze::Finding;

pub fn render(report: &Report, ansi: bool, out: &mut dyn Write) -> io::Result<()> {
    let mut texts: HashMap<(Option<&Path>, String), Option<String>> = HashMap::new();
    for f in &report.outcome.findings {
        let d = &f.diag;
        let mut text_of = |span: &Span| -> Option<String> {
            if span.file == d.primary.file
                && let Some(source) = &f.source
            {
                return Some(source.to_string());
            }
            texts
                .entry((f.root.as_deref(), span.file.clone()))
                .or_insert_with(|| {
                    let root = f.root.as_deref()?;
                    std::fs::read_to_string(root.join(&span.file)).ok()
                })
                .clone()
        };
        let mut spans = vec![span(
            &d.primary,
            true,
            d.primary_label.as_deref(),
            &mut text_of,
        )];
        for label in &d.labels {
            spans.push(span(&label.span, false, Some(&label.message), &mut text_of));
        }
        let mut children: Vec<Value> = d
            .notes
            .iter()
            .map(|n| child("note", &report.text(f, n)))
            .collect();
        if let Some(help) = &d.help {
            children.push(child("help", help));
        }
        for s in &d.suggestions {
            // As rustc: a `help` child whose spans carry the replacement.
            let mut help = child("help", &s.message);
            help["spans"] = s
                .edits
                .iter()
                .map(|e| {
                    let mut v = span(&e.span, true, None, &mut text_of);
                    v["suggested_replacement"] = json!(e.replacement);
                    v["suggestion_applicability"] = json!(match s.applicability {
                        Applicability::MachineApplicable => "MachineApplicable",
                        Applicability::MaybeIncorrect => "MaybeIncorrect",
                    });
                    v
                })
                .collect();
            children.push(help);
        }
        children.push(child("note", &doc_note(d.rule)));
        let message = json!({
            "$message_type": "diagnostic",
            "message": d.message,
            "code": { "code": format!("staleguard::{}", d.rule), "explanation": null },
            "level": match f.level {
                Level::Error => "error",
                Level::Warning => "warning",
                Level::Note => "note",
            },
            "spans": spans,
            "children": children,
            "rendered": human::render_one(report, f, ansi),
        });
        let (package_id, manifest, target) = origin(f);
        let line = json!({
            "reason": "compiler-message",
            "package_id": package_id,
            "manifest_path": manifest,
            "target": target,
            "message": message,
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string(&line).map_err(io::Error::other)?
        )?;
    }
    let done = json!({ "reason": "build-finished", "success": !report.trouble && !report.outcome.findings.iter().any(|f| f.level == Level::Error) });
    writeln!(
        out,
        "{}",
        serde_json::to_string(&done).map_err(io::Error::other)?
    )
}

/// The package and target the finding's file is compiled in (for plain paths, a stand-in
/// named after the file).
fn origin(f: &Finding) -> (String, String, Value) {
    match &f.origin {
        Some(o) => (
            o.package_id.clone(),
            o.manifest.display().to_string(),
            json!({
                "name": o.target.name,
                "kind": o.target.kind,
                "crate_types": o.target.kind.iter().map(|k| match k.as_str() {
                    "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro" => k.as_str(),
                    _ => "bin",
                }).collect::<Vec<_>>(),
                "src_path": o.target.src_path.display().to_string(),
                "edition": o.target.edition,
                "doc": true,
                "doctest": false,
                "test": true,
            }),
        ),
        None => {
            let root = f.root.as_deref().unwrap_or(Path::new("."));
            let file = root.join(&f.diag.primary.file);
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().replace('-', "_"))
                .unwrap_or_default();
            (
                format!("path+file://{}#{stem}@0.0.0", root.display()),
                String::new(),
                json!({
                    "name": stem,
                    "kind": ["lib"],
                    "crate_types": ["lib"],
                    "src_path": file.display().to_string(),
                    "edition": "2021",
                    "doc": false,
                    "doctest": false,
                    "test": false,
                }),
            )
        }
    }
}

fn child(level: &str, message: &str) -> Value {
    json!({
        "message": message,
        "code": null,
        "level": level,
        "spans": [],
        "children": [],
        "rendered": null,
    })
}

/// One span in rustc's shape: the lines it covers with the highlighted columns.
fn span(
    s: &Span,
    primary: bool,
    label: Option<&str>,
    text_of: &mut impl FnMut(&Span) -> Option<String>,
) -> Value {
    let lines: Vec<Value> = text_of(s)
        .map(|text| {
            text.split('\n')
                .enumerate()
                .skip(s.start.line.saturating_sub(1) as usize)
                .take((s.end.line.max(s.start.line) - s.start.line + 1) as usize)
                .map(|(i, line)| {
                    let n = i as u32 + 1;
                    let width = line.trim_end_matches('\r').chars().count() as u32 + 1;
                    let start = if n == s.start.line { s.start.column } else { 1 };
                    let end = if n == s.end.line { s.end.column } else { width };
                    json!({
                        "text": line.trim_end_matches('\r'),
                        "highlight_start": start,
                        "highlight_end": end.max(start),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "file_name": s.file,
        "byte_start": s.byte_start,
        "byte_end": s.byte_end,
        "line_start": s.start.line,
        "line_end": s.end.line.max(s.start.line),
        "column_start": s.start.column,
        "column_end": if s.end.line > s.start.line || s.end.column >= s.start.column { s.end.column } else { s.start.column },
        "is_primary": primary,
        "text": lines,
        "label": label,
        "suggested_replacement": null,
        "suggestion_applicability": null,
        "expansion": null,
    })
}
