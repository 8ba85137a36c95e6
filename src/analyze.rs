//! Drives the analyzer: reads, parses and lowers files in parallel (rayon), checks each unit
//! once, applies configured levels and the baseline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use staleguard_rules::{Analyzer, CrateName, Diagnostic, Knowledge, Level, LoweredFile, registry};

use crate::args::LevelFlag;
use crate::baseline::{self, Baseline};
use crate::config::Config;
use crate::diff::Changed;
use crate::discover::{InputError, PackageScope, SourcePath, TargetRoot, Unit};
use crate::modtree;
use crate::settings::Settings;

/// Worker threads get a large stack: deeply nested expressions recurse deeply in `syn`.
const STACK_SIZE: usize = staleguard_rules::STACK_SIZE;

/// One finding with its effective level.
#[derive(Debug, Clone)]
pub struct Finding {
    pub diag: Diagnostic,
    pub level: Level,
    pub fingerprint: String,
    /// The file's text, for snippets.
    pub source: Option<Arc<str>>,
    /// The unit root the finding's paths are relative to.
    pub root: Option<Arc<Path>>,
    /// The package and target whose module tree holds the file (Cargo workspaces only).
    pub origin: Option<Arc<Origin>>,
}

/// The package and target a file is compiled in.
#[derive(Debug, Clone)]
pub struct Origin {
    pub package_id: String,
    pub manifest: PathBuf,
    pub target: TargetRoot,
}

impl Finding {
    /// A `parse-error` says a file was skipped; it does not count as a finding for the exit code.
    pub fn is_bad_input(&self) -> bool {
        self.diag.rule == "parse-error"
    }
}

/// Everything a run found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub findings: Vec<Finding>,
    pub errors: Vec<InputError>,
    /// Rust files linted.
    pub files: usize,
    /// Their paths.
    pub linted: Vec<PathBuf>,
    /// Rust files of the selected packages that no target's module tree reaches: not linted.
    pub unreached: Vec<PathBuf>,
    /// Findings hidden by the baseline.
    pub baselined: usize,
    /// Findings hidden by `--diff-base` (not on an added or changed line).
    pub outside_diff: usize,
}

/// Analyzes every unit. Fails only when the thread pool cannot start or the baseline is bad.
pub fn run(
    settings: &Settings,
    units: &[Unit],
    mut errors: Vec<InputError>,
    changed: Option<&Changed>,
) -> Result<Outcome, String> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.jobs.unwrap_or(0))
        .stack_size(STACK_SIZE)
        .thread_name(|i| format!("staleguard-{i}"))
        .build()
        .map_err(|e| format!("cannot start worker threads: {e}"))?;
    let mut outcome = Outcome::default();
    for unit in units {
        let analyzer = Analyzer::new(knowledge(unit))
            .with_threads(pool.current_num_threads())
            .with_crates(crate_names(unit));
        let root: Arc<Path> = Arc::from(unit.root.as_path());
        let started = std::time::Instant::now();
        // Texts are not kept: only the lowered files are (much smaller than the text). The few
        // files with findings are read again below for snippets and fingerprints.
        let results: Vec<Result<LoweredFile, InputError>> =
            pool.install(|| unit.files.par_iter().map(|f| lower(&analyzer, f)).collect());
        let lowered_in = started.elapsed();
        let owners = owners(unit, &results);
        let mut lowered = Vec::with_capacity(results.len());
        // The files linted, each with its target.
        let mut scope: HashMap<String, Option<Arc<Origin>>> = HashMap::new();
        // One origin per target, shared by its files.
        let mut origins: HashMap<Owner, Arc<Origin>> = HashMap::new();
        for ((result, file), owner) in results.into_iter().zip(&unit.files).zip(owners) {
            if file.is_schema() {
                // Schema files only bring facts.
                lowered.extend(result.ok());
                continue;
            }
            let Some(origin) = owner else {
                // No target compiles it: not linted, and nothing about it is an error.
                outcome.unreached.push(file.abs.clone());
                continue;
            };
            match result {
                Ok(f) => {
                    lowered.push(f);
                    outcome.files += 1;
                    if settings.show_files {
                        outcome.linted.push(file.abs.clone());
                    }
                    let origin = origin.map(|o| {
                        origins
                            .entry(o)
                            .or_insert_with(|| Arc::new(o.describe(unit)))
                            .clone()
                    });
                    scope.insert(file.rel.clone(), origin);
                }
                Err(e) => errors.push(e),
            }
        }
        let levels = Levels { settings, unit };
        let started = std::time::Instant::now();
        // On the pool: with one job the check runs on the thread (and allocator arena) that
        // lowered the files, so it reuses the memory their syntax trees freed.
        let diagnostics = pool.install(|| analyzer.check(&lowered, &|rule| levels.enabled(rule)));
        if std::env::var_os("STALEGUARD_TIMINGS").is_some() {
            eprintln!(
                "staleguard: {} files read+lowered in {:.3}s on {} threads, checked in {:.3}s",
                lowered.len(),
                lowered_in.as_secs_f64(),
                pool.current_num_threads(),
                started.elapsed().as_secs_f64()
            );
        }
        // Freeing half a million small allocations is work too: spread it over the pool.
        pool.install(|| lowered.into_par_iter().for_each(drop));
        let mut texts: HashMap<String, Option<Arc<str>>> = HashMap::new();
        for diag in diagnostics {
            let Some(origin) = scope.get(&diag.primary.file) else {
                continue;
            };
            let Some(level) = levels.level(&diag) else {
                continue;
            };
            if let Some(changed) = changed
                && diag.rule != "parse-error"
                && !changed.contains(&unit.root.join(&diag.primary.file), diag.primary.start.line)
            {
                outcome.outside_diff += 1;
                continue;
            }
            let source = texts
                .entry(diag.primary.file.clone())
                .or_insert_with(|| reread(unit, &diag.primary.file))
                .clone();
            let fingerprint = baseline::fingerprint(&diag, source.as_deref());
            outcome.findings.push(Finding {
                diag,
                level,
                fingerprint,
                source,
                root: Some(root.clone()),
                origin: origin.clone(),
            });
        }
    }
    if let Some(path) = &settings.baseline {
        let mut known = Baseline::load(path)?;
        let before = outcome.findings.len();
        outcome
            .findings
            .retain(|f| f.is_bad_input() || !known.take(f));
        outcome.baselined = before - outcome.findings.len();
    }
    outcome.errors = errors;
    Ok(outcome)
}

