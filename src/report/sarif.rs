//! `--format sarif`: SARIF 2.1.0 as GitHub code scanning ingests it — driver rules with short
//! and full descriptions and help from the rule docs, results with 1-based regions, URIs
//! relative to the workspace root (`%SRCROOT%`), and `partialFingerprints`.

use std::io::{self, Write};

use serde_json::{Value, json};
use staleguard_rules::{Level, Span, registry};

use super::{Report, doc_note};
use crate::commands::dedent;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let rules: Vec<Value> = registry::all()
        .iter()
        .map(|r| {
            let doc = dedent(r.doc);
            let full = if doc.is_empty() {
                r.summary.to_string()
            } else {
                first_paragraph(&doc)
            };
            let markdown = if doc.is_empty() {
                format!("{}\n\n{}", r.summary, doc_note(r.name))
            } else {
                doc
            };
            json!({
                "id": r.name,
                "name": camel(r.name),
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": full },
                "help": { "text": markdown, "markdown": markdown },
                "defaultConfiguration": { "level": level(r.default_level) },
                "properties": { "tags": ["staleguard", "concurrency"] },
            })
        })
        .collect();
    let results: Vec<Value> = report
        .outcome
        .findings
        .iter()
        .map(|f| {
            let d = &f.diag;
            let mut text = d.message.clone();
            if let Some(help) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(help);
            }
            let mut result = json!({
                "ruleId": d.rule,
                "level": level(f.level),
                "message": { "text": text },
                "locations": [ location(&d.primary, d.function.as_deref()) ],
                "partialFingerprints": { "staleguard/v1": f.fingerprint },
            });
            if let Some(index) = registry::all().iter().position(|r| r.name == d.rule) {
                result["ruleIndex"] = json!(index);
            }
            if !d.labels.is_empty() {
                result["relatedLocations"] = d
                    .labels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        json!({
                            "id": i + 1,
                            "physicalLocation": physical(&l.span),
                            "message": { "text": l.message },
                        })
                    })
                    .collect();
            }
            result
        })
        .collect();
    let notifications: Vec<Value> = report
        .outcome
        .errors
        .iter()
        .map(|e| {
            json!({
                "level": "error",
                "message": { "text": format!("{}: {}", e.path, e.message) },
            })
        })
        .collect();
    let root_uri = format!(
        "file://{}/",
        report.root.display().to_string().trim_end_matches('/')
    );
    let value = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "staleguard",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://example.invalid/staleguard",
                "rules": rules,
            } },
            "originalUriBaseIds": { "%SRCROOT%": { "uri": root_uri } },
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": report.outcome.errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    });
    let text = serde_json::to_string_pretty(&value).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

fn level(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Note => "note",
    }
}

/// The primary location, with the enclosing function as a logical location when known.
fn location(span: &Span, function: Option<&str>) -> Value {
    let mut location = json!({ "physicalLocation": physical(span) });
    if let Some(function) = function {
        location["logicalLocations"] =
            json!([{ "fullyQualifiedName": function, "kind": "function" }]);
    }
    location
}

fn physical(span: &Span) -> Value {
    let mut region = json!({
        "startLine": span.start.line.max(1),
        "startColumn": span.start.column.max(1),
    });
    if span.end.line >= span.start.line && span.end != span.start {
        region["endLine"] = json!(span.end.line);
        region["endColumn"] = json!(span.end.column.max(1));
    }
    json!({
        "artifactLocation": { "uri": uri(&span.file), "uriBaseId": "%SRCROOT%" },
        "region": region,
    })
}

/// Percent-encodes the characters a relative URI cannot hold.
fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The doc's first paragraph that is not a heading, on one line.
fn first_paragraph(doc: &str) -> String {
    let paragraph = doc
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#'))
        .unwrap_or(doc);
    paragraph.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `check-before-lock` → `CheckBeforeLock`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
