//! The run: settings → discovery → analysis → report → exit code. Tool errors are printed here,
//! at the edge (config errors with miette, pointing into the file).

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use staleguard_rules::Level;

use crate::args::{Args, ColorArg, FormatArg, LevelFlag};
use crate::discover::{self, Fatal};
use crate::paths::Paths;
use crate::report::{self, Format, Report};
use crate::settings::{self, Action, Settings};
use crate::{analyze, baseline, commands, diff, edit, show};

/// No findings at deny level.
pub const EXIT_OK: u8 = 0;
/// Findings at deny level.
pub const EXIT_FINDINGS: u8 = 1;
/// The tool could not do its job: bad configuration or arguments, unreadable or unparsable
/// input, no Rust files.
pub const EXIT_TROUBLE: u8 = 2;

pub fn run(args: Args, levels: Vec<(LevelFlag, String)>) -> ExitCode {
    let code = match settings::resolve(args, levels) {
        Err(message) => tool_error(&message),
        Ok(Action::Explain(rule)) => {
            let mut out = io::stdout().lock();
            match commands::explain(&rule, &mut out) {
                Err(message) => tool_error(&message),
                Ok(written) => io_result(written.and_then(|()| out.flush()), EXIT_OK),
            }
        }
        Ok(Action::Rules(format)) => {
            let mut out = io::stdout().lock();
            let written = commands::rules(format, &mut out).and_then(|()| out.flush());
            io_result(written, EXIT_OK)
        }
        Ok(Action::Check(settings)) => check(&settings),
    };
    ExitCode::from(code)
}

fn tool_error(message: &str) -> u8 {
    eprintln!("error: {message}");
    EXIT_TROUBLE
}

/// A broken pipe (`cargo staleguard | head`) ends the run quietly with its code.
fn io_result(result: io::Result<()>, code: u8) -> u8 {
    match result {
        Ok(()) => code,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => code,
        Err(e) => tool_error(&format!("cannot write the report: {e}")),
    }
}

