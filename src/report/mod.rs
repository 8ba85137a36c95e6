//! Rendering a run's outcome. One module per output format behind [`Format`]; findings arrive
//! as data ([`Report`]) and each format writes them to the sink it is given.

mod github;
mod human;
mod json;
mod sarif;
mod short;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use staleguard_rules::Level;

use crate::analyze::Outcome;

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human { color: bool },
    Short,
    Json,
    Sarif,
    Github,
}

/// What a format renders.
pub struct Report<'a> {
    pub outcome: &'a Outcome,
    /// Paths in findings are relative to this directory.
    pub root: &'a Path,
    pub elapsed: Duration,
}

impl Format {
    /// Writes the whole report.
    pub fn render(self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        match self {
            Format::Human { color } => human::render(report, color, out),
            Format::Short => short::render(report, out),
            Format::Json => json::render(report, out),
            Format::Sarif => sarif::render(report, out),
            Format::Github => github::render(report, out),
        }
    }

    /// Whether the format is meant for programs (statistics then go to standard error).
    pub fn is_machine(self) -> bool {
        matches!(self, Format::Json | Format::Sarif)
    }
}

/// Findings per rule with their level, in rule order.
pub fn statistics(outcome: &Outcome) -> BTreeMap<&'static str, (Level, usize)> {
    let mut stats: BTreeMap<&'static str, (Level, usize)> = BTreeMap::new();
    for f in &outcome.findings {
        let entry = stats.entry(f.diag.rule).or_insert((f.level, 0));
        entry.0 = entry.0.max(f.level);
        entry.1 += 1;
    }
    stats
}

/// Writes the `--statistics` table.
pub fn write_statistics(outcome: &Outcome, out: &mut dyn Write) -> io::Result<()> {
    let stats = statistics(outcome);
    let width = stats.keys().map(|k| k.len()).max().unwrap_or(0);
    for (rule, (level, count)) in &stats {
        writeln!(out, "{count:>5}  {rule:<width$}  {}", level.as_str())?;
    }
    writeln!(out, "{:>5}  total", outcome.findings.len())
}

/// Counts of findings per level: (errors, warnings, notes).
pub fn counts(outcome: &Outcome) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for f in &outcome.findings {
        match f.level {
            Level::Error => c.0 += 1,
            Level::Warning => c.1 += 1,
            Level::Note => c.2 += 1,
        }
    }
    c
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The one-line summary that closes human output.
pub fn summary_line(report: &Report) -> String {
    let (e, w, n) = counts(report.outcome);
    let mut line = format!(
        "staleguard: {}, {}, {} in {} ({:.2}s)",
        plural(e, "error"),
        plural(w, "warning"),
        plural(n, "note"),
        plural(report.outcome.files, "file"),
        report.elapsed.as_secs_f64()
    );
    let skipped = report.outcome.errors.len()
        + report
            .outcome
            .findings
            .iter()
            .filter(|f| f.is_bad_input())
            .count();
    if skipped > 0 {
        line.push_str(&format!(", {} skipped", plural(skipped, "file")));
    }
    if report.outcome.baselined > 0 {
        line.push_str(&format!(
            ", {} hidden by the baseline",
            report.outcome.baselined
        ));
    }
    line
}

/// The pointer to a rule's documentation shown with each finding.
pub fn doc_note(rule: &str) -> String {
    format!("see docs/rules/{rule}.md or run `cargo staleguard explain {rule}`")
}
