//! Lowering one fn body into its ordered effect trace: the [`BodyLowerer`] that holds the
//! events, blocks and statements (`let` bindings with what they hold). Expressions are in
//! `exprs.rs`, call chains in `chain.rs`, places and literals in `places.rs`, spans in
//! `spans.rs`.

use super::places::{paths, strings, struct_lit};
use super::spans::{first_span, start_span};
use super::types::type_ref;
use super::{Seq, conds, pat_names};
use crate::apis;
use crate::ir::{
    Bind, BindExtra, CallSpans, Discard, Event, EventKind, Region, Sp, Test, TestRole,
};
use crate::name::Name;
use crate::parse::LineIndex;
use crate::sql;
use syn::{Block, Expr, Pat, Stmt};

/// A lowered fn body: its events, the statements that drop a call's value, where the steps of
/// Redis-shaped calls are, and how many items (nested fns, structs) its blocks declare at any
/// depth.
pub struct Lowered {
    pub events: Vec<Event>,
    pub discards: Vec<Discard>,
    pub step_spans: Vec<CallSpans>,
    pub items: u32,
}

/// Lowers a fn body.
pub fn lower_block(lines: &LineIndex<'_>, block: &Block) -> Lowered {
    let mut lw = BodyLowerer {
        lines,
        ev: Vec::new(),
        scopes: Vec::new(),
        scratch: Vec::new(),
        depth: 0,
        discards: Vec::new(),
        step_spans: Vec::new(),
        items: 0,
        builders: Vec::new(),
    };
    lw.block(block);
    Lowered {
        events: lw.ev,
        discards: lw.discards,
        step_spans: lw.step_spans,
        items: lw.items,
    }
}

/// Lowers one body: the events so far, the locals each open block declared (they get a `Drop`
/// at its end), and the nesting depth (past [`crate::parse::MAX_DEPTH`] expressions are left
/// opaque).
pub(super) struct BodyLowerer<'a, 'b> {
    pub(super) lines: &'a LineIndex<'b>,
    pub(super) ev: Vec<Event>,
    pub(super) scopes: Vec<Vec<Name>>,
    pub(super) depth: u32,
    /// A buffer lent to `arg_info`, always empty between uses.
    pub(super) scratch: Vec<Name>,
    /// The statements that run one call and drop its value (see [`Discard`]).
    pub(super) discards: Vec<Discard>,
    /// Where the steps of the calls shaped like a Redis command are, by call event (see
    /// [`crate::ir::FixAnchors`]).
    pub(super) step_spans: Vec<CallSpans>,
    /// The items declared in the body's blocks, at any depth.
    pub(super) items: u32,
    /// The SQL text each local holding an sqlx `QueryBuilder` has been given so far, in source
    /// order (see [`BodyLowerer::builder_steps`]).
    pub(super) builders: Vec<(Name, String)>,
}

/// The longest string literal kept (longer ones are text, not keys or names).
pub(super) const MAX_STR: usize = 96;

impl BodyLowerer<'_, '_> {
    pub(super) fn push(&mut self, sp: Sp, kind: EventKind) -> u32 {
        self.ev.push(Event { sp, kind });
        (self.ev.len() - 1) as u32
    }

    pub(super) fn calls_since(&self, start: usize) -> Vec<u32> {
        (start..self.ev.len())
            .filter(|&i| matches!(self.ev[i].kind, EventKind::Call(_)))
            .map(|i| i as u32)
            .collect()
    }

    /// Pushes the `Cond` for a test of `tested`, whose own events start at `start`, and returns
    /// its index. `pats` are the patterns it matches (a `match`'s arms, an `if let`'s).
    pub(super) fn test(
        &mut self,
        sp: Sp,
        start: usize,
        tested: &[&Expr],
        role: TestRole,
        pats: Vec<Box<[Name]>>,
    ) -> u32 {
        let calls = self.calls_since(start);
        let mut deps = Vec::new();
        let mut values = Vec::new();
        for e in tested {
            paths(e, &mut deps, 0);
            if role != TestRole::Match {
                conds::values(e, &mut values, 0);
            }
        }
        let mut t = Test::plain(role, deps, calls);
        if role != TestRole::Match && !values.is_empty() {
            let mut strs = Vec::new();
            for e in tested {
                strings(e, &mut strs, 0);
            }
            t.str_lits = values.iter().all(|v| strs.contains(v));
        }
        t.values = values.into();
        t.pats = pats.into();
        t.negated = matches!(tested, [e] if conds::negated(e));
        if let [e] = tested {
            t.comparison = conds::comparison(e);
        }
        self.push(sp, EventKind::Cond(Box::new(t)))
    }

