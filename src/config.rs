//! Configuration: `staleguard.toml`, `[workspace.metadata.staleguard]` or
//! `[package.metadata.staleguard]`, read with spans and validated into [`Config`].
//!
//! Every problem is collected (not just the first) and points at its key or value in the file,
//! with a "did you mean" for near misses.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use miette::{Diagnostic, NamedSource, SourceSpan};
use staleguard_rules::{Knowledge, Level, registry};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::suggest::did_you_mean;

/// The configured level of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleLevel {
    Allow,
    Warn,
    Deny,
}

impl RuleLevel {
    /// The diagnostic level this setting produces, or `None` when the rule is off.
    pub fn level(self) -> Option<Level> {
        match self {
            RuleLevel::Allow => None,
            RuleLevel::Warn => Some(Level::Warning),
            RuleLevel::Deny => Some(Level::Error),
        }
    }
}

/// A validated configuration (possibly empty).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// Per-rule levels from the `[rules]` table.
    pub rules: BTreeMap<String, RuleLevel>,
    /// Glob patterns (relative to the config's directory) of files not to lint.
    pub exclude: Vec<String>,
    /// Names of the project's own effectful functions, from the `[knowledge]` table.
    pub knowledge: Knowledge,
}

/// One problem in a configuration file.
#[derive(Debug)]
pub struct ConfigProblem {
    message: String,
    help: Option<String>,
    span: SourceSpan,
}

/// All the problems of one configuration file.
#[derive(Debug)]
pub struct ConfigError {
    path: String,
    src: NamedSource<String>,
    problems: Vec<ConfigProblem>,
}

const TOP_KEYS: &[&str] = &["rules", "exclude", "knowledge"];
const LEVELS: &[&str] = &["allow", "warn", "deny"];
/// Where in a file the staleguard table lives.
#[derive(Debug, Clone, Copy)]
pub enum Section {
    /// The whole file (`staleguard.toml`).
    Root,
    /// `[workspace.metadata.staleguard]` of a `Cargo.toml`.
    WorkspaceMetadata,
    /// `[package.metadata.staleguard]` of a `Cargo.toml`.
    PackageMetadata,
}

impl Section {
    fn path(self) -> &'static [&'static str] {
        match self {
            Section::Root => &[],
            Section::WorkspaceMetadata => &["workspace", "metadata", "staleguard"],
            Section::PackageMetadata => &["package", "metadata", "staleguard"],
        }
    }
}

/// Reads `section` of the TOML file at `path`. `Ok(None)` when a `Cargo.toml` has no such
/// section.
pub fn load(path: &Path, section: Section) -> Result<Option<Config>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            return Err(ConfigError::single(
                path,
                String::new(),
                format!("cannot read configuration: {err}"),
                0..0,
            ));
        }
    };
    parse(path, text, section)
}

/// Parses configuration text (see [`load`]).
pub fn parse(path: &Path, text: String, section: Section) -> Result<Option<Config>, ConfigError> {
    let mut problems = Vec::new();
    let config = {
        let root = match DeTable::parse(&text) {
            Ok(root) => root,
            Err(err) => {
                let span = err.span().unwrap_or(0..0);
                let message = format!("invalid TOML: {}", err.message().trim_end());
                return Err(ConfigError::single(path, text.clone(), message, span));
            }
        };
        let mut table: &DeTable = root.get_ref();
        let mut found = true;
        for key in section.path() {
            match table.get(*key).map(|v| v.get_ref()) {
                Some(DeValue::Table(inner)) => table = inner,
                Some(_) => {
                    let span = table.get(*key).map(|v| v.span()).unwrap_or(0..0);
                    problems.push(ConfigProblem::new(
                        format!("`{key}` must be a table"),
                        None,
                        span,
                    ));
                    found = false;
                    break;
                }
                None => {
                    found = false;
                    break;
                }
            }
        }
        if !found && problems.is_empty() {
            return Ok(None);
        }
        let mut config = Config {
            source: Some(path.to_path_buf()),
            ..Config::default()
        };
        if found {
            validate(table, &mut config, &mut problems);
        }
        config
    };
    if problems.is_empty() {
        Ok(Some(config))
    } else {
        problems.sort_by_key(|p| p.span.offset());
        Err(ConfigError {
            path: shown(path),
            src: NamedSource::new(shown(path), text),
            problems,
        })
    }
}