/// A rule's level after the command line's `-D` / `-W` / `-A`, in order: a rule's own setting,
/// or `warnings` for whatever is a warning at that point. Also says whether the command line
/// set it.
pub fn command_line(
    levels: &[(LevelFlag, String)],
    rule: &str,
    mut level: Option<Level>,
) -> (Option<Level>, bool) {
    let mut set = false;
    for (flag, name) in levels {
        if name == rule || (name == "warnings" && level == Some(Level::Warning)) {
            level = match flag {
                LevelFlag::Deny => Some(Level::Error),
                LevelFlag::Warn => Some(Level::Warning),
                LevelFlag::Allow => None,
            };
            set = true;
        }
    }
    (level, set)
}

/// A target of the unit, by package and target index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Owner {
    krate: usize,
    target: usize,
}

impl Owner {
    fn describe(self, unit: &Unit) -> Origin {
        let c = &unit.crates[self.krate];
        Origin {
            package_id: c.id.clone(),
            manifest: c.manifest.clone(),
            target: c.targets[self.target].clone(),
        }
    }
}

/// Per file of the unit: `None` when no target's module tree reaches it, else the target that
/// reaches it (`Some(None)` for plain paths, which are all linted).
fn owners(unit: &Unit, results: &[Result<LoweredFile, InputError>]) -> Vec<Option<Option<Owner>>> {
    if unit.crates.is_empty() {
        return vec![Some(None); unit.files.len()];
    }
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let files: Vec<PathBuf> = unit.files.iter().map(|f| canonical(&f.abs)).collect();
    let mut roots = Vec::new();
    let mut targets = Vec::new();
    for (krate, c) in unit.crates.iter().enumerate() {
        for (target, t) in c.targets.iter().enumerate() {
            roots.push(canonical(&t.src_path));
            targets.push(Owner { krate, target });
        }
    }
    let reached = modtree::reach(&roots, &files, |i| {
        results[i].as_ref().ok().map(LoweredFile::module_edges)
    });
    (0..unit.files.len())
        .map(|i| reached.get(&i).map(|t| Some(targets[*t])))
        .collect()
}

/// The text of a unit's file with findings, read again after checking (`None` when it can no
/// longer be read as UTF-8; findings then render without a snippet).
fn reread(unit: &Unit, rel: &str) -> Option<Arc<str>> {
    let file = unit.files.iter().find(|f| f.rel == rel)?;
    let text = std::fs::read_to_string(&file.abs).ok()?;
    Some(Arc::from(text))
}