    /// Binds `names` (an `if let` / `while let` / match arm pattern) to what the `Cond` at
    /// `cond` tested.
    pub(super) fn bind_tested(&mut self, sp: Sp, cond: u32, names: Vec<Name>) {
        if names.is_empty() {
            return;
        }
        let EventKind::Cond(t) = &self.ev[cond as usize].kind else {
            return;
        };
        let bind = Bind::plain(names, t.deps.to_vec(), t.calls.to_vec());
        self.push(sp, EventKind::Bind(Box::new(bind)));
    }

    pub(super) fn block(&mut self, b: &Block) {
        self.scopes.push(Vec::new());
        for s in &b.stmts {
            self.stmt(s);
        }
        let names = self.scopes.pop().unwrap_or_default();
        let sp = self
            .lines
            .sp(b.brace_token.span.close(), b.brace_token.span.close());
        for name in names.into_iter().rev() {
            self.push(sp, EventKind::Drop { name });
        }
    }

    /// Records a statement that runs call `call` and drops its value: its whole lines when
    /// nothing but blanks and a line comment shares them, else the statement itself.
    fn discard(&mut self, call: u32, sp: Sp) {
        let sp = if self.lines.stands_alone(sp) {
            Sp {
                line: sp.line,
                col: 1,
                end_line: sp.end_line + 1,
                end_col: 1,
            }
        } else {
            sp
        };
        self.discards.push(Discard { call, sp });
    }

    pub(super) fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Local(l) => {
                let mut names = Vec::new();
                pat_names(&l.pat, &mut names);
                let ty = match &l.pat {
                    Pat::Type(t) => Some(type_ref(&t.ty)),
                    _ => None,
                };
                let start = self.ev.len();
                let sp = self.lines.sp(l.let_token.span, l.semi_token.span);
                let mut holds = false;
                if let Some(init) = &l.init {
                    let call = self.expr(&init.expr);
                    let wild = match &l.pat {
                        Pat::Wild(_) => true,
                        Pat::Type(t) => matches!(&*t.pat, Pat::Wild(_)),
                        _ => false,
                    };
                    if let Some(call) = call.filter(|_| wild && init.diverge.is_none()) {
                        self.discard(call, sp);
                    }
                    let calls = self.calls_since(start);
                    let mut deps = Vec::new();
                    paths(&init.expr, &mut deps, 0);
                    let mut strs = Vec::new();
                    strings(&init.expr, &mut strs, 0);
                    // SQL text held by the local (a string, or a prepared statement), not the
                    // result of running it.
                    let sql = if holds_sql_text(&init.expr) {
                        strs.iter().find_map(|s| sql::classify(s)).map(Box::new)
                    } else {
                        // `let sql = if fast { "SELECT .." } else { "SELECT .." };`: the arms'
                        // statements (the first one SQL text classifies).
                        let mut arms = Vec::new();
                        sql_arms(&init.expr, &mut arms, 0);
                        arms.iter()
                            .filter(|a| holds_sql_text(a))
                            .find_map(|a| {
                                let mut texts = Vec::new();
                                strings(a, &mut texts, 0);
                                texts.iter().find_map(|s| sql::classify(s))
                            })
                            .map(Box::new)
                            // A statement made with sea-query's builder.
                            .or_else(|| super::sea_query::statement(&init.expr).map(Box::new))
                    };
                    strs.retain(|s| s.len() <= MAX_STR && sql::classify(s).is_none());
                    let lit = struct_lit(&init.expr).or_else(|| doc_lit(&init.expr));
                    let closure = (matches!(&*init.expr, Expr::Closure(_) | Expr::Async(_))
                        && matches!(
                            self.ev.get(start).map(|e| &e.kind),
                            Some(EventKind::Enter(_))
                        ))
                    .then_some(start as u32);
                    if let Some((_, diverge)) = &init.diverge {
                        let mut pat = Vec::new();
                        conds::pattern(&l.pat, &mut pat, 0);
                        let mut t = Test::plain(TestRole::LetElse, deps.clone(), calls.clone());
                        t.pats = Box::new([pat.into()]);
                        self.push(sp, EventKind::Cond(Box::new(t)));
                        let fails = conds::fails(diverge);
                        self.push(
                            sp,
                            EventKind::Enter(Region::Branch {
                                diverges: true,
                                fails,
                                nothing: conds::answers_nothing(diverge),
                            }),
                        );
                        self.expr(diverge);
                        self.push(sp, EventKind::Leave);
                    }
                    if let ([name], Some(text)) = (names.as_slice(), query_builder_text(&init.expr))
                    {
                        self.builders.retain(|(n, _)| n != name);
                        self.builders.push((name.clone(), text));
                    }
                    // Only a local made by a call can hold a guard or a transaction: only those
                    // get a `Drop` at scope end. A bare literal binding carries nothing.
                    holds = !calls.is_empty();
                    let empty = deps.is_empty()
                        && calls.is_empty()
                        && strs.is_empty()
                        && sql.is_none()
                        && lit.is_none()
                        && ty.is_none()
                        && closure.is_none();
                    if !empty {
                        self.push(
                            sp,
                            EventKind::Bind(Box::new(
                                Bind::plain(names.clone(), deps, calls).with_extra(BindExtra {
                                    ty,
                                    strs,
                                    sql,
                                    lit: lit.map(Box::new),
                                    closure,
                                }),
                            )),
                        );
                    }
                } else {
                    self.push(
                        sp,
                        EventKind::Bind(Box::new(
                            Bind::plain(names.clone(), Vec::new(), Vec::new()).with_extra(
                                BindExtra {
                                    ty,
                                    ..BindExtra::default()
                                },
                            ),
                        )),
                    );
                }
                if holds && let Some(scope) = self.scopes.last_mut() {
                    scope.extend(names);
                }
            }
            Stmt::Expr(e, semi) => {
                let call = self.expr(e);
                if let (Some(call), Some(semi)) = (call, semi) {
                    let sp = self.lines.sp(start_span(e), semi.span);
                    self.discard(call, sp);
                }
            }
            Stmt::Macro(m) => {
                let sp = self
                    .lines
                    .sp(first_span(&m.mac.path), m.mac.bang_token.span);
                self.mac(&m.mac, sp);
            }
            Stmt::Item(_) => self.items += 1,
        }
    }
}

