//! The staleguard analyzer: Rust source text in, diagnostics out.
//!
//! The crate does no I/O and never prints. The driver (the `cargo-staleguard` CLI, or a test)
//! reads files, calls [`Analyzer::lower`] for each file on the thread that read it (the result is
//! `Send`; syntax trees never cross threads), then calls [`Analyzer::check`] once with every
//! lowered file of the crate or workspace.
//!
//! Run `lower` on threads with at least [`STACK_SIZE`] bytes of stack: `syn`'s parser recurses
//! on nested expressions.

mod apis;
mod check;
pub mod diagnostic;
mod effects;
mod facts;
mod fxhash;
mod handlers;
#[cfg(feature = "dev")]
pub mod ir;
#[cfg(not(feature = "dev"))]
mod ir;
mod kb;
mod knowledge;
mod lexical;
mod lower;
mod name;
mod par;
mod parse;
mod query;
mod redis_calls;
pub mod registry;
mod rules;
mod schema;
mod small;
mod sql;
mod state_writes;
mod summary;
mod suppress;

pub use diagnostic::{Applicability, Diagnostic, Edit, Label, Level, Position, Span, Suggestion};
pub use knowledge::{Knowledge, KnowledgeKey};

/// The stack size, in bytes, that threads calling [`Analyzer::lower`] need for deeply nested
/// input (syn's parser recurses once or more per nesting level; 10,000 levels fit in this).
/// Unoptimised builds need far bigger frames: 10,000 nested `async` blocks overflow 256 MiB in a
/// debug build, while a release build handles them in 128 MiB (64 MiB is not enough), so release
/// reserves 256 MiB per worker instead of 1 GiB.
pub const STACK_SIZE: usize = if cfg!(debug_assertions) {
    1024 * 1024 * 1024
} else {
    256 * 1024 * 1024
};

/// A module a file declares with `mod name;` (its text is in another file), for the driver to
/// follow a target's module tree: the inline modules around the declaration (`mod a { mod b {
/// mod name; } }` has `a`, `b`), each with its `#[path]`, and the declaration's own `#[path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModDecl {
    pub inline: Vec<(String, Option<String>)>,
    pub name: String,
    pub path: Option<String>,
}

/// Is `path` a schema file (`.sql`: migrations, `schema.sql`)? [`Analyzer::lower`] reads it for
/// the tables' unique keys; it is never linted and has no findings.
pub fn is_schema_path(path: &str) -> bool {
    path.ends_with(".sql")
}

/// One file after lowering: its effect traces, facts and suppression comments. Holds no syntax
/// tree.
#[derive(Debug, Clone)]
pub struct LoweredFile {
    pub path: String,
    /// Boxed: a `Diagnostic` is about 250 bytes, and every file of the crate keeps this slot.
    parse_error: Option<Box<Diagnostic>>,
    ir: ir::FileIr,
    suppressions: Vec<suppress::Suppression>,
    /// Line starts, to give diagnostics byte offsets once the text is gone.
    lines: parse::Lines,
}

impl LoweredFile {
    /// The lowered bodies (for the dev tools and tests; not a stable API).
    #[cfg(feature = "dev")]
    pub fn ir(&self) -> &ir::FileIr {
        &self.ir
    }

    /// The modules the file declares with `mod name;`, and the files it `include!`s, for the
    /// driver to follow a target's module tree (empty when the file does not parse).
    pub fn module_edges(&self) -> (&[ModDecl], &[String]) {
        (&self.ir.modules, &self.ir.includes)
    }

    /// Whether the file failed to parse.
    pub fn has_parse_error(&self) -> bool {
        self.parse_error.is_some()
    }

    /// Whether it is a schema file (see [`is_schema_path`]), not a linted one.
    pub fn is_schema(&self) -> bool {
        is_schema_path(&self.path)
    }
}

/// The `parse-error` of a file: a delimiter problem as rustc words it (at the opening delimiter
/// left unclosed, with the others labelled), else syn's error at its position.
fn parse_error(
    path: &str,
    text: &str,
    lines: &parse::LineIndex<'_>,
    err: &syn::Error,
) -> Diagnostic {
    // One character at a byte offset, as a span.
    let span_at = |byte: usize| {
        let before = &text[..byte.min(text.len())];
        let line = before.matches('\n').count() as u32 + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() as u32 + 1;
        let width = text[byte.min(text.len())..]
            .chars()
            .next()
            .map_or(0, char::len_utf8);
        Span {
            file: path.to_string(),
            start: Position { line, column },
            end: Position {
                line,
                column: column + u32::from(width > 0),
            },
            byte_start: byte,
            byte_end: byte + width,
        }
    };
    let (message, primary, primary_label, labels) = match lexical::delimiter_problem(text) {
        Some(p) => (
            p.message,
            span_at(p.at),
            Some(p.label.to_string()),
            p.others
                .into_iter()
                .map(|(at, label)| Label {
                    span: span_at(at),
                    message: label.to_string(),
                })
                .collect(),
        ),
        None => {
            let start = err.span().start();
            let line = start.line.max(1);
            let col = start.column;
            let byte = lines.byte(line, col) as usize;
            let pos = Position {
                line: line as u32,
                column: col as u32 + 1,
            };
            let span = Span {
                file: path.to_string(),
                start: pos,
                end: pos,
                byte_start: byte,
                byte_end: byte,
            };
            (
                format!("file does not parse: {err}"),
                span,
                None,
                Vec::new(),
            )
        }
    };
    Diagnostic {
        rule: "parse-error",
        level: Level::Error,
        message,
        primary,
        primary_label,
        labels,
        help: None,
        notes: Vec::new(),
        function: None,
        suggestions: Vec::new(),
    }
}

