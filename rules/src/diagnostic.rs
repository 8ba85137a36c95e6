//! Findings as data: what a rule reports, with rustc-style spans, labels, help and notes.

/// Severity of a finding. Config levels map onto it: `deny` = `Error`, `warn` = `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Note,
    Warning,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Note => "note",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// A 1-based line and 1-based column (counted in `char`s, as rustc does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// A source range in one file. `byte_start..byte_end` index the file's text as given to
/// [`crate::Analyzer::lower`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: String,
    pub start: Position,
    pub end: Position,
    pub byte_start: usize,
    pub byte_end: usize,
}

/// A secondary span with its message ("state read here").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The rule id (kebab-case), also `parse-error` and `unused-suppression`.
    pub rule: &'static str,
    /// The rule's default level; the driver applies configured levels.
    pub level: Level,
    /// What is wrong: lowercase first word, no trailing period, code in backticks.
    pub message: String,
    /// The hazardous call or statement.
    pub primary: Span,
    pub primary_label: Option<String>,
    /// Evidence: read here, checked here, lock taken here, transaction begun here.
    pub labels: Vec<Label>,
    /// What to do next.
    pub help: Option<String>,
    /// Extra facts, such as the call chain a summary relied on.
    pub notes: Vec<String>,
    /// The enclosing function (`Type::method` or `function`), used to key baselines.
    pub function: Option<String>,
    /// Edits that fix the finding, each with how sure it is.
    pub suggestions: Vec<Suggestion>,
}

/// How sure a suggested edit is, as rustc says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Applicability {
    /// Applying it fixes the finding and keeps the program's meaning: `--fix` applies it.
    MachineApplicable,
    /// Probably right, but a person must check it: shown, never applied.
    MaybeIncorrect,
}

impl Applicability {
    pub fn as_str(self) -> &'static str {
        match self {
            Applicability::MachineApplicable => "machine-applicable",
            Applicability::MaybeIncorrect => "maybe-incorrect",
        }
    }
}

/// A replacement of one span of the finding's file (`replacement` empty: a deletion; an empty
/// span: an insertion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub span: Span,
    pub replacement: String,
}

/// A fix: what it does, the edits (in one file, not overlapping) and how sure it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    pub message: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}