/// The values an `if` / `match` expression can take: the tail expressions of its arms.
fn sql_arms<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>, depth: u32) {
    let tail = |b: &'e Block| match b.stmts.last() {
        Some(Stmt::Expr(e, None)) => Some(e),
        _ => None,
    };
    if depth > 4 {
        return;
    }
    match e {
        Expr::If(i) => {
            if let Some(t) = tail(&i.then_branch) {
                out.push(t);
            }
            if let Some((_, els)) = &i.else_branch {
                match &**els {
                    Expr::Block(b) => out.extend(tail(&b.block)),
                    other => sql_arms(other, out, depth + 1),
                }
            }
        }
        Expr::Match(m) => {
            for arm in &m.arms {
                match &*arm.body {
                    Expr::Block(b) => out.extend(tail(&b.block)),
                    other => out.push(other),
                }
            }
        }
        _ => {}
    }
}

/// An expression whose value is SQL text or a prepared statement: a literal, `format!`,
/// `Name::from(..)`, `.to_string()`, `client.prepare(..).await`.
pub(super) fn holds_sql_text(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Macro(_) => true,
        Expr::Reference(r) => holds_sql_text(&r.expr),
        Expr::Paren(p) => holds_sql_text(&p.expr),
        Expr::Try(t) => holds_sql_text(&t.expr),
        Expr::Await(a) => holds_sql_text(&a.base),
        Expr::MethodCall(m) => {
            let name = Name::display(&m.method);
            apis::PREPARE_STEPS.contains(&name.as_str())
                || apis::TEXT_PASSTHROUGH_STEPS.contains(&name.as_str())
                    && holds_sql_text(&m.receiver)
        }
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if p.path.segments.last_item().is_some_and(|s| apis::TEXT_WRAPPER_FNS.iter().any(|w| s.ident == w)))
        }
        _ => false,
    }
}

/// The SQL text an sqlx `QueryBuilder` starts with (`QueryBuilder::new("UPDATE jobs SET ..")`,
/// `QueryBuilder::<Postgres>::new(..)`): the literal, or nothing when the text is not one.
fn query_builder_text(e: &Expr) -> Option<String> {
    let Expr::Call(c) = e else { return None };
    let Expr::Path(p) = &*c.func else { return None };
    let segs: Vec<String> = p
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let [.., ty, ctor] = segs.as_slice() else {
        return None;
    };
    if ty != "QueryBuilder" || !matches!(ctor.as_str(), "new" | "with_arguments") {
        return None;
    }
    Some(match c.args.first() {
        Some(Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) => s.value(),
        _ => String::new(),
    })
}

/// A BSON document bound to a local (`let update = doc! { "$set": { .. } };`), kept as a literal
/// of the type `doc!` whose fields are the document's (see [`macros::doc_fields`]): the
/// collection call it is handed to reads them.
fn doc_lit(e: &Expr) -> Option<crate::ir::StructLit> {
    let Expr::Macro(m) = e else { return None };
    if super::last_segment(&m.mac.path) != "doc" {
        return None;
    }
    let (fields, values) = super::macros::doc_fields(&m.mac.tokens).into_iter().unzip();
    Some(crate::ir::StructLit {
        ty: Name::new(crate::ir::DOC_LITERAL),
        module: None,
        fields,
        values,
        whole: true,
    })
}