fn lower(analyzer: &Analyzer, file: &SourcePath) -> Result<LoweredFile, InputError> {
    // A schema file only adds facts: one that cannot be read (or is not UTF-8, a Latin-1 data
    // export) adds what can be read of it, and is never an error of the run.
    if file.is_schema() {
        let bytes = std::fs::read(&file.abs).unwrap_or_default();
        return Ok(analyzer.lower(&file.rel, &String::from_utf8_lossy(&bytes)));
    }
    let bytes = std::fs::read(&file.abs).map_err(|e| InputError {
        path: file.abs.display().to_string(),
        message: format!("cannot read file: {e}"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| InputError {
        path: file.abs.display().to_string(),
        message: format!(
            "file is not valid UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    Ok(analyzer.lower(&file.rel, &text))
}

/// The union of the unit's knowledge: workspace config plus every package's.
/// The names the unit's packages are imported by (their library targets'), each with the
/// package's directory as the files' paths write it.
fn crate_names(unit: &Unit) -> Vec<CrateName> {
    let mut out = Vec::new();
    for krate in &unit.crates {
        let Some(dir) = krate.manifest.parent() else {
            continue;
        };
        let dir = crate::discover::relative(dir, &unit.root);
        let dir = if dir == "." { String::new() } else { dir };
        for t in &krate.targets {
            if t.kind
                .iter()
                .any(|k| matches!(k.as_str(), "lib" | "rlib" | "dylib" | "proc-macro"))
            {
                out.push(CrateName {
                    dir: dir.clone(),
                    name: t.name.replace('-', "_"),
                });
            }
        }
    }
    out
}

fn knowledge(unit: &Unit) -> Knowledge {
    let mut k = unit.config.knowledge.clone();
    for p in &unit.packages {
        k.merge(&p.config.knowledge);
    }
    k
}

/// Rule levels for one unit: command line over package config over workspace config over the
/// rule's default.
struct Levels<'a> {
    settings: &'a Settings,
    unit: &'a Unit,
}

impl Levels<'_> {
    fn selected(&self, rule: &str) -> bool {
        let s = self.settings;
        !s.ignore.iter().any(|r| r == rule)
            && (s.select.is_empty() || s.select.iter().any(|r| r == rule))
    }

    fn from_config(config: &Config, rule: &str) -> Option<Option<Level>> {
        config.rules.get(rule).map(|l| l.level())
    }

    fn default_level(rule: &str) -> Option<Level> {
        registry::find(rule).map(|r| r.default_level)
    }

    /// The last command-line setting of `rule` (not of `warnings`).
    fn command_line_flag(&self, rule: &str) -> Option<LevelFlag> {
        self.settings
            .levels
            .iter()
            .rev()
            .find(|(_, r)| r == rule)
            .map(|(f, _)| *f)
    }

    fn enabled(&self, rule: &str) -> bool {
        if rule == "parse-error" {
            return true;
        }
        if !self.selected(rule) {
            return false;
        }
        // On the command line, a later `-D`/`-W` turns a rule on; `-A` off (unless
        // `-D warnings`-like settings could still raise it: they only act on warnings).
        match self.command_line_flag(rule) {
            Some(LevelFlag::Allow) => return false,
            Some(_) => return true,
            None => {}
        }
        let workspace =
            Self::from_config(&self.unit.config, rule).unwrap_or_else(|| Self::default_level(rule));
        workspace.is_some()
            || self
                .unit
                .packages
                .iter()
                .any(|p| Self::from_config(&p.config, rule).flatten().is_some())
    }

    fn level(&self, diag: &Diagnostic) -> Option<Level> {
        if diag.rule == "parse-error" {
            return Some(Level::Error);
        }
        if !self.selected(diag.rule) {
            return None;
        }
        command_line(&self.settings.levels, diag.rule, self.configured(diag)).0
    }

    /// The level from package config over workspace config over the rule's default.
    fn configured(&self, diag: &Diagnostic) -> Option<Level> {
        let package: Option<&PackageScope> = self
            .unit
            .packages
            .iter()
            .filter(|p| diag.primary.file.starts_with(&p.prefix))
            .max_by_key(|p| p.prefix.len());
        if let Some(level) = package.and_then(|p| Self::from_config(&p.config, diag.rule)) {
            return level;
        }
        if let Some(level) = Self::from_config(&self.unit.config, diag.rule) {
            return level;
        }
        Self::default_level(diag.rule).or(Some(diag.level))
    }
}
