//! Raw command-line arguments (clap derive). [`crate::settings`] validates them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Finds code that lets stale messages overwrite current state: check-before-lock races,
/// remote calls inside transactions, tokens deleted before the effect, timers without an
/// operation id, state updates by key alone, timeouts recorded as failures, claims without a
/// lease, duplicates answered as failures (`cargo staleguard rules` lists them).
///
/// With no PATH, lints every member of the Cargo workspace around the current directory
/// (found with `cargo metadata --no-deps`; nothing is built). A PATH holding a `Cargo.toml`
/// is linted as that package or workspace; other files and directories as plain `.rs` files.
///
/// Exit codes: 0 no findings at deny level, 1 findings at deny level, 2 the tool could not do
/// its job (bad configuration, unreadable or unparsable input, no Rust files).
#[derive(Debug, Parser)]
#[command(name = "cargo-staleguard", bin_name = "cargo staleguard", version)]
#[command(args_conflicts_with_subcommands = true, max_term_width = 100)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub check: CheckArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the full documentation of a rule
    Explain {
        /// The rule id, e.g. `check-before-lock`
        rule: String,
    },
    /// List the rules with their default level and summary
    Rules {
        /// Output format
        #[arg(long, value_enum, default_value_t = ListFormat::Human)]
        format: ListFormat,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Human,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Files or directories to lint (default: the current Cargo workspace)
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Path to the workspace's Cargo.toml
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "paths",
        help_heading = "Package Selection"
    )]
    pub manifest_path: Option<PathBuf>,

    /// Lint every member of the workspace (the default)
    #[arg(long, conflicts_with = "package", help_heading = "Package Selection")]
    pub workspace: bool,

    /// Lint only this package (repeatable)
    #[arg(short, long, value_name = "NAME", help_heading = "Package Selection")]
    pub package: Vec<String>,

    /// Output format
    #[arg(long, value_enum, default_value_t = FormatArg::Human, help_heading = "Output")]
    pub format: FormatArg,

    /// Cargo's message format: `json` prints cargo's compiler-message JSON lines (for
    /// editors: rust-analyzer's `check.overrideCommand`); `human` and `short` are the formats
    #[arg(
        long,
        value_enum,
        value_name = "FMT",
        conflicts_with = "format",
        help_heading = "Output"
    )]
    pub message_format: Option<MessageFormatArg>,

    /// When to use colours in human output (NO_COLOR and CARGO_TERM_COLOR are honoured)
    #[arg(long, value_enum, value_name = "WHEN", help_heading = "Output")]
    pub color: Option<ColorArg>,

    /// Write the report to FILE instead of standard output
    #[arg(short, long, value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,

    /// Also print the number of findings per rule
    #[arg(long, help_heading = "Output")]
    pub statistics: bool,

    /// Put PREFIX before every path shown (paths are relative to the repository root, else
    /// the current directory)
    #[arg(long, value_name = "PREFIX", help_heading = "Output")]
    pub path_prefix: Option<String>,

    /// Only run these rules (comma-separated, repeatable)
    #[arg(
        long,
        value_name = "RULES",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub select: Vec<String>,

    /// Do not run these rules (comma-separated, repeatable)
    #[arg(
        long,
        value_name = "RULES",
        value_delimiter = ',',
        help_heading = "Rules"
    )]
    pub ignore: Vec<String>,

    /// Set RULE (or `warnings`: every warning) to deny: reported as an error, exit code 1
    #[arg(
        short = 'D',
        long = "deny",
        value_name = "RULE",
        help_heading = "Rules"
    )]
    pub deny: Vec<String>,

    /// Set RULE to warn (reported, exit code 0)
    #[arg(
        short = 'W',
        long = "warn",
        value_name = "RULE",
        help_heading = "Rules"
    )]
    pub warn: Vec<String>,

    /// Set RULE (or `warnings`: every warning) to allow: not reported
    #[arg(
        short = 'A',
        long = "allow",
        value_name = "RULE",
        help_heading = "Rules"
    )]
    pub allow: Vec<String>,

    /// Read configuration from FILE instead of staleguard.toml / Cargo.toml metadata
    #[arg(long, value_name = "FILE", help_heading = "Rules")]
    pub config: Option<PathBuf>,

    /// Report only findings that are not recorded in the baseline FILE
    #[arg(long, value_name = "FILE", help_heading = "Adoption")]
    pub baseline: Option<PathBuf>,

    /// Record the current findings in the baseline FILE and exit 0
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "baseline",
        help_heading = "Adoption"
    )]
    pub write_baseline: Option<PathBuf>,

    /// Report only findings on lines added or changed since the git revision REV (the working
    /// tree against REV, untracked files included); every file is still analysed
    #[arg(long, value_name = "REV", help_heading = "Adoption")]
    pub diff_base: Option<String>,

    /// Exit 0 even when there are findings (tool errors still exit 2)
    #[arg(long, help_heading = "Adoption")]
    pub exit_zero: bool,

    /// Write a `// staleguard: allow(RULE) -- TODO` comment above every finding (adoption),
    /// then report what is left
    #[arg(long, conflicts_with = "fix", help_heading = "Adoption")]
    pub add_suppressions: bool,

    /// Apply the machine-applicable fixes to the files, then report what is left
    #[arg(long, help_heading = "Adoption")]
    pub fix: bool,

    /// Print only the findings (no summary line, no warnings about the run)
    #[arg(short, long, conflicts_with = "verbose", help_heading = "Output")]
    pub quiet: bool,

    /// Also say what is read and how (the files, the configuration, the packages)
    #[arg(short, long, help_heading = "Output")]
    pub verbose: bool,

    /// List the files that would be linted, and those skipped, then exit
    #[arg(long, help_heading = "Output")]
    pub show_files: bool,

    /// Print the resolved settings (configuration files, rule levels, packages), then exit
    #[arg(long, help_heading = "Output")]
    pub show_settings: bool,

    /// Number of parallel jobs (default: the number of CPUs)
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// rustc-style diagnostics with source snippets
    Human,
    /// one line per finding: `path:line:col: level[rule]: message`
    Short,
    /// versioned JSON (docs/json-schema.md)
    Json,
    /// SARIF 2.1.0 for GitHub code scanning
    Sarif,
    /// GitHub Actions workflow commands (annotations)
    Github,
    /// GitLab Code Quality report (JSON)
    Gitlab,
    /// reviewdog Diagnostic Format, one JSON object per line
    Rdjsonl,
    /// cargo's compiler-message JSON lines (as `--message-format json`)
    #[value(hide = true)]
    Cargo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MessageFormatArg {
    Human,
    Short,
    Json,
    /// JSON whose `rendered` text has ANSI colours
    JsonDiagnosticRenderedAnsi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// A command-line level setting (`-D`, `-W`, `-A`), in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelFlag {
    Deny,
    Warn,
    Allow,
}

/// Parses the process arguments, dropping the `staleguard` that cargo inserts when run as
/// `cargo staleguard`. Returns the `-D` / `-W` / `-A` settings in the order they were given
/// (a later one wins, as in rustc).
pub fn parse() -> (Args, Vec<(LevelFlag, String)>) {
    use clap::{CommandFactory, FromArgMatches};
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == "staleguard") {
        argv.remove(1);
    }
    let matches = Args::command().get_matches_from(argv);
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let mut levels: Vec<(usize, LevelFlag, String)> = Vec::new();
    for (id, flag) in [
        ("deny", LevelFlag::Deny),
        ("warn", LevelFlag::Warn),
        ("allow", LevelFlag::Allow),
    ] {
        if let (Some(indices), Some(values)) =
            (matches.indices_of(id), matches.get_many::<String>(id))
        {
            levels.extend(indices.zip(values).map(|(i, v)| (i, flag, v.clone())));
        }
    }
    levels.sort_by_key(|(i, _, _)| *i);
    (args, levels.into_iter().map(|(_, f, v)| (f, v)).collect())
}
