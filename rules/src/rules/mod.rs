//! The rules, one file each. A rule is a declaration (name, level, summary, doc) and a `check`
//! function over one body's trace, effects and live state; it pushes diagnostics into a sink.

pub mod check_before_lock;
pub mod rpc_in_transaction;
pub mod timeout_without_operation_id;
pub mod token_deleted_before_effect;

use crate::diagnostic::{Diagnostic, Label, Level, Position, Span};
use crate::facts::{BodyId, Facts, PerBody};
use crate::ir::{Body, Sp};
use crate::kb::{BodyEffects, Eff, K};
use crate::parse::Lines;
use crate::query::State;
use crate::registry::RuleMeta;
use crate::summary::Summary;

/// Declares a rule's metadata from its doc comment.
macro_rules! declare_rule {
    ($(#[doc = $doc:literal])* $vis:vis static $id:ident = { name: $name:literal, level: $level:ident, summary: $summary:literal $(,)? };) => {
        $vis static $id: $crate::registry::RuleMeta = $crate::registry::RuleMeta {
            name: $name,
            default_level: $crate::diagnostic::Level::$level,
            summary: $summary,
            doc: concat!($($doc, "\n"),*),
        };
    };
}
pub(crate) use declare_rule;

/// A rule's check function.
pub type CheckFn = fn(&RuleCx<'_>, &mut Vec<Diagnostic>);

/// Every rule with a check, in catalogue order.
pub static CHECKS: &[(&RuleMeta, CheckFn)] = &[
    (&check_before_lock::RULE, check_before_lock::check),
    (&rpc_in_transaction::RULE, rpc_in_transaction::check),
    (
        &token_deleted_before_effect::RULE,
        token_deleted_before_effect::check,
    ),
    (
        &timeout_without_operation_id::RULE,
        timeout_without_operation_id::check,
    ),
];

/// What the whole crate knows, shared by every body's check.
pub struct CrateCx<'a> {
    pub paths: Vec<&'a str>,
    pub lines: Vec<&'a Lines>,
    pub bodies: Vec<&'a [Body]>,
    pub facts: &'a Facts<'a>,
    pub effects: &'a PerBody<BodyEffects>,
    pub summaries: &'a PerBody<Summary>,
}

impl CrateCx<'_> {
    pub fn body(&self, id: BodyId) -> &Body {
        &self.bodies[id.file as usize][id.body as usize]
    }
}

/// One body under check.
pub struct RuleCx<'a> {
    pub krate: &'a CrateCx<'a>,
    pub id: BodyId,
    pub body: &'a Body,
    pub fx: &'a BodyEffects,
    pub states: Vec<State>,
    pub detached: Vec<bool>,
    /// For each `Leave`, the index of its `Enter`.
    pub enter_of: Vec<Option<u32>>,
}

impl RuleCx<'_> {
    pub fn path(&self) -> &str {
        self.krate.paths[self.id.file as usize]
    }

    pub fn span(&self, sp: Sp) -> Span {
        to_span(self.path(), self.krate.lines[self.id.file as usize], sp)
    }

    pub fn ev_span(&self, i: u32) -> Span {
        self.span(self.body.events[i as usize].sp)
    }

    pub fn label(&self, i: u32, message: impl Into<String>) -> Label {
        Label {
            span: self.ev_span(i),
            message: message.into(),
        }
    }

    pub fn effs(&self, i: u32) -> &[Eff] {
        &self.fx.effs[i as usize]
    }

    pub fn has(&self, i: u32, kind: K) -> bool {
        self.effs(i).iter().any(|e| e.kind == kind)
    }

    pub fn eff(&self, i: u32, kind: K) -> Option<&Eff> {
        self.effs(i).iter().find(|e| e.kind == kind)
    }

    /// Index (exclusive) up to which events may run after event `i` on the same path: the end
    /// of the innermost diverging branch around `i`, or the end of the body.
    pub fn reach_end(&self, i: u32) -> u32 {
        let mut depth = 0i32;
        for j in (i as usize + 1)..self.body.events.len() {
            match &self.body.events[j].kind {
                crate::ir::Ev::Enter(_) => depth += 1,
                crate::ir::Ev::Leave => {
                    if depth == 0 {
                        if let Some(e) = self.enter_of[j]
                            && matches!(
                                self.body.events[e as usize].kind,
                                crate::ir::Ev::Enter(crate::ir::Region::Branch { diverges: true })
                            )
                        {
                            return j as u32;
                        }
                    } else {
                        depth -= 1;
                    }
                }
                crate::ir::Ev::Exit if depth == 0 => return j as u32,
                _ => {}
            }
        }
        self.body.events.len() as u32
    }

    /// Notes naming the summary chain behind an effect obtained through a call.
    pub fn chain_notes(&self, eff: &Eff) -> Vec<String> {
        let mut notes = Vec::new();
        let mut via = eff.via;
        let mut guard = 0;
        while let (Some(c), true) = (via, guard < 6) {
            guard += 1;
            let body = self.krate.body(c);
            let Some(sum) = self.krate.summaries.get(&c) else {
                break;
            };
            let Some(entry) = sum
                .effects
                .iter()
                .find(|e| e.0 == eff.kind && e.1 == eff.token)
                .or_else(|| sum.effects.iter().find(|e| e.0 == eff.kind))
            else {
                break;
            };
            let ev = &body.events[entry.3 as usize];
            let path = self.krate.paths[c.file as usize];
            match entry.4 {
                None => {
                    notes.push(format!(
                        "`{}` {} at {}:{}",
                        body.name(),
                        entry.5.what,
                        path,
                        ev.sp.line
                    ));
                    break;
                }
                Some(next) => {
                    notes.push(format!(
                        "`{}` calls `{}` at {}:{}",
                        body.name(),
                        self.krate.body(next).name(),
                        path,
                        ev.sp.line
                    ));
                    via = Some(next);
                }
            }
        }
        notes
    }

    pub fn diag(&self, meta: &RuleMeta, primary: u32, message: String) -> Diagnostic {
        Diagnostic {
            rule: meta.name,
            level: meta.default_level,
            message,
            primary: self.ev_span(primary),
            primary_label: None,
            labels: Vec::new(),
            help: None,
            notes: Vec::new(),
            function: Some(self.body.name().to_string()),
        }
    }

    /// Two tables (or keys, or places) that may be the same state.
    pub fn same_state(a: Option<&str>, b: Option<&str>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => {
                a == b
                    || a.strip_prefix(b).is_some_and(|r| r.starts_with('.'))
                    || b.strip_prefix(a).is_some_and(|r| r.starts_with('.'))
            }
            _ => true,
        }
    }
}

pub fn to_span(file: &str, lines: &Lines, sp: Sp) -> Span {
    Span {
        file: file.to_string(),
        start: Position {
            line: sp.line,
            column: sp.col,
        },
        end: Position {
            line: sp.end_line,
            column: sp.end_col,
        },
        byte_start: lines.byte(sp.line, sp.col) as usize,
        byte_end: lines.byte(sp.end_line, sp.end_col) as usize,
    }
}

pub fn level_of(meta: &RuleMeta) -> Level {
    meta.default_level
}