/// A package of the workspace as paths name it: its directory (relative to the root the files'
/// paths are written from, `/`-separated, empty for the root itself) and the name its library
/// is imported by (`cache_service` for a package `cache-service` kept in
/// `crates/services/cache`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateName {
    pub dir: String,
    pub name: String,
}

/// The analyzer, configured once and shared by all worker threads.
#[derive(Debug, Clone, Default)]
pub struct Analyzer {
    knowledge: Knowledge,
    /// Threads [`Analyzer::check`] may use (0 and 1 mean the calling thread only).
    threads: usize,
    /// The workspace's packages by the names their libraries are imported by.
    crates: Vec<CrateName>,
}

impl Analyzer {
    pub fn new(knowledge: Knowledge) -> Self {
        Analyzer {
            knowledge,
            threads: 1,
            crates: Vec::new(),
        }
    }

    /// Tells the analyzer the names the workspace's packages are imported by, so that a path
    /// through one (`cache_service::set_key(..)`) resolves to its fns whatever its directory is
    /// called. Without it a package is known by its directory's name only.
    pub fn with_crates(mut self, crates: Vec<CrateName>) -> Self {
        self.crates = crates;
        self
    }

    /// Lets [`Analyzer::check`] classify bodies on up to `threads` threads (scoped: they end
    /// before `check` returns). Findings do not depend on it.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    pub fn knowledge(&self) -> &Knowledge {
        &self.knowledge
    }

    /// Parses and lowers one file. Never fails: a file that does not parse yields a
    /// `parse-error` diagnostic at check time. A path ending in `.sql` is a schema file: its
    /// tables' unique keys become crate facts.
    ///
    /// Releases the calling thread's span data when done (`proc_macro2` keeps every parsed
    /// file's source map per thread otherwise); must not be called from inside a proc macro.
    pub fn lower(&self, path: &str, text: &str) -> LoweredFile {
        // A schema file (migrations, `schema.sql`) brings the tables' unique keys, no bodies; a
        // `down` migration undoes the schema and says nothing of the live one.
        if is_schema_path(path) {
            let mut ir = ir::FileIr::default();
            if !schema::is_down_migration(path) {
                ir.facts.schema = Some(Box::new(schema::read(text)));
            }
            // No diagnostic points into a schema file: its line table is not kept.
            return LoweredFile {
                path: path.to_string(),
                parse_error: None,
                ir,
                suppressions: Vec::new(),
                lines: parse::LineIndex::new("").into_lines(),
            };
        }
        let lines = parse::LineIndex::new(text);
        let result = match lower::parse_and_lower(text, &lines, &self.knowledge) {
            Ok(ir) => {
                // Re-allocate the trace now that the token buffer is gone, so what is kept lives
                // in fresh memory instead of pinning pages of the freed syntax trees.
                Ok(ir.clone())
            }
            Err(err) => Err(parse_error(path, text, &lines, &err)),
        };
        proc_macro2::extra::invalidate_current_thread_spans();
        match result {
            Ok(ir) => {
                let suppressions = suppress::scan(text, &ir.items);
                LoweredFile {
                    path: path.to_string(),
                    parse_error: None,
                    ir,
                    suppressions,
                    lines: lines.into_lines(),
                }
            }
            Err(d) => {
                let suppressions = suppress::scan(text, &[]);
                LoweredFile {
                    path: path.to_string(),
                    parse_error: Some(Box::new(d)),
                    ir: ir::FileIr::default(),
                    suppressions,
                    lines: lines.into_lines(),
                }
            }
        }
    }

    /// Runs every enabled rule over the lowered files (one crate or workspace) and returns the
    /// diagnostics sorted by file and position. Suppressions are already applied; unused ones are
    /// reported as `unused-suppression`.
    pub fn check(&self, files: &[LoweredFile], enabled: &dyn Fn(&str) -> bool) -> Vec<Diagnostic> {
        check::run(&self.knowledge, &self.crates, files, enabled, self.threads)
    }

    /// What classification and the summaries made of every body with an effect, as text: per
    /// event its effects (own, then gained from callees) and callees, then the body's summary
    /// (for the dev tools; not a stable format).
    #[cfg(feature = "dev")]
    pub fn dump_effects(&self, files: &[LoweredFile]) -> String {
        check::dump_effects(&self.knowledge, &self.crates, files, self.threads)
    }
}
