//! Redis commands as the fixes of `token-deleted-before-effect` and `processing-without-lease`
//! see them: one command written as a connection method (`con.get(&key).await?`) or as
//! `redis::cmd("GET").arg(&key).query_async(&mut con).await?`, with its connection, key and
//! other arguments, and the edits that rename it or give it more arguments.

use crate::diagnostic::Edit;
use crate::ir::{Arg, Call, EventKind, Sp, StepSpan};
use crate::name::Name;
use crate::query;
use crate::rules::RuleCx;

/// One Redis command of a call chain.
pub(crate) struct Command<'a> {
    /// The command, upper case: `GET`, `DEL`, `SETNX`, `EXPIRE` (a method's name without its
    /// underscores: `set_nx` is `SETNX`, `get_del` `GETDEL`).
    pub name: String,
    /// The connection, as a dotted place (`con`, `self.redis`).
    pub conn: Name,
    pub key: &'a Arg,
    /// The arguments after the key, in order.
    pub args: Vec<&'a Arg>,
    call: &'a Call,
    /// Where each step of the call is (see [`Call::spans`]).
    spans: &'a [StepSpan],
    /// Written as a method (`con.get(..)`), not as `redis::cmd(..)`.
    method: bool,
}

/// The steps that run a `redis::cmd(..)` on a connection.
const RUN_STEPS: &[&str] = &["query_async", "query"];

/// The Redis command of event `i`, when it is a call in one of the plain shapes (see
/// [`command`]).
pub(crate) fn command_at<'a>(cx: &RuleCx<'a>, i: u32) -> Option<Command<'a>> {
    // Only a chain shaped like a Redis command keeps its spans, which the fixes edit by.
    let spans = cx.fix_anchors().steps(i)?;
    match &cx.body.events[i as usize].kind {
        EventKind::Call(call) => command(call, spans),
        _ => None,
    }
}

/// The Redis command a call chain is, when it is one of the two plain shapes: a method on a
/// connection place whose first argument is the key, or `cmd("NAME")` (a string literal)
/// followed only by `.arg(..)`s, the key first, and a run step on a connection place.
fn command<'a>(call: &'a Call, spans: &'a [StepSpan]) -> Option<Command<'a>> {
    let first = call.steps.first()?;
    if call.func.is_empty() {
        let (key, args) = first.args.split_first()?;
        if call.recv.is_empty() || first.name.starts_with('.') {
            return None;
        }
        return Some(Command {
            name: first.name.replace('_', "").to_ascii_uppercase(),
            conn: Name::join(&call.recv, "."),
            key,
            args: args.iter().collect(),
            call,
            spans,
            method: true,
        });
    }
    if call.func_last() != "cmd" || first.args.len() != 1 {
        return None;
    }
    let literal = &first.args[0];
    let [name] = literal.strs() else { return None };
    if !literal.paths.is_empty() || literal.value() != Some(name) {
        return None;
    }
    let mut args = Vec::new();
    let mut conn = None;
    for s in &call.steps[1..] {
        match s.name.as_str() {
            "arg" if conn.is_none() && s.args.len() == 1 => args.push(&s.args[0]),
            n if conn.is_none() && RUN_STEPS.contains(&n) => {
                conn = Some(s.args.first()?.paths.first()?.clone());
            }
            _ if conn.is_some() => {}
            _ => return None,
        }
    }
    let key = args.first().copied()?;
    Some(Command {
        name: name.to_ascii_uppercase(),
        conn: conn?,
        key,
        args: args[1..].to_vec(),
        call,
        spans,
        method: false,
    })
}

impl Command<'_> {
    /// The same key expression (the same places, literals and calls).
    pub fn same_key(&self, other: &Command<'_>) -> bool {
        let (a, b) = (self.key, other.key);
        a.paths == b.paths
            && a.strs() == b.strs()
            && a.value() == b.value()
            && a.calls() == b.calls()
            && (!a.paths.is_empty() || !a.strs().is_empty() || a.value().is_some())
    }

    /// The same connection and the same key expression.
    pub fn same_target(&self, other: &Command<'_>) -> bool {
        self.conn == other.conn && self.same_key(other)
    }

    /// Written as a method on the connection.
    pub fn is_method(&self) -> bool {
        self.method
    }

    /// Does nothing between events `a` (this command) and `b` touch its key in Redis or
    /// rebind a local the key is made of?
    pub fn untouched_between(&self, cx: &RuleCx<'_>, a: u32, b: u32) -> bool {
        let key = cx.effs(a).find(|e| e.kv).and_then(|e| e.table.as_deref());
        let roots: Vec<&str> = self.key.paths.iter().map(|p| query::first(p)).collect();
        (a + 1..b).all(|i| {
            !cx.effs(i)
                .any(|e| e.kv && query::same_state(e.table.as_deref(), key))
                && match &cx.body.events[i as usize].kind {
                    EventKind::Bind(b) => !b.names.iter().any(|n| roots.contains(&n.as_str())),
                    EventKind::Assign(x) => !roots.contains(&query::first(&x.target)),
                    _ => true,
                }
        })
    }

    /// Where step `i` of the call is.
    fn step_span(&self, i: usize) -> StepSpan {
        self.spans.get(i).copied().unwrap_or_default()
    }

    /// The edit that makes it command `command`: a method renamed to `method`
    /// (`get` → `get_del`), or the `cmd("..")` literal replaced (`cmd("GET")` →
    /// `cmd("GETDEL")`, in the literal's case).
    pub fn rename(&self, cx: &RuleCx<'_>, method: &str, command: &str) -> Edit {
        let first = &self.call.steps[0];
        if self.method {
            let sp = self.step_span(0).sp;
            let end_col = sp.col + first.name.chars().count() as u32;
            return Edit {
                span: cx.span(Sp {
                    end_line: sp.line,
                    end_col,
                    ..sp
                }),
                replacement: method.to_string(),
            };
        }
        let old = first.args[0].strs()[0].as_str();
        let command = if old.chars().any(|c| c.is_ascii_lowercase()) {
            command.to_ascii_lowercase()
        } else {
            command.to_string()
        };
        Edit {
            span: cx.span(self.step_span(0).sp),
            replacement: format!("{}(\"{command}\")", Name::join(&self.call.func, "::")),
        }
    }

    /// The edit that adds arguments after the last one: `method` inside a method's
    /// parentheses (`, opts`), or `.arg(..)` steps (`cmd_args`, each the text of one argument)
    /// after the last `.arg(..)` of a `cmd(..)`.
    pub fn append(&self, cx: &RuleCx<'_>, method: &str, cmd_args: &[&str]) -> Edit {
        if self.method {
            let first = self.step_span(0);
            let close = Sp {
                line: first.sp.end_line,
                col: first.sp.end_col - 1,
                end_line: first.sp.end_line,
                end_col: first.sp.end_col - 1,
            };
            let replacement = if first.trailing_comma {
                format!("{method}, ")
            } else {
                format!(", {method}")
            };
            return Edit {
                span: cx.span(close),
                replacement,
            };
        }
        let last_arg = self
            .call
            .steps
            .iter()
            .rposition(|s| s.name == "arg")
            .map_or(self.step_span(0).sp, |i| self.step_span(i).sp);
        let after = Sp {
            line: last_arg.end_line,
            col: last_arg.end_col,
            end_line: last_arg.end_line,
            end_col: last_arg.end_col,
        };
        Edit {
            span: cx.span(after),
            replacement: cmd_args.iter().map(|a| format!(".arg({a})")).collect(),
        }
    }
}
