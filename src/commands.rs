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
            write!(out, "{}", meta.doc)?;
            if !meta.doc.ends_with('\n') {
                writeln!(out)?;
            }
            Ok(())
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
