//! `--show-settings`, `--show-files` and `-v`: what a run reads and how, for a user wondering
//! why a file is (not) linted or which configuration applies.

use std::io::{self, Write};

use staleguard_rules::registry;

use crate::analyze::{Outcome, command_line};
use crate::config::Config;
use crate::discover::Unit;
use crate::paths::Paths;
use crate::settings::Settings;

/// The resolved settings: where paths are shown from, each unit with its configuration
/// files and packages, the level of every rule after configuration and the command line.
pub fn settings(
    settings: &Settings,
    units: &[Unit],
    paths: &Paths,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "paths relative to: {}", paths.base.display())?;
    writeln!(out, "format: {:?}", settings.format)?;
    if let Some(rev) = &settings.diff_base {
        writeln!(out, "diff base: {rev}")?;
    }
    if let Some(baseline) = &settings.baseline {
        writeln!(out, "baseline: {}", baseline.display())?;
    }
    for unit in units {
        writeln!(out, "\nroot: {}", unit.root.display())?;
        if let Some(why) = &unit.fallback {
            writeln!(out, "  read as: {why}")?;
        }
        writeln!(out, "  configuration: {}", source(&unit.config))?;
        for notice in &unit.notices {
            writeln!(out, "  warning: {}: {}", notice.path, notice.message)?;
        }
        if !unit.config.exclude.is_empty() {
            writeln!(out, "  exclude: {}", unit.config.exclude.join(", "))?;
        }
        for c in &unit.crates {
            writeln!(out, "  package {} ({})", c.id, c.manifest.display())?;
        }
        for p in &unit.packages {
            writeln!(
                out,
                "  package configuration {}: {}",
                p.prefix,
                source(&p.config)
            )?;
        }
        writeln!(out, "  rules:")?;
        let width = registry::all()
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0);
        for rule in registry::all() {
            writeln!(
                out,
                "    {:<width$}  {}",
                rule.name,
                level(settings, &unit.config, rule.name)
            )?;
        }
    }
    Ok(())
}

/// A rule's level for the workspace's files: configuration, then the command line.
fn level(settings: &Settings, config: &Config, rule: &str) -> String {
    if rule == "parse-error" {
        return "error (cannot be turned off)".to_string();
    }
    let selected = !settings.ignore.iter().any(|r| r == rule)
        && (settings.select.is_empty() || settings.select.iter().any(|r| r == rule));
    if !selected {
        return "off (--select / --ignore)".to_string();
    }
    let meta = registry::find(rule).expect("a registry rule");
    let configured = match config.rules.get(rule) {
        Some(l) => l.level(),
        None => Some(meta.default_level),
    };
    let (level, set) = command_line(&settings.levels, rule, configured);
    let from = if set {
        "command line"
    } else if config.rules.contains_key(rule) {
        "configuration"
    } else {
        "default"
    };
    match level {
        Some(l) => format!("{} ({from})", l.as_str()),
        None => format!("allow ({from})"),
    }
}

fn source(config: &Config) -> String {
    config
        .source
        .as_ref()
        .map_or("none (rule defaults)".to_string(), |p| {
            p.display().to_string()
        })
}

/// The files linted, then those skipped and why.
pub fn files(outcome: &Outcome, paths: &Paths, out: &mut dyn Write) -> io::Result<()> {
    let mut linted: Vec<String> = outcome
        .linted
        .iter()
        .map(|p| paths.shown(None, &p.display().to_string()))
        .collect();
    linted.sort();
    for f in &linted {
        writeln!(out, "{f}")?;
    }
    let mut skipped: Vec<(String, String)> = outcome
        .unreached
        .iter()
        .map(|p| {
            (
                paths.shown(None, &p.display().to_string()),
                "no target compiles it".to_string(),
            )
        })
        .chain(
            outcome
                .errors
                .iter()
                .map(|e| (paths.shown(None, &e.path), e.message.clone())),
        )
        .collect();
    skipped.sort();
    for (f, why) in &skipped {
        writeln!(out, "skipped: {f} ({why})")?;
    }
    Ok(())
}

/// `-v`: how the workspace is read (to standard error).
pub fn verbose(units: &[Unit], paths: &Paths) {
    eprintln!("staleguard: paths relative to {}", paths.base.display());
    for unit in units {
        eprintln!(
            "staleguard: {} ({} packages; configuration: {}; {} candidate files)",
            unit.root.display(),
            unit.crates.len(),
            source(&unit.config),
            unit.files.len()
        );
    }
}