fn validate(table: &DeTable, config: &mut Config, problems: &mut Vec<ConfigProblem>) {
    for (key, value) in table.iter() {
        let name: &str = key.get_ref();
        match name {
            "rules" => rules(value, config, problems),
            "exclude" => {
                if let Some(list) = strings(value, "exclude", problems) {
                    for (pattern, span) in list {
                        match globset::Glob::new(&pattern) {
                            Ok(_) => config.exclude.push(pattern),
                            Err(err) => problems.push(ConfigProblem::new(
                                format!("invalid glob `{pattern}`: {}", err.kind()),
                                None,
                                span,
                            )),
                        }
                    }
                }
            }
            "knowledge" => knowledge(value, config, problems),
            _ => problems.push(unknown("key", name, TOP_KEYS.iter().copied(), key.span())),
        }
    }
}

fn rules(value: &Spanned<DeValue>, config: &mut Config, problems: &mut Vec<ConfigProblem>) {
    let DeValue::Table(table) = value.get_ref() else {
        problems.push(wrong_type("rules", "a table", value));
        return;
    };
    for (key, level) in table.iter() {
        let rule: &str = key.get_ref();
        if registry::find(rule).is_none() {
            problems.push(unknown(
                "rule",
                rule,
                registry::all().iter().map(|r| r.name),
                key.span(),
            ));
            continue;
        }
        let DeValue::String(text) = level.get_ref() else {
            problems.push(wrong_type(
                rule,
                "one of \"allow\", \"warn\", \"deny\"",
                level,
            ));
            continue;
        };
        let parsed = match text.as_ref() {
            "allow" => RuleLevel::Allow,
            "warn" => RuleLevel::Warn,
            "deny" => RuleLevel::Deny,
            other => {
                problems.push(unknown(
                    "level",
                    other,
                    LEVELS.iter().copied(),
                    level.span(),
                ));
                continue;
            }
        };
        config.rules.insert(rule.to_string(), parsed);
    }
}

fn knowledge(value: &Spanned<DeValue>, config: &mut Config, problems: &mut Vec<ConfigProblem>) {
    let DeValue::Table(table) = value.get_ref() else {
        problems.push(wrong_type("knowledge", "a table", value));
        return;
    };
    for (key, names) in table.iter() {
        let name: &str = key.get_ref();
        let Some(slot) = config.knowledge.list_mut(name) else {
            problems.push(unknown(
                "knowledge key",
                name,
                Knowledge::KEYS.iter().map(|k| k.key),
                key.span(),
            ));
            continue;
        };
        if let Some(list) = strings(names, name, problems) {
            slot.extend(list.into_iter().map(|(s, _)| s));
        }
    }
}

/// An array of strings, with each string's span.
fn strings(
    value: &Spanned<DeValue>,
    key: &str,
    problems: &mut Vec<ConfigProblem>,
) -> Option<Vec<(String, Range<usize>)>> {
    let DeValue::Array(items) = value.get_ref() else {
        problems.push(wrong_type(key, "an array of strings", value));
        return None;
    };
    let mut out = Vec::new();
    for item in items.iter() {
        match item.get_ref() {
            DeValue::String(s) => out.push((s.to_string(), item.span())),
            _ => problems.push(wrong_type(key, "an array of strings", item)),
        }
    }
    Some(out)
}

