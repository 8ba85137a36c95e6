//! `--format github`: GitHub Actions workflow commands (`::error file=..,line=..::message`),
//! which the runner turns into annotations on the pull request. Paths are relative to the
//! repository root, as the runner expects.

use std::io::{self, Write};

use staleguard_rules::Level;

use super::Report;

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    for f in &report.outcome.findings {
        let d = &f.diag;
        let command = match f.level {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "notice",
        };
        let mut message = d.message.clone();
        for note in &d.notes {
            message.push_str("\nnote: ");
            message.push_str(&report.text(f, note));
        }
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        writeln!(
            out,
            "::{command} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            property(&report.file(f, &d.primary)),
            d.primary.start.line,
            d.primary.start.column,
            d.primary.end.line.max(d.primary.start.line),
            d.primary.end.column,
            property(&format!("staleguard({})", d.rule)),
            data(&message)
        )?;
    }
    for e in &report.outcome.errors {
        writeln!(
            out,
            "::error file={}::{}",
            property(&report.error_path(&e.path)),
            data(&e.message)
        )?;
    }
    super::write_summary(report, out)
}

/// Escapes a command's message.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a command property value.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}
