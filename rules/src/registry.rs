//! Every rule's metadata for the driver (`explain`, `rules`, SARIF, configuration, docs): the
//! rules of [`crate::rules::ALL`], then the two the analyzer itself reports (`parse-error`,
//! `unused-suppression`).

use crate::Level;
use crate::rules;

/// Static facts about one rule.
#[derive(Debug, Clone, Copy)]
pub struct RuleMeta {
    pub name: &'static str,
    pub default_level: Level,
    pub summary: &'static str,
    /// The full doc in Markdown (What it does / Why is this bad? / Example / Use instead /
    /// Known problems).
    pub doc: &'static str,
}

static PARSE_ERROR: RuleMeta = RuleMeta {
    name: "parse-error",
    default_level: Level::Error,
    summary: "a file that could not be parsed as Rust",
    doc: "### What it does\n\nReports a file that `syn` cannot parse as Rust. The file is skipped; the other files are still analysed.\n\n### Why is this bad?\n\nA file that is not analysed can hide any of the hazards the other rules look for.\n\n### Example\n\n```rust,ignore\nfn broken( {\n```\n\n### Use instead\n\nFix the syntax error (`cargo check` shows it), or exclude the file in `staleguard.toml`. A `staleguard: allow(parse-error)` comment does not hide it (a file that does not parse was not checked); it is reported as `unused-suppression`.\n\n### Known problems\n\nFiles that only parse with unstable syntax `syn` does not support are reported too.\n",
};

static UNUSED_SUPPRESSION: RuleMeta = RuleMeta {
    name: "unused-suppression",
    default_level: Level::Warning,
    summary: "a `staleguard: allow(..)` comment that suppresses nothing",
    doc: "### What it does\n\nReports each rule named in a `// staleguard: allow(rule, ..) -- reason` comment that suppresses no finding, that is unknown, or that cannot be suppressed (`parse-error`). A comment naming several rules gets one report per unused rule, pointing at its name.\n\n### Why is this bad?\n\nA stale suppression outlives the code it was written for and silently hides the next real finding on that line.\n\n### Example\n\n```rust,ignore\n// staleguard: allow(check-before-lock) -- fixed long ago\nlet order = load(id).await?;\n```\n\n### Use instead\n\nRemove the comment (or the unused rule from its list), or put it on the line the finding is reported on (or before the fn, impl or mod it should cover, above or below its doc comment and attributes).\n\n### Known problems\n\nA suppression for a rule that configuration disables is not reported.\n",
};

static ALL: std::sync::OnceLock<Vec<RuleMeta>> = std::sync::OnceLock::new();

/// Every rule, in catalogue order.
pub fn all() -> &'static [RuleMeta] {
    ALL.get_or_init(|| {
        rules::ALL
            .iter()
            .map(|r| &r.meta)
            .chain([&PARSE_ERROR, &UNUSED_SUPPRESSION])
            .map(|r| RuleMeta {
                doc: clean_doc(r.doc),
                ..*r
            })
            .collect()
    })
}

/// Doc comments arrive with the space after `///` on every line; drop it once (a one-time
/// allocation per rule, kept for the life of the program).
fn clean_doc(raw: &'static str) -> &'static str {
    if !raw.lines().all(|l| l.is_empty() || l.starts_with(' ')) {
        return raw;
    }
    let mut out = String::with_capacity(raw.len());
    for line in raw.lines() {
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    Box::leak(out.into_boxed_str())
}

/// The generated `docs/rules/<rule>.md` page of a rule.
pub fn doc_page(rule: &RuleMeta) -> String {
    format!(
        "<!-- generated from the rule declaration by `STALEGUARD_BLESS=1 cargo test -p staleguard-rules --test docs`; do not edit -->\n\n# `{}`\n\nDefault level: **{}**. {}.\n\nSuppress with `// staleguard: allow({}) -- reason`.\n\n{}",
        rule.name,
        rule.default_level.as_str(),
        capitalize(rule.summary),
        rule.name,
        rule.doc
    )
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The rules the analyzer checks (every rule but `parse-error` and `unused-suppression`), in
/// catalogue order.
pub fn rules() -> impl Iterator<Item = &'static RuleMeta> {
    all().iter().take(rules::ALL.len())
}

/// Looks a rule up by id.
pub fn find(name: &str) -> Option<&'static RuleMeta> {
    all().iter().find(|r| r.name == name)
}
