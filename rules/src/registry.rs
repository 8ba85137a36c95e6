//! The one list of rules: id, default level, status, one-line summary and full doc.

use crate::Level;

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

static RULES: &[RuleMeta] = &[
    RuleMeta {
        name: "check-before-lock",
        default_level: Level::Error,
        summary: "state read and tested before the lock or transaction, not re-read after it",
        doc: "",
    },
    RuleMeta {
        name: "rpc-in-transaction",
        default_level: Level::Error,
        summary: "remote call while a database transaction is open",
        doc: "",
    },
    RuleMeta {
        name: "token-deleted-before-effect",
        default_level: Level::Error,
        summary: "idempotency token deleted before the effect, or checked and deleted in separate steps",
        doc: "",
    },
    RuleMeta {
        name: "timeout-without-operation-id",
        default_level: Level::Error,
        summary: "delayed task carries only the resource id and acts without checking the operation identity",
        doc: "",
    },
    RuleMeta {
        name: "parse-error",
        default_level: Level::Error,
        summary: "a file that could not be parsed as Rust",
        doc: "",
    },
    RuleMeta {
        name: "unused-suppression",
        default_level: Level::Warning,
        summary: "a `staleguard: allow(..)` comment that suppresses nothing",
        doc: "",
    },
];

/// Every rule, in catalogue order.
pub fn all() -> &'static [RuleMeta] {
    RULES
}

/// Looks a rule up by id.
pub fn find(name: &str) -> Option<&'static RuleMeta> {
    RULES.iter().find(|r| r.name == name)
}
