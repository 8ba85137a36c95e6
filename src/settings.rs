//! Validated settings: [`Args`] resolved into what the run needs (rule names checked, targets
//! classified into workspaces and plain paths).

use std::path::{Path, PathBuf};

use staleguard_rules::registry;

use crate::args::{
    Args, CheckArgs, ColorArg, Command, FormatArg, LevelFlag, ListFormat, MessageFormatArg,
};
use crate::suggest::did_you_mean;

/// What the invocation asks for.
#[derive(Debug)]
pub enum Action {
    Check(Box<Settings>),
    Explain(String),
    Rules(ListFormat),
}

/// Validated settings of a lint run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub targets: Vec<Target>,
    pub manifest_path: Option<PathBuf>,
    pub packages: Vec<String>,
    pub format: FormatArg,
    /// `--message-format json-diagnostic-rendered-ansi`.
    pub rendered_ansi: bool,
    pub color: ColorArg,
    /// `-D` / `-W` / `-A`, in order (a later one wins).
    pub levels: Vec<(LevelFlag, String)>,
    pub quiet: bool,
    pub verbose: bool,
    pub show_files: bool,
    pub show_settings: bool,
    pub add_suppressions: bool,
    pub fix: bool,
    pub output: Option<PathBuf>,
    pub statistics: bool,
    pub path_prefix: Option<String>,
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    pub config: Option<PathBuf>,
    pub baseline: Option<PathBuf>,
    pub write_baseline: Option<PathBuf>,
    pub diff_base: Option<String>,
    pub exit_zero: bool,
    pub jobs: Option<usize>,
}

/// Something to lint.
#[derive(Debug, Clone)]
pub enum Target {
    /// A Cargo workspace. `narrow`: when the manifest (else the nearest one above the working
    /// directory) is a member's, not the workspace root's, report only that member.
    Workspace {
        manifest: Option<PathBuf>,
        narrow: bool,
    },
    /// Plain `.rs` files or a directory of them.
    Path(PathBuf),
}

/// Resolves raw arguments; the error is a one-line message (exit code 2).
pub fn resolve(args: Args, levels: Vec<(LevelFlag, String)>) -> Result<Action, String> {
    match args.command {
        Some(Command::Explain { rule }) => Ok(Action::Explain(rule)),
        Some(Command::Rules { format }) => Ok(Action::Rules(format)),
        None => check(args.check, levels).map(|s| Action::Check(Box::new(s))),
    }
}

fn check(args: CheckArgs, levels: Vec<(LevelFlag, String)>) -> Result<Settings, String> {
    for rule in args.select.iter().chain(&args.ignore) {
        known_rule(rule)?;
    }
    for (_, rule) in &levels {
        if rule != "warnings" {
            known_rule(rule)?;
        }
    }
    // `--color`, else cargo's `CARGO_TERM_COLOR` (as `cargo staleguard` is a cargo command).
    let color = match args.color {
        Some(c) => c,
        None => match std::env::var("CARGO_TERM_COLOR").as_deref() {
            Ok("always") => ColorArg::Always,
            Ok("never") => ColorArg::Never,
            Ok("auto") | Err(_) => ColorArg::Auto,
            Ok(other) => {
                return Err(format!(
                    "invalid CARGO_TERM_COLOR `{other}`: expected `auto`, `always` or `never`"
                ));
            }
        },
    };
    if args.jobs == Some(0) {
        return Err("`--jobs` must be at least 1".to_string());
    }
    let mut ansi = false;
    let targets = if args.paths.is_empty() {
        vec![Target::Workspace {
            manifest: args.manifest_path.clone(),
            narrow: !args.workspace,
        }]
    } else {
        args.paths.iter().map(|p| classify(p)).collect()
    };
    Ok(Settings {
        targets,
        manifest_path: args.manifest_path,
        packages: args.package,
        format: match args.message_format {
            None => args.format,
            Some(MessageFormatArg::Human) => FormatArg::Human,
            Some(MessageFormatArg::Short) => FormatArg::Short,
            Some(MessageFormatArg::Json) => FormatArg::Cargo,
            Some(MessageFormatArg::JsonDiagnosticRenderedAnsi) => {
                ansi = true;
                FormatArg::Cargo
            }
        },
        rendered_ansi: ansi,
        color,
        levels,
        quiet: args.quiet,
        verbose: args.verbose,
        show_files: args.show_files,
        show_settings: args.show_settings,
        add_suppressions: args.add_suppressions,
        fix: args.fix,
        output: args.output,
        statistics: args.statistics,
        path_prefix: args.path_prefix,
        select: args.select,
        ignore: args.ignore,
        config: args.config,
        baseline: args.baseline,
        write_baseline: args.write_baseline,
        diff_base: args.diff_base,
        exit_zero: args.exit_zero,
        jobs: args.jobs,
    })
}

fn classify(path: &Path) -> Target {
    if path.is_dir() && path.join("Cargo.toml").is_file() {
        Target::Workspace {
            manifest: Some(path.join("Cargo.toml")),
            narrow: true,
        }
    } else if path.file_name().is_some_and(|n| n == "Cargo.toml") && path.is_file() {
        Target::Workspace {
            manifest: Some(path.to_path_buf()),
            narrow: true,
        }
    } else {
        Target::Path(path.to_path_buf())
    }
}

/// Checks that `name` is a rule id, suggesting the closest one when it is not.
pub fn known_rule(name: &str) -> Result<&'static registry::RuleMeta, String> {
    registry::find(name).ok_or_else(|| {
        match did_you_mean(name, registry::all().iter().map(|r| r.name)) {
            Some(close) => format!("unknown rule `{name}`, did you mean `{close}`?"),
            None => format!("unknown rule `{name}` (run `cargo staleguard rules` for the list)"),
        }
    })
}