fn check(settings: &Settings) -> u8 {
    let start = Instant::now();
    let (units, errors) = match discover::discover(settings) {
        Ok(found) => found,
        Err(Fatal::Config(err)) => {
            eprintln!("{:?}", miette::Report::new(*err));
            return EXIT_TROUBLE;
        }
        Err(Fatal::Message(message)) => return tool_error(&message),
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let paths = Paths::new(
        units.first().map(|u| u.root.as_path()),
        &cwd,
        settings.path_prefix.as_deref(),
    );
    if settings.show_settings {
        let mut out = io::stdout().lock();
        let written = show::settings(settings, &units, &paths, &mut out).and_then(|()| out.flush());
        return io_result(written, EXIT_OK);
    }
    if !settings.quiet {
        for why in units.iter().filter_map(|u| u.fallback.as_deref()) {
            eprintln!("warning: {why}");
        }
    }
    if settings.verbose {
        show::verbose(&units, &paths);
    }
    let show_error = |e: &discover::InputError| {
        let path = paths.shown(None, &e.path);
        if path.is_empty() {
            eprintln!("error: {}", e.message);
        } else {
            eprintln!("error: {path}: {}", e.message);
        }
    };
    for notice in units
        .iter()
        .flat_map(|u| &u.notices)
        .filter(|_| !settings.quiet)
    {
        eprintln!(
            "warning: {}: {}",
            paths.shown(None, &notice.path),
            notice.message
        );
    }
    let total: usize = units
        .iter()
        .map(|u| u.files.iter().filter(|f| !f.is_schema()).count())
        .sum();
    if total == 0 {
        errors.iter().for_each(show_error);
        return tool_error("no Rust files found to lint");
    }
    let changed = match &settings.diff_base {
        Some(rev) => {
            let dir = units.first().map_or(cwd.as_path(), |u| u.root.as_path());
            match diff::changed(dir, rev) {
                Ok(changed) => Some(changed),
                Err(message) => return tool_error(&message),
            }
        }
        None => None,
    };
    let outcome = match analyze::run(settings, &units, errors, changed.as_ref()) {
        Ok(outcome) => outcome,
        Err(message) => return tool_error(&message),
    };
    if settings.show_files {
        let mut out = io::stdout().lock();
        let written = show::files(&outcome, &paths, &mut out).and_then(|()| out.flush());
        let code = if outcome.errors.is_empty() {
            EXIT_OK
        } else {
            EXIT_TROUBLE
        };
        outcome.errors.iter().for_each(show_error);
        return io_result(written, code);
    }
    if settings.add_suppressions || settings.fix {
        // Files with read or parse errors are left alone; what is left is reported by a second
        // run over the edited files.
        let (edited, what) = if settings.fix {
            (edit::fix(&outcome), "fix(es) applied")
        } else {
            (
                edit::add_suppressions(&outcome),
                "suppression comment(s) added",
            )
        };
        let edited = match edited {
            Ok(edited) => edited,
            Err(message) => return tool_error(&message),
        };
        if !settings.quiet {
            eprintln!(
                "staleguard: {} {what} in {} file(s)",
                edited.edits, edited.files
            );
        }
        let mut again = settings.clone();
        again.add_suppressions = false;
        again.fix = false;
        return check(&again);
    }
    outcome.errors.iter().for_each(show_error);
    if settings.verbose {
        eprintln!(
            "staleguard: linted {} files ({} that no target compiles skipped)",
            outcome.files,
            outcome.unreached.len()
        );
    }
    let trouble = !outcome.errors.is_empty() || outcome.findings.iter().any(|f| f.is_bad_input());
    if let Some(path) = &settings.write_baseline {
        if let Err(message) = baseline::write(path, &outcome.findings) {
            return tool_error(&message);
        }
        let recorded = outcome
            .findings
            .iter()
            .filter(|f| !f.is_bad_input())
            .count();
        if !settings.quiet {
            eprintln!(
                "staleguard: recorded {recorded} finding(s) in {}",
                path.display()
            );
        }
        return if trouble { EXIT_TROUBLE } else { EXIT_OK };
    }
    let denied = outcome
        .findings
        .iter()
        .any(|f| !f.is_bad_input() && f.level == Level::Error);
    let code = if denied && !settings.exit_zero {
        EXIT_FINDINGS
    } else if trouble {
        EXIT_TROUBLE
    } else {
        EXIT_OK
    };

    let format = format(settings);
    let mut sink: Box<dyn Write> = match &settings.output {
        Some(path) => match File::create(path) {
            Ok(file) => Box::new(BufWriter::new(file)),
            Err(e) => return tool_error(&format!("cannot create {}: {e}", path.display())),
        },
        None => Box::new(BufWriter::new(io::stdout().lock())),
    };
    let report = Report {
        outcome: &outcome,
        paths: &paths,
        elapsed: start.elapsed(),
        trouble,
        quiet: settings.quiet,
    };
    let mut written = format.render(&report, &mut *sink);
    if settings.statistics && written.is_ok() {
        written = if format.is_machine() {
            report::write_statistics(&outcome, &mut io::stderr().lock())
        } else {
            report::write_statistics(&outcome, &mut *sink)
        };
    }
    io_result(written.and_then(|()| sink.flush()), code)
}

fn format(settings: &Settings) -> Format {
    match settings.format {
        FormatArg::Human => {
            let color = match settings.color {
                ColorArg::Always => true,
                ColorArg::Never => false,
                ColorArg::Auto => {
                    settings.output.is_none()
                        && io::stdout().is_terminal()
                        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                }
            };
            Format::Human { color }
        }
        FormatArg::Short => Format::Short,
        FormatArg::Json => Format::Json,
        FormatArg::Sarif => Format::Sarif,
        FormatArg::Github => Format::Github,
        FormatArg::Gitlab => Format::Gitlab,
        FormatArg::Rdjsonl => Format::Rdjsonl,
        FormatArg::Cargo => Format::Cargo {
            ansi: settings.rendered_ansi,
        },
    }
}
