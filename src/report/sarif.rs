//! `--format sarif`: SARIF 2.1.0 as GitHub code scanning renders it — driver rules with short
//! and full descriptions, help text and Markdown from the rule docs, `helpUri` and a precision;
//! results with 1-based regions, URIs relative to the repository root (`%SRCROOT%`), the
//! evidence as related locations linked from the message (`[state read here](1)`), the notes
//! and help in the message, and `partialFingerprints`; `executionSuccessful` false when the run
//! could not do its whole job. Validated against the official schema by the tests.

use std::io::{self, Write};

use serde_json::{Value, json};
use staleguard_rules::{Level, Span, registry};

use super::{Report, doc_note, help_uri, home_page};
use crate::analyze::Finding;
use crate::commands::dedent;

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// How often a rule's findings are right, as GitHub's `precision` property: from the triaged
/// findings on real code (`tools/realcode/verdicts.tsv`: true / (true + false) over the
/// findings of all three halves of the real-code set, as `tools/realcode/realcode.py --half H
/// --findings` counts them; `high` from 80%, `medium` from 40% or with under ten triaged
/// findings, `low` below). The two rules the analyzer reports itself are facts.
pub const PRECISION: &[(&str, &str)] = &[
    ("check-before-lock", "low"),              // 129 / 357
    ("rpc-in-transaction", "medium"),          // 101 / 171
    ("token-deleted-before-effect", "medium"), // 67 / 111
    ("timeout-without-operation-id", "low"),   // 8 / 31
    ("blind-callback-write", "low"),           // 19 / 50
    ("unguarded-state-transition", "medium"),  // 155 / 336
    ("timeout-as-failure", "medium"),          // 23 / 32
    ("lease-without-fencing", "medium"),       // 13 / 22
    ("processing-without-lease", "medium"),    // 15 / 37
    ("duplicate-as-failure", "medium"),        // 1 / 3
    ("conflict-dropped", "medium"),            // 3 / 7
    ("whole-version-compare", "medium"),       // 5 / 8
    ("parse-error", "very-high"),
    ("unused-suppression", "very-high"),
];

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
            let precision = PRECISION
                .iter()
                .find(|(name, _)| *name == r.name)
                .map_or("medium", |(_, p)| *p);
            let mut rule = json!({
                "id": r.name,
                "name": camel(r.name),
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": full },
                "help": { "text": markdown, "markdown": markdown },
                "defaultConfiguration": { "level": level(r.default_level) },
                "properties": {
                    "tags": ["staleguard", "concurrency"],
                    "precision": precision,
                },
            });
            if let Some(uri) = help_uri(r.name) {
                rule["helpUri"] = json!(uri);
            }
            rule
        })
        .collect();
    let results: Vec<Value> = report
        .outcome
        .findings
        .iter()
        .map(|f| result(report, f))
        .collect();
    let notifications: Vec<Value> = report
        .outcome
        .errors
        .iter()
        .map(|e| {
            json!({
                "level": "error",
                "message": { "text": format!("{}: {}", report.error_path(&e.path), e.message) },
            })
        })
        .collect();
    let root_uri = format!(
        "file://{}/",
        uri(report
            .paths
            .base
            .display()
            .to_string()
            .trim_end_matches('/'))
    );
    let mut driver = json!({
        "name": "staleguard",
        "version": env!("CARGO_PKG_VERSION"),
        "semanticVersion": env!("CARGO_PKG_VERSION"),
        "rules": rules,
    });
    if let Some(home) = home_page() {
        driver["informationUri"] = json!(home);
    }
    let value = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": driver },
            "originalUriBaseIds": { "%SRCROOT%": { "uri": root_uri } },
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": !report.trouble,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    });
    let text = serde_json::to_string_pretty(&value).map_err(io::Error::other)?;
    writeln!(out, "{text}")
}

/// One result: the message links each piece of evidence to its related location.
fn result(report: &Report, f: &Finding) -> Value {
    let d = &f.diag;
    let mut text = escape(&d.message);
    if !d.labels.is_empty() {
        let links: Vec<String> = d
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| format!("[{}]({})", escape(&l.message), i + 1))
            .collect();
        text.push_str(&format!(" ({})", links.join(", ")));
    }
    for note in &d.notes {
        text.push_str("\nnote: ");
        text.push_str(&escape(&report.text(f, note)));
    }
    if let Some(help) = &d.help {
        text.push_str("\nhelp: ");
        text.push_str(&escape(help));
    }
    let mut result = json!({
        "ruleId": d.rule,
        "level": level(f.level),
        "message": { "text": text },
        "locations": [ location(report, f, &d.primary) ],
        "partialFingerprints": { "staleguard/v1": f.fingerprint },
    });
    if let Some(index) = registry::all().iter().position(|r| r.name == d.rule) {
        result["ruleIndex"] = json!(index);
    }
    if !d.suggestions.is_empty() {
        result["fixes"] = d
            .suggestions
            .iter()
            .map(|s| {
                let changes: Vec<Value> = s
                    .edits
                    .iter()
                    .map(|e| {
                        let at = physical(report, f, &e.span);
                        let mut region = at["region"].clone();
                        // An insertion: an empty region at its position.
                        if e.span.byte_start == e.span.byte_end {
                            region["endLine"] = region["startLine"].clone();
                            region["endColumn"] = region["startColumn"].clone();
                        }
                        json!({
                            "artifactLocation": at["artifactLocation"],
                            "replacements": [{
                                "deletedRegion": region,
                                "insertedContent": { "text": e.replacement },
                            }],
                        })
                    })
                    .collect();
                json!({
                    "description": { "text": super::suggestion_line(s) },
                    "artifactChanges": changes,
                    "properties": { "applicability": s.applicability.as_str() },
                })
            })
            .collect();
    }
    if !d.labels.is_empty() {
        result["relatedLocations"] = d
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "id": i + 1,
                    "physicalLocation": physical(report, f, &l.span),
                    "message": { "text": l.message },
                })
            })
            .collect();
    }
    result
}

fn level(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Note => "note",
    }
}

/// The primary location, with the enclosing function as a logical location when known.
fn location(report: &Report, f: &Finding, span: &Span) -> Value {
    let mut location = json!({ "physicalLocation": physical(report, f, span) });
    if let Some(label) = &f.diag.primary_label {
        location["message"] = json!({ "text": label });
    }
    if let Some(function) = &f.diag.function {
        location["logicalLocations"] =
            json!([{ "fullyQualifiedName": function, "kind": "function" }]);
    }
    location
}

fn physical(report: &Report, f: &Finding, span: &Span) -> Value {
    let mut region = json!({
        "startLine": span.start.line.max(1),
        "startColumn": span.start.column.max(1),
    });
    if span.end.line >= span.start.line && span.end != span.start {
        region["endLine"] = json!(span.end.line);
        region["endColumn"] = json!(span.end.column.max(1));
    }
    let shown = report.file(f, span);
    let artifact = if shown.starts_with('/') {
        json!({ "uri": format!("file://{}", uri(&shown)) })
    } else {
        json!({ "uri": uri(&shown), "uriBaseId": "%SRCROOT%" })
    };
    json!({ "artifactLocation": artifact, "region": region })
}

/// Escapes the brackets of message text, which SARIF would read as links.
fn escape(text: &str) -> String {
    text.replace('[', "\\[").replace(']', "\\]")
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
