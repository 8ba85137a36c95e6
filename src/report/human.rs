//! `--format human`: rustc-style diagnostics rendered with codespan-reporting (the only file
//! that imports it), then a summary line.

use std::collections::HashMap;
use std::io::{self, Write};

use codespan_reporting::diagnostic::{Diagnostic, Label, Severity};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::termcolor::Buffer;
use codespan_reporting::term::{self, Config};
use staleguard_rules::Level;

use super::{Report, doc_note, suggestion_line, write_summary};
use crate::analyze::Finding;

pub fn render(report: &Report, color: bool, out: &mut dyn Write) -> io::Result<()> {
    let mut files = Files::default();
    for finding in &report.outcome.findings {
        out.write_all(&rendered(report, finding, color, &mut files))?;
    }
    write_summary(report, out)
}

/// One finding as rustc renders a diagnostic (for `--message-format json`'s `rendered`).
pub fn render_one(report: &Report, finding: &Finding, color: bool) -> String {
    String::from_utf8_lossy(&rendered(report, finding, color, &mut Files::default())).into_owned()
}

fn rendered(report: &Report, finding: &Finding, color: bool, files: &mut Files) -> Vec<u8> {
    let config = Config::default();
    let mut buffer = if color {
        Buffer::ansi()
    } else {
        Buffer::no_color()
    };
    let diagnostic = diagnostic(report, finding, files);
    if term::emit_to_write_style(&mut buffer, &config, &files.files, &diagnostic).is_err() {
        // The span did not fit the text (the file changed under us): fall back to one line.
        let d = &finding.diag;
        let _ = writeln!(
            buffer,
            "{}[{}]: {}\n  --> {}:{}:{}",
            finding.level.as_str(),
            d.rule,
            d.message,
            report.file(finding, &d.primary),
            d.primary.start.line,
            d.primary.start.column
        );
    }
    buffer.into_inner()
}

/// The files shown so far, each added once.
#[derive(Default)]
struct Files {
    files: SimpleFiles<String, String>,
    ids: HashMap<String, usize>,
}

impl Files {
    fn id(&mut self, name: &str, text: impl FnOnce() -> Option<String>) -> Option<usize> {
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        let id = self.files.add(name.to_string(), text()?);
        self.ids.insert(name.to_string(), id);
        Some(id)
    }
}

fn diagnostic(report: &Report, finding: &Finding, files: &mut Files) -> Diagnostic<usize> {
    let d = &finding.diag;
    let severity = match finding.level {
        Level::Error => Severity::Error,
        Level::Warning => Severity::Warning,
        Level::Note => Severity::Note,
    };
    let mut out = Diagnostic::new(severity)
        .with_code(d.rule)
        .with_message(&d.message);
    let mut labels = Vec::new();
    if let Some(source) = &finding.source {
        let id = files
            .id(&report.file(finding, &d.primary), || {
                Some(source.to_string())
            })
            .unwrap_or_default();
        let range = clamp(d.primary.byte_start, d.primary.byte_end, source);
        let range = if range.is_empty() {
            line_range(source, d.primary.start.line, d.primary.start.column, range)
        } else {
            range
        };
        let mut primary = Label::primary(id, range);
        if let Some(message) = &d.primary_label {
            primary = primary.with_message(message);
        }
        labels.push(primary);
        for label in &d.labels {
            // A label in another file of the unit: its text is read again for the snippet.
            let Some(label_id) = files.id(&report.file(finding, &label.span), || {
                finding
                    .root
                    .as_ref()
                    .and_then(|root| std::fs::read_to_string(root.join(&label.span.file)).ok())
            }) else {
                continue;
            };
            let range = label_range(&files.files, label_id, &label.span);
            labels.push(Label::secondary(label_id, range).with_message(&label.message));
        }
    }
    let mut notes: Vec<String> = d
        .notes
        .iter()
        .map(|n| format!("note: {}", report.text(finding, n)))
        .collect();
    if let Some(help) = &d.help {
        notes.push(format!("help: {help}"));
    }
    for s in &d.suggestions {
        notes.push(format!("fix: {}", suggestion_line(s)));
    }
    notes.push(format!("note: {}", doc_note(d.rule)));
    out = out.with_labels(labels).with_notes(notes);
    out
}

fn label_range(
    files: &SimpleFiles<String, String>,
    id: usize,
    span: &staleguard_rules::Span,
) -> std::ops::Range<usize> {
    match files.get(id) {
        Ok(file) => clamp(span.byte_start, span.byte_end, file.source()),
        Err(_) => 0..0,
    }
}

fn clamp(start: usize, end: usize, text: &str) -> std::ops::Range<usize> {
    let end = end.min(text.len());
    let start = start.min(end);
    if text.is_char_boundary(start) && text.is_char_boundary(end) {
        start..end
    } else {
        0..0
    }
}

/// An empty span (as `parse-error` gives) becomes the position its line/column name.
fn line_range(
    text: &str,
    line: u32,
    column: u32,
    fallback: std::ops::Range<usize>,
) -> std::ops::Range<usize> {
    let Some(line_start) = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1) as usize)
        .map(str::len)
        .reduce(|a, b| a + b)
        .or(if line <= 1 { Some(0) } else { None })
    else {
        return fallback;
    };
    let rest = &text[line_start.min(text.len())..];
    let offset: usize = rest
        .chars()
        .take(column.saturating_sub(1) as usize)
        .take_while(|c| *c != '\n')
        .map(char::len_utf8)
        .sum();
    let at = line_start + offset;
    let next = rest[offset..]
        .chars()
        .next()
        .filter(|c| *c != '\n')
        .map_or(0, char::len_utf8);
    at..at + next
}
