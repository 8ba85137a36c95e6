//! Rendering a run's outcome. One module per output format behind [`Format`]; findings arrive
//! as data ([`Report`]) and each format writes them to the sink it is given.

mod cargo;
mod github;
mod gitlab;
mod human;
mod json;
mod rdjson;
mod sarif;
mod short;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use staleguard_rules::{Level, Span};

use crate::analyze::{Finding, Outcome};
use crate::paths::Paths;

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Human {
        color: bool,
    },
    Short,
    Json,
    Sarif,
    Github,
    Gitlab,
    Rdjsonl,
    /// cargo's compiler messages; `ansi`: colours in `rendered`.
    Cargo {
        ansi: bool,
    },
}

/// What a format renders.
pub struct Report<'a> {
    pub outcome: &'a Outcome,
    /// How paths are shown.
    pub paths: &'a Paths,
    pub elapsed: Duration,
    /// The run could not do its whole job (exit code 2 unless findings make it 1).
    pub trouble: bool,
    /// `-q`: no summary line.
    pub quiet: bool,
}

impl Report<'_> {
    /// A span's file as shown.
    pub fn file(&self, finding: &Finding, span: &Span) -> String {
        self.paths.shown(finding.root.as_deref(), &span.file)
    }

    /// A note or message with the paths in it shown as files are.
    pub fn text(&self, finding: &Finding, text: &str) -> String {
        self.paths.text(finding.root.as_deref(), text)
    }

    /// An input error's path as shown.
    pub fn error_path(&self, path: &str) -> String {
        self.paths.shown(None, path)
    }
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
            Format::Gitlab => gitlab::render(report, out),
            Format::Rdjsonl => rdjson::render(report, out),
            Format::Cargo { ansi } => cargo::render(report, ansi, out),
        }
    }

    /// Whether the format is meant for programs (statistics and the success line then go to
    /// standard error, or nowhere).
    pub fn is_machine(self) -> bool {
        matches!(
            self,
            Format::Json | Format::Sarif | Format::Gitlab | Format::Rdjsonl | Format::Cargo { .. }
        )
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

/// Writes the summary line that closes the human-facing formats, unless `-q`.
pub fn write_summary(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    if report.quiet {
        return Ok(());
    }
    writeln!(out, "{}", summary_line(report))
}

/// The one-line summary that closes human output: "all checks passed" when there is nothing
/// to report.
pub fn summary_line(report: &Report) -> String {
    let (e, w, n) = counts(report.outcome);
    let counted = if report.outcome.findings.is_empty() && !report.trouble {
        "all checks passed".to_string()
    } else {
        format!(
            "{}, {}, {}",
            plural(e, "error"),
            plural(w, "warning"),
            plural(n, "note")
        )
    };
    let mut line = format!(
        "staleguard: {counted} in {} ({:.2}s)",
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
    let unreached = report.outcome.unreached.len();
    if unreached > 0 {
        line.push_str(&format!(
            ", {} that no target compiles skipped",
            plural(unreached, "file")
        ));
    }
    if report.outcome.outside_diff > 0 {
        line.push_str(&format!(
            ", {} outside the diff",
            report.outcome.outside_diff
        ));
    }
    if report.outcome.baselined > 0 {
        line.push_str(&format!(
            ", {} hidden by the baseline",
            report.outcome.baselined
        ));
    }
    line
}

/// A suggestion as one line: what it does and how sure it is.
pub fn suggestion_line(s: &staleguard_rules::Suggestion) -> String {
    match s.applicability {
        staleguard_rules::Applicability::MachineApplicable => {
            format!("{} (machine-applicable: `--fix` applies it)", s.message)
        }
        staleguard_rules::Applicability::MaybeIncorrect => {
            format!("{} (maybe-incorrect: check it before applying)", s.message)
        }
    }
}

/// The pointer to a rule's documentation shown with each finding.
pub fn doc_note(rule: &str) -> String {
    format!("for more information, run `cargo staleguard explain {rule}`")
}

/// The web page of a rule's documentation: under the package's `documentation` URL when it
/// has one (`<documentation>/rules/<rule>.md`), else in its `repository`
/// (`<repository>/blob/HEAD/docs/rules/<rule>.md`), so a fork that sets its own metadata points
/// at its own docs.
pub fn help_uri(rule: &str) -> Option<String> {
    doc_base(
        option_env!("CARGO_PKG_DOCUMENTATION"),
        option_env!("CARGO_PKG_REPOSITORY"),
    )
    .map(|base| format!("{base}/{rule}.md"))
}

/// The folder URL rule pages live under, from the package metadata.
fn doc_base(documentation: Option<&str>, repository: Option<&str>) -> Option<String> {
    let clean = |s: Option<&str>| {
        s.map(|s| s.trim().trim_end_matches('/').to_string())
            .filter(|s| !s.is_empty())
    };
    if let Some(docs) = clean(documentation) {
        return Some(format!("{docs}/rules"));
    }
    clean(repository).map(|repo| format!("{}/blob/HEAD/docs/rules", repo.trim_end_matches(".git")))
}

/// The project's home page (the package's `repository`), for tool metadata.
pub fn home_page() -> Option<&'static str> {
    option_env!("CARGO_PKG_REPOSITORY").filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::doc_base;

    #[test]
    fn rule_pages_follow_the_package_metadata() {
        assert_eq!(
            doc_base(None, Some("https://git.example.com/me/staleguard.git")).as_deref(),
            Some("https://git.example.com/me/staleguard/blob/HEAD/docs/rules")
        );
        assert_eq!(
            doc_base(Some("https://docs.example.com/sg/"), Some("https://x")).as_deref(),
            Some("https://docs.example.com/sg/rules")
        );
        assert_eq!(doc_base(Some(" "), None), None);
    }
}