fn unknown<'a>(
    what: &str,
    name: &str,
    known: impl IntoIterator<Item = &'a str> + Clone,
    span: Range<usize>,
) -> ConfigProblem {
    match did_you_mean(name, known.clone()) {
        Some(close) => ConfigProblem::new(
            format!("unknown {what} `{name}`, did you mean `{close}`?"),
            None,
            span,
        ),
        None => ConfigProblem::new(
            format!("unknown {what} `{name}`"),
            Some(format!(
                "expected one of {}",
                known
                    .into_iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            span,
        ),
    }
}

fn wrong_type(key: &str, expected: &str, value: &Spanned<DeValue>) -> ConfigProblem {
    ConfigProblem::new(
        format!(
            "wrong type for `{key}`: expected {expected}, found {}",
            value.get_ref().type_str()
        ),
        None,
        value.span(),
    )
}

/// The path as the user will recognise it: relative to the current directory when below it.
fn shown(path: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    path.strip_prefix(&cwd)
        .unwrap_or(path)
        .display()
        .to_string()
}

impl ConfigProblem {
    fn new(message: String, help: Option<String>, span: Range<usize>) -> Self {
        ConfigProblem {
            message,
            help,
            span: span.into(),
        }
    }
}

impl ConfigError {
    fn single(path: &Path, text: String, message: String, span: Range<usize>) -> Self {
        ConfigError {
            path: shown(path),
            src: NamedSource::new(shown(path), text),
            problems: vec![ConfigProblem::new(message, None, span)],
        }
    }
}

impl std::fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigProblem {}

impl Diagnostic for ConfigProblem {
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn std::fmt::Display>)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(
            miette::LabeledSpan::new_primary_with_span(None, self.span),
        )))
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "{}", one.message),
            many => write!(
                f,
                "{} problems in configuration `{}`",
                many.len(),
                self.path
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Diagnostic for ConfigError {
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => one.help(),
            _ => None,
        }
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        match self.problems.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.problems.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|p| p as &dyn Diagnostic))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{RuleLevel, Section, parse};

    #[test]
    fn valid_config_is_read_into_its_type() {
        let text = r#"
exclude = ["src/gen/**"]
[rules]
check-before-lock = "deny"
rpc-in-transaction = "allow"
[knowledge]
remote-calls = ["PaymentGateway::charge"]
token-deletes = ["Tokens::remove", "Tokens::take"]
"#;
        let config = parse(
            Path::new("staleguard.toml"),
            text.to_string(),
            Section::Root,
        )
        .expect("valid")
        .expect("present");
        assert_eq!(config.exclude, ["src/gen/**"]);
        assert_eq!(config.rules["check-before-lock"], RuleLevel::Deny);
        assert_eq!(config.rules["rpc-in-transaction"], RuleLevel::Allow);
        assert_eq!(config.knowledge.remote_calls, ["PaymentGateway::charge"]);
        assert_eq!(
            config.knowledge.token_deletes,
            ["Tokens::remove", "Tokens::take"]
        );
        assert!(config.knowledge.locks.is_empty());
    }

    #[test]
    fn metadata_sections_are_optional() {
        let manifest = "[package]\nname = \"a\"\n";
        let none = parse(
            Path::new("Cargo.toml"),
            manifest.to_string(),
            Section::PackageMetadata,
        )
        .expect("valid");
        assert!(none.is_none());
        let with = format!(
            "{manifest}\n[package.metadata.staleguard.rules]\ncheck-before-lock = \"warn\"\n"
        );
        let config = parse(Path::new("Cargo.toml"), with, Section::PackageMetadata)
            .expect("valid")
            .expect("present");
        assert_eq!(config.rules["check-before-lock"], RuleLevel::Warn);
        let workspace = parse(
            Path::new("Cargo.toml"),
            manifest.to_string(),
            Section::WorkspaceMetadata,
        )
        .expect("valid");
        assert!(workspace.is_none());
    }

    #[test]
    fn every_problem_is_collected() {
        let text =
            "[rules]\nnope = \"deny\"\ncheck-before-lock = \"never\"\n[knowledge]\nlocks = [1]\n";
        let err = parse(
            Path::new("staleguard.toml"),
            text.to_string(),
            Section::Root,
        )
        .expect_err("invalid");
        let messages: Vec<String> = err.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].starts_with("unknown rule `nope`"));
        assert!(messages[1].starts_with("unknown level `never`"));
        assert!(messages[2].starts_with("wrong type for `locks`"));
    }
}
