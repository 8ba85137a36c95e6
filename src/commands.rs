//! The informational commands: `explain <rule>` and `rules`.

use std::io::{self, Write};

use serde_json::json;
use staleguard_rules::registry;

use crate::args::ListFormat;
use crate::settings::known_rule;

/// Prints a rule's full documentation (Markdown).
pub fn explain(rule: &str, out: &mut dyn Write) -> Result<io::Result<()>, String> {
    let meta = known_rule(rule)?;
    Ok((|| {
        if meta.doc.trim().is_empty() {
            writeln!(out, "# {}\n\n{}", meta.name, meta.summary)?;
            writeln!(out, "\nDefault level: {}.", meta.default_level.as_str())
        } else {
            writeln!(out, "{}", dedent(meta.doc).trim_end())
        }
    })())
}

/// Lists every rule with its default level and summary.
pub fn rules(format: ListFormat, out: &mut dyn Write) -> io::Result<()> {
    let rules = registry::all();
    match format {
        ListFormat::Json => {
            let list: Vec<_> = rules
                .iter()
                .map(|r| json!({ "name": r.name, "level": r.default_level.as_str(), "summary": r.summary }))
                .collect();
            let text = serde_json::to_string_pretty(&list).map_err(io::Error::other)?;
            writeln!(out, "{text}")
        }
        ListFormat::Human => {
            let width = rules.iter().map(|r| r.name.len()).max().unwrap_or(0);
            for r in rules {
                writeln!(
                    out,
                    "{:<width$}  {:<7}  {}",
                    r.name,
                    r.default_level.as_str(),
                    r.summary
                )?;
            }
            Ok(())
        }
    }
}

/// Removes the indentation common to every non-blank line (docs taken from `///` comments keep
/// the space after the slashes).
pub fn dedent(doc: &str) -> String {
    let indent = doc
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    doc.lines()
        .map(|l| l.get(indent..).unwrap_or_else(|| l.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
        .trim_matches('\n')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::dedent;

    #[test]
    fn dedent_removes_only_the_common_indent() {
        assert_eq!(
            dedent(" # Title\n\n text\n   code\n"),
            "# Title\n\ntext\n  code"
        );
        assert_eq!(dedent("flat\n  more"), "flat\n  more");
    }
}
