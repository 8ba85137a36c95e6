//! Lowering one fn body (with its closures and async blocks) into an ordered effect trace.

use super::Seq;
use super::macros;
use super::pat_names;
use super::types::type_ref;
use crate::ir::{
    Arg, ArgExtra, Assign, Bind, BindExtra, Call, Ev, Event, Region, Sp, Step, StructLit, Test,
    TypeRef,
};
use crate::name::Name;
use crate::parse::{LineIndex, MAX_DEPTH};
use crate::small::Small;
use crate::sql;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{BinOp, Block, Expr, Member, Pat, Stmt};

/// One step of a call chain as collected, outermost first: name, name span, argument list
/// (none for a `.field` step), awaited, tried, closing span.
type RawStep<'a> = (
    Name,
    Span,
    Option<&'a syn::punctuated::Punctuated<Expr, syn::Token![,]>>,
    bool,
    bool,
    Span,
);

/// Lowers a fn body. `params` are only used to seed nothing today; kept for symmetry.
pub fn lower_block(
    lines: &LineIndex<'_>,
    block: &Block,
    _params: &[(Name, TypeRef)],
) -> Vec<Event> {
    let mut lw = Lw {
        lines,
        ev: Vec::new(),
        scopes: Vec::new(),
        scratch: Vec::new(),
        depth: 0,
    };
    lw.block(block);
    lw.ev
}

pub(super) struct Lw<'a, 'b> {
    pub(super) lines: &'a LineIndex<'b>,
    pub(super) ev: Vec<Event>,
    scopes: Vec<Vec<Name>>,
    depth: u32,
    /// A buffer lent to [`arg_info`], always empty between uses.
    scratch: Vec<Name>,
}

const MAX_STR: usize = 96;

impl Lw<'_, '_> {
    fn push(&mut self, sp: Sp, kind: Ev) -> u32 {
        self.ev.push(Event { sp, kind });
        (self.ev.len() - 1) as u32
    }

    fn calls_since(&self, start: usize) -> Vec<u32> {
        (start..self.ev.len())
            .filter(|&i| matches!(self.ev[i].kind, Ev::Call(_)))
            .map(|i| i as u32)
            .collect()
    }

    /// Pushes the `Cond` for a test of `tested`, whose own events start at `start`, and returns
    /// its index.
    fn test(&mut self, sp: Sp, start: usize, tested: &[&Expr]) -> u32 {
        let calls = self.calls_since(start);
        let mut deps = Vec::new();
        for e in tested {
            paths(e, &mut deps, 0);
        }
        self.push(
            sp,
            Ev::Cond(Box::new(Test {
                deps: deps.into(),
                calls: calls.into(),
            })),
        )
    }

    /// Binds `names` (an `if let` / `while let` / match arm pattern) to what the `Cond` at
    /// `cond` tested.
    fn bind_tested(&mut self, sp: Sp, cond: u32, names: Vec<Name>) {
        if names.is_empty() {
            return;
        }
        let Ev::Cond(t) = &self.ev[cond as usize].kind else {
            return;
        };
        let bind = Bind::plain(names, t.deps.to_vec(), t.calls.to_vec());
        self.push(sp, Ev::Bind(Box::new(bind)));
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
            self.push(sp, Ev::Drop { name });
        }
    }

    fn stmt(&mut self, s: &Stmt) {
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
                    self.expr(&init.expr);
                    let calls = self.calls_since(start);
                    let mut deps = Vec::new();
                    paths(&init.expr, &mut deps, 0);
                    let mut strs = Vec::new();
                    strings(&init.expr, &mut strs, 0);
                    // SQL text held by the local (a string, or a prepared statement), not the
                    // result of running it.
                    let sql = if holds_sql_text(&init.expr) {
                        strs.iter().find_map(|s| sql::classify(s))
                    } else {
                        None
                    };
                    strs.retain(|s| s.len() <= MAX_STR && sql::classify(s).is_none());
                    let lit = struct_lit(&init.expr);
                    let closure = (matches!(&*init.expr, Expr::Closure(_) | Expr::Async(_))
                        && matches!(self.ev.get(start).map(|e| &e.kind), Some(Ev::Enter(_))))
                    .then_some(start as u32);
                    if let Some((_, diverge)) = &init.diverge {
                        self.push(
                            sp,
                            Ev::Cond(Box::new(Test {
                                deps: (deps.clone()).into(),
                                calls: (calls.clone()).into(),
                            })),
                        );
                        self.push(sp, Ev::Enter(Region::Branch { diverges: true }));
                        self.expr(diverge);
                        self.push(sp, Ev::Leave);
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
                            Ev::Bind(Box::new(
                                Bind::plain(names.clone(), deps, calls).with_extra(BindExtra {
                                    ty,
                                    strs,
                                    sql,
                                    lit,
                                    closure,
                                }),
                            )),
                        );
                    }
                } else {
                    self.push(
                        sp,
                        Ev::Bind(Box::new(
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
            Stmt::Expr(e, _) => {
                self.expr(e);
            }
            Stmt::Macro(m) => {
                let sp = self
                    .lines
                    .sp(first_span(&m.mac.path), m.mac.bang_token.span);
                self.mac(&m.mac, sp);
            }
            Stmt::Item(_) => {}
        }
    }

    /// Lowers an expression; returns the index of the call event when it is a call chain.
    pub(super) fn expr(&mut self, e: &Expr) -> Option<u32> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let r = self.expr_inner(e);
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self, e: &Expr) -> Option<u32> {
        match e {
            Expr::MethodCall(_) | Expr::Call(_) | Expr::Await(_) | Expr::Try(_) => {
                return self.chain(e);
            }
            Expr::Macro(m) => {
                let sp = self
                    .lines
                    .sp(first_span(&m.mac.path), m.mac.bang_token.span);
                return self.mac(&m.mac, sp);
            }
            Expr::If(i) => {
                let start = self.ev.len();
                let mut let_pats = Vec::new();
                self.cond_expr(&i.cond, &mut let_pats);
                let sp = self.lines.sp(i.if_token.span, end_span(&i.cond));
                let cond = self.test(sp, start, &[&i.cond]);
                let div = block_diverges(&i.then_branch);
                self.push(sp, Ev::Enter(Region::Branch { diverges: div }));
                self.bind_tested(sp, cond, let_pats);
                self.block(&i.then_branch);
                self.push(sp, Ev::Leave);
                if let Some((_, els)) = &i.else_branch {
                    let div = expr_diverges(els);
                    self.push(sp, Ev::Enter(Region::Branch { diverges: div }));
                    self.expr(els);
                    self.push(sp, Ev::Leave);
                }
            }
            Expr::Match(m) => {
                let start = self.ev.len();
                self.expr(&m.expr);
                let sp = self.lines.sp(m.match_token.span, end_span(&m.expr));
                let cond = self.test(sp, start, &[&m.expr]);
                for arm in &m.arms {
                    let asp = self
                        .lines
                        .sp(first_pat_span(&arm.pat), arm.fat_arrow_token.spans[1]);
                    self.push(
                        asp,
                        Ev::Enter(Region::Branch {
                            diverges: expr_diverges(&arm.body),
                        }),
                    );
                    let mut names = Vec::new();
                    pat_names(&arm.pat, &mut names);
                    self.bind_tested(asp, cond, names);
                    if let Pat::Guard(g) = &arm.pat {
                        let gstart = self.ev.len();
                        self.expr(&g.guard);
                        let gsp = self.lines.sp(g.if_token.span, end_span(&g.guard));
                        self.test(gsp, gstart, &[&g.guard]);
                    }
                    self.expr(&arm.body);
                    self.push(asp, Ev::Leave);
                }
            }
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(b) => self.block(&b.block),
            Expr::Const(b) => self.block(&b.block),
            Expr::TryBlock(b) => self.block(&b.block),
            Expr::Loop(l) => {
                let sp = self.lines.sp(l.loop_token.span, l.loop_token.span);
                self.push(sp, Ev::Enter(Region::Loop));
                self.block(&l.body);
                self.push(sp, Ev::Leave);
            }
            Expr::While(w) => {
                let sp = self.lines.sp(w.while_token.span, end_span(&w.cond));
                self.push(sp, Ev::Enter(Region::Loop));
                let start = self.ev.len();
                let mut let_pats = Vec::new();
                self.cond_expr(&w.cond, &mut let_pats);
                let cond = self.test(sp, start, &[&w.cond]);
                self.bind_tested(sp, cond, let_pats);
                self.block(&w.body);
                self.push(sp, Ev::Leave);
            }
            Expr::ForLoop(f) => {
                let start = self.ev.len();
                self.expr(&f.expr);
                let calls = self.calls_since(start);
                let sp = self.lines.sp(f.for_token.span, f.in_token.span);
                self.push(sp, Ev::Enter(Region::Loop));
                let mut names = Vec::new();
                pat_names(&f.pat, &mut names);
                let mut deps = Vec::new();
                paths(&f.expr, &mut deps, 0);
                self.push(sp, Ev::Bind(Box::new(Bind::plain(names, deps, calls))));
                self.block(&f.body);
                self.push(sp, Ev::Leave);
            }
            Expr::Closure(c) => {
                let sp = self.lines.sp(c.inputs_begin.span, c.inputs_end.span);
                self.push(sp, Ev::Enter(Region::Closure { call: None }));
                self.closure_body(c, Vec::new());
                self.push(sp, Ev::Leave);
            }
            Expr::Async(a) => {
                let sp = self.lines.sp(a.async_token.span, a.async_token.span);
                self.push(sp, Ev::Enter(Region::Closure { call: None }));
                self.block(&a.block);
                self.push(sp, Ev::Leave);
            }
            Expr::Assign(a) => {
                let start = self.ev.len();
                self.expr(&a.right);
                let calls = self.calls_since(start);
                let mut deps = Vec::new();
                paths(&a.right, &mut deps, 0);
                let sp = self.lines.sp(start_span(&a.left), end_span(&a.right));
                if let Some(target) = place(&a.left) {
                    self.push(
                        sp,
                        Ev::Assign(Box::new(Assign {
                            target,
                            deps: deps.into(),
                            calls: calls.into(),
                        })),
                    );
                }
            }
            Expr::Binary(b) => {
                if is_assign_op(&b.op) {
                    let start = self.ev.len();
                    self.expr(&b.right);
                    let calls = self.calls_since(start);
                    let mut deps = Vec::new();
                    paths(&b.right, &mut deps, 0);
                    paths(&b.left, &mut deps, 0);
                    let sp = self.lines.sp(start_span(&b.left), end_span(&b.right));
                    if let Some(target) = place(&b.left) {
                        self.push(
                            sp,
                            Ev::Assign(Box::new(Assign {
                                target,
                                deps: deps.into(),
                                calls: calls.into(),
                            })),
                        );
                    }
                } else {
                    let start = self.ev.len();
                    self.expr(&b.left);
                    self.expr(&b.right);
                    if matches!(
                        b.op,
                        BinOp::Eq(_)
                            | BinOp::Ne(_)
                            | BinOp::Lt(_)
                            | BinOp::Le(_)
                            | BinOp::Gt(_)
                            | BinOp::Ge(_)
                    ) {
                        // A comparison anywhere (`Ok(changed == 1)`, a filter predicate) tests
                        // its operands.
                        let sp = self.lines.sp(start_span(&b.left), end_span(&b.right));
                        self.test(sp, start, &[&b.left, &b.right]);
                    }
                }
            }
            Expr::Return(r) => {
                if let Some(x) = &r.expr {
                    self.expr(x);
                }
                let sp = self.lines.sp(r.return_token.span, r.return_token.span);
                self.push(sp, Ev::Exit);
            }
            Expr::Break(b) => {
                if let Some(x) = &b.expr {
                    self.expr(x);
                }
                let sp = self.lines.sp(b.break_token.span, b.break_token.span);
                self.push(sp, Ev::Exit);
            }
            Expr::Continue(c) => {
                let sp = self.lines.sp(c.continue_token.span, c.continue_token.span);
                self.push(sp, Ev::Exit);
            }
            Expr::Let(l) => {
                self.expr(&l.expr);
            }
            Expr::Unary(u) => {
                self.expr(&u.expr);
            }
            Expr::Reference(r) => {
                self.expr(&r.expr);
            }
            Expr::Paren(p) => return self.expr(&p.expr),
            Expr::Group(g) => return self.expr(&g.expr),
            Expr::Cast(c) => {
                self.expr(&c.expr);
            }
            Expr::Field(f) => {
                self.expr(&f.base);
            }
            Expr::Index(i) => {
                self.expr(&i.expr);
                self.expr(&i.index);
            }
            Expr::Tuple(t) => t.elems.each().for_each(|x| {
                self.expr(x);
            }),
            Expr::Array(t) => t.elems.each().for_each(|x| {
                self.expr(x);
            }),
            Expr::Struct(s) => {
                for f in s.fields.each() {
                    self.expr(&f.expr);
                }
                if let Some(r) = &s.rest {
                    self.expr(r);
                }
            }
            Expr::Range(r) => {
                if let Some(x) = &r.start {
                    self.expr(x);
                }
                if let Some(x) = &r.end {
                    self.expr(x);
                }
            }
            Expr::Repeat(r) => {
                self.expr(&r.expr);
            }
            _ => {}
        }
        None
    }

    fn closure_body(&mut self, c: &syn::ExprClosure, from: Vec<Name>) {
        let mut names = Vec::new();
        for p in c.inputs.each() {
            pat_names(p, &mut names);
        }
        if !names.is_empty() {
            let sp = self.lines.sp(c.inputs_begin.span, c.inputs_end.span);
            self.push(sp, Ev::Bind(Box::new(Bind::plain(names, from, Vec::new()))));
        }
        self.expr(&c.body);
    }

    /// An `if` / `while` condition; `let` patterns inside it are collected for the branch.
    fn cond_expr(&mut self, e: &Expr, let_pats: &mut Vec<Name>) {
        match e {
            Expr::Let(l) => {
                self.expr(&l.expr);
                pat_names(&l.pat, let_pats);
            }
            Expr::Binary(b) if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                self.cond_expr(&b.left, let_pats);
                self.cond_expr(&b.right, let_pats);
            }
            Expr::Paren(p) => self.cond_expr(&p.expr, let_pats),
            _ => {
                self.expr(e);
            }
        }
    }

    /// A method-call chain with its awaits and `?`s, as one call event.
    fn chain(&mut self, e: &Expr) -> Option<u32> {
        let end_tok = end_span(e);
        let mut raw: Vec<RawStep<'_>> = Vec::new();
        let mut cur = e;
        let mut awaited = false;
        let mut tried = false;
        loop {
            match cur {
                Expr::Try(t) => {
                    tried = true;
                    cur = &t.expr;
                }
                Expr::Await(a) => {
                    awaited = true;
                    cur = &a.base;
                }
                // `state.read().await.slots.get(k)`: a field of the value a call returned
                // stays in the chain as a `.slots` step (never a method name).
                Expr::Field(f)
                    if matches!(
                        &*f.base,
                        Expr::MethodCall(_) | Expr::Await(_) | Expr::Try(_)
                    ) && matches!(f.member, Member::Named(_)) =>
                {
                    let Member::Named(id) = &f.member else { break };
                    raw.push((
                        Name::display(&format_args!(".{id}")),
                        id.span(),
                        None,
                        awaited,
                        tried,
                        id.span(),
                    ));
                    awaited = false;
                    tried = false;
                    cur = &f.base;
                }
                Expr::MethodCall(m) => {
                    raw.push((
                        Name::display(&m.method),
                        m.method.span(),
                        Some(&m.args),
                        awaited,
                        tried,
                        m.paren_token.span.close(),
                    ));
                    awaited = false;
                    tried = false;
                    cur = &m.receiver;
                }
                Expr::Paren(p) => cur = &p.expr,
                Expr::Group(g) => cur = &g.expr,
                _ => break,
            }
        }
        let mut call = Call::default();
        // The root's own step (`f(..)`, `query!(..)`), when it has one.
        let mut root_step: Option<Step> = None;
        let root_start = start_span(cur);
        let mut deferred: Vec<&Expr> = Vec::new();
        match cur {
            Expr::Call(c) => {
                if let Expr::Path(p) = &*c.func {
                    call.func = p
                        .path
                        .segments
                        .iter()
                        .map(|s| Name::display(&s.ident))
                        .collect();
                    let name = call.func.last().cloned().unwrap_or_default();
                    let args = self.args(c.args.each(), &mut deferred);
                    let sp = self.lines.sp(root_start, c.paren_token.span.close());
                    root_step = Some(Step {
                        name,
                        args,
                        awaited,
                        tried,
                        sp,
                    });
                } else {
                    self.expr(&c.func);
                    for a in c.args.each() {
                        self.expr(a);
                    }
                }
            }
            Expr::Macro(m) => {
                let name = m
                    .mac
                    .path
                    .segments
                    .last()
                    .map(|s| Name::display(&s.ident))
                    .unwrap_or_default();
                if macros::is_query_macro(&name) {
                    call.func = m
                        .mac
                        .path
                        .segments
                        .iter()
                        .map(|s| Name::display(&s.ident))
                        .collect();
                    if let Some(last) = call.func.last_mut() {
                        *last = last.with_suffix("!");
                    }
                    let exprs = macros::parse_args(&m.mac.tokens);
                    let mut inner = Vec::new();
                    let args = self.args(exprs.iter(), &mut inner);
                    for d in inner {
                        self.expr(d);
                    }
                    let sp = self.lines.sp(root_start, m.mac.bang_token.span);
                    root_step = Some(Step {
                        name: name.with_suffix("!"),
                        args,
                        awaited,
                        tried,
                        sp,
                    });
                } else {
                    let sp = self.lines.sp(root_start, m.mac.bang_token.span);
                    self.mac(&m.mac, sp);
                }
            }
            _ => {
                if let Some(p) = place_parts(cur) {
                    call.recv = p.into();
                } else {
                    self.expr(cur);
                }
            }
        }
        // The root's step, then the method steps innermost first (`Small` collects a one-step
        // call, most calls, without a vector, and a longer one into an exactly sized one).
        call.steps = root_step
            .into_iter()
            .chain(
                raw.into_iter()
                    .rev()
                    .map(|(name, start, args, awaited, tried, close)| {
                        let args = match args {
                            Some(args) => self.args(args.each(), &mut deferred),
                            None => Small::Empty,
                        };
                        Step {
                            name,
                            args,
                            awaited,
                            tried,
                            sp: self.lines.sp(start, close),
                        }
                    }),
            )
            .collect();
        if call.steps.is_empty() || (deferred.is_empty() && is_noise(&call)) {
            return None;
        }
        // `timeout(d, client.post(url).send()).await` drives the inner future.
        if matches!(call.func_last(), "timeout" | "timeout_at") && call.steps[0].awaited {
            let inner: Vec<u32> = call.steps[0].args.iter().filter_map(|a| a.ev).collect();
            for j in inner {
                self.mark_awaited(j);
            }
        }
        let sp = self.lines.sp(root_start, end_tok);
        // `drop(guard)` ends a guard's life.
        let drop_name =
            (call.func.len() == 1 && call.func[0] == "drop" && call.steps[0].args.len() == 1)
                .then(|| call.steps[0].args[0].paths.first().cloned())
                .flatten();
        // Closure parameters of `rows.iter().filter(|r| ..)` derive from the receiver.
        let recv_root: Vec<Name> = call.recv.first().cloned().into_iter().collect();
        let idx = self.push(sp, Ev::Call(Box::new(call)));
        for d in deferred {
            self.push(sp, Ev::Enter(Region::Closure { call: Some(idx) }));
            match d {
                Expr::Closure(c) => self.closure_body(c, recv_root.clone()),
                Expr::Async(a) => self.block(&a.block),
                other => {
                    self.expr(other);
                }
            }
            self.push(sp, Ev::Leave);
        }
        if let Some(name) = drop_name {
            self.push(sp, Ev::Drop { name });
        }
        Some(idx)
    }

    fn args<'e>(
        &mut self,
        it: impl Iterator<Item = &'e Expr>,
        deferred: &mut Vec<&'e Expr>,
    ) -> Small<Arg> {
        it.map(|a| {
            let mut arg = arg_info(a, &mut self.scratch);
            if arg.closure {
                deferred.push(a);
            } else {
                arg.ev = self.expr(a);
            }
            arg
        })
        .collect()
    }

    /// A macro in statement or expression position.
    pub(super) fn mac(&mut self, m: &syn::Macro, sp: Sp) -> Option<u32> {
        let name = m
            .path
            .segments
            .last()
            .map(|s| Name::display(&s.ident))
            .unwrap_or_default();
        match name.as_str() {
            "select" => {
                for (pat, fut, body) in macros::select_branches(&m.tokens) {
                    let mut fut_call = Vec::new();
                    if let Some(f) = &fut
                        && let Some(idx) = self.expr(f)
                    {
                        self.mark_awaited(idx);
                        fut_call.push(idx);
                    }
                    self.push(
                        sp,
                        Ev::Enter(Region::Branch {
                            diverges: body.as_ref().is_some_and(expr_diverges),
                        }),
                    );
                    if let Some(p) = &pat {
                        let mut names = Vec::new();
                        pat_names(p, &mut names);
                        if !names.is_empty() {
                            self.push(
                                sp,
                                Ev::Bind(Box::new(Bind::plain(names, Vec::new(), fut_call))),
                            );
                        }
                    }
                    if let Some(b) = &body {
                        self.expr(b);
                    }
                    self.push(sp, Ev::Leave);
                }
            }
            "ensure" | "ensure_eq" => {
                let args = macros::parse_args(&m.tokens);
                let start = self.ev.len();
                let tested: Vec<&Expr> = args
                    .iter()
                    .take(if name.contains("eq") { 2 } else { 1 })
                    .collect();
                for a in &tested {
                    self.expr(a);
                }
                self.test(sp, start, &tested);
            }
            "bail" | "panic" | "unreachable" | "todo" | "unimplemented" => {
                self.push(sp, Ev::Exit);
            }
            _ if macros::is_query_macro(&name) => {
                let e = Expr::Macro(syn::ExprMacro {
                    attrs: Vec::new(),
                    mac: m.clone(),
                });
                return self.chain(&e);
            }
            "join" | "try_join" => {
                for a in macros::parse_args(&m.tokens) {
                    if let Some(idx) = self.expr(&a) {
                        self.mark_awaited(idx);
                    }
                }
            }
            _ => {
                // Re-parsing a macro's tokens costs; only when an effect can hide inside.
                if (macros::is_format_like(&name) || macros::is_lowered_macro(&name))
                    && macros::mentions_await(&m.tokens)
                {
                    for a in macros::parse_args(&m.tokens) {
                        self.expr(&a);
                    }
                }
            }
        }
        None
    }

    /// A future driven by `select!` / `join!` is awaited by the macro.
    fn mark_awaited(&mut self, idx: u32) {
        if let Some(Event {
            kind: Ev::Call(c), ..
        }) = self.ev.get_mut(idx as usize)
            && let Some(last) = c.steps.last_mut()
        {
            last.awaited = true;
        }
    }
}

fn is_assign_op(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// One segment of a place: an identifier, or a tuple field's index.
#[derive(Clone, Copy)]
enum Seg<'e> {
    Ident(&'e syn::Ident),
    Index(u32),
}

impl std::fmt::Display for Seg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seg::Ident(i) => std::fmt::Display::fmt(i, f),
            Seg::Index(n) => std::fmt::Display::fmt(n, f),
        }
    }
}

/// Visits, in order, the segments of the place `e` is (`a`, `self.db`, `job.payload.id`; `*x`
/// and `&x` see through) and says whether it is one. Nothing is visited when it is not. The one
/// walk behind [`place_parts`], [`place_head`] and [`PlaceText`].
fn place_segments<'e, F: FnMut(Seg<'e>)>(e: &'e Expr, visit: &mut F) -> bool {
    match e {
        Expr::Path(p) if p.qself.is_none() => {
            p.path
                .segments
                .iter()
                .for_each(|s| visit(Seg::Ident(&s.ident)));
            true
        }
        Expr::Field(f) => {
            if !place_segments(&f.base, visit) {
                return false;
            }
            visit(match &f.member {
                Member::Named(i) => Seg::Ident(i),
                Member::Unnamed(i) => Seg::Index(i.index),
            });
            true
        }
        Expr::Unary(u) => place_segments(&u.expr, visit),
        Expr::Reference(r) => place_segments(&r.expr, visit),
        Expr::Paren(p) => place_segments(&p.expr, visit),
        Expr::Group(g) => place_segments(&g.expr, visit),
        _ => false,
    }
}

/// The place `e` is, as its parts.
pub(super) fn place_parts(e: &Expr) -> Option<Vec<Name>> {
    let mut parts = Vec::new();
    place_segments(e, &mut |s| {
        parts.push(match s {
            Seg::Ident(i) => Name::display(i),
            Seg::Index(n) => Name::display(&n),
        })
    })
    .then_some(parts)
}

/// The first identifier and the number of segments of the place `e` is, without building it.
fn place_head(e: &Expr) -> Option<(&syn::Ident, usize)> {
    let (mut first, mut n) = (None, 0);
    let is_place = place_segments(e, &mut |s| {
        if let (0, Seg::Ident(i)) = (n, s) {
            first = Some(i);
        }
        n += 1;
    });
    first.filter(|_| is_place).map(|i| (i, n))
}

/// Writes a place as its parts joined with `.`, as `Name::join(&place_parts(e), ".")` would.
struct PlaceText<'a>(&'a Expr);

impl std::fmt::Display for PlaceText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut result = Ok(());
        let mut sep = "";
        place_segments(self.0, &mut |s| {
            if result.is_ok() {
                result = f
                    .write_str(sep)
                    .and_then(|()| std::fmt::Display::fmt(&s, f));
                sep = ".";
            }
        });
        result
    }
}

fn member(m: &Member) -> Name {
    match m {
        Member::Named(i) => Name::display(i),
        Member::Unnamed(i) => Name::display(&i.index),
    }
}

fn place(e: &Expr) -> Option<Name> {
    match e {
        Expr::Index(i) => place(&i.expr),
        Expr::MethodCall(m) => place(&m.receiver),
        _ => place_parts(e).map(|p| Name::join(&p, ".")),
    }
}

/// Dotted places read by an expression (`order.status`, `tx`, `self.db`).
pub(super) fn paths(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if depth > 48 || out.len() > 64 {
        return;
    }
    if !matches!(e, Expr::Unary(_) | Expr::Reference(_))
        && let Some((first, len)) = place_head(e)
    {
        // A local (`order`), a field of one (`order.id`, `self.db`), or a lowercase module
        // path; `Status::Pending` is a value, not a place. The text starts with the head.
        let s = if len == 1 {
            Name::display(first)
        } else {
            Name::display(&PlaceText(e))
        };
        let lower_head = || {
            s.chars()
                .next()
                .is_some_and(|c| c.is_lowercase() || c == '_')
        };
        if (len == 1 || lower_head()) && !out.contains(&s) {
            out.push(s);
        }
        return;
    }
    let d = depth + 1;
    match e {
        Expr::MethodCall(m) => {
            paths(&m.receiver, out, d);
            m.args.each().for_each(|a| paths(a, out, d));
        }
        Expr::Call(c) => c.args.each().for_each(|a| paths(a, out, d)),
        Expr::Await(a) => paths(&a.base, out, d),
        Expr::Try(t) => paths(&t.expr, out, d),
        Expr::Binary(b) => {
            paths(&b.left, out, d);
            paths(&b.right, out, d);
        }
        Expr::Unary(u) => paths(&u.expr, out, d),
        Expr::Reference(r) => paths(&r.expr, out, d),
        Expr::Paren(p) => paths(&p.expr, out, d),
        Expr::Group(g) => paths(&g.expr, out, d),
        Expr::Cast(c) => paths(&c.expr, out, d),
        Expr::Field(f) => paths(&f.base, out, d),
        Expr::Index(i) => {
            paths(&i.expr, out, d);
            paths(&i.index, out, d);
        }
        Expr::Let(l) => paths(&l.expr, out, d),
        Expr::Tuple(t) => t.elems.each().for_each(|a| paths(a, out, d)),
        Expr::Array(t) => t.elems.each().for_each(|a| paths(a, out, d)),
        Expr::Struct(s) => s.fields.each().for_each(|f| paths(&f.expr, out, d)),
        Expr::Closure(c) => paths(&c.body, out, d),
        Expr::Block(b) => block_paths(&b.block, out, d),
        Expr::Async(b) => block_paths(&b.block, out, d),
        Expr::If(i) => {
            paths(&i.cond, out, d);
            block_paths(&i.then_branch, out, d);
            if let Some((_, e)) = &i.else_branch {
                paths(e, out, d);
            }
        }
        Expr::Match(m) => {
            paths(&m.expr, out, d);
            for arm in &m.arms {
                paths(&arm.body, out, d);
            }
        }
        Expr::Macro(m) => {
            macros::token_paths(&m.mac.tokens, out);
            // Inline format arguments: `format!("hold:{seat_id}")`.
            if let Some(lit) = macros::first_literal_text(&m.mac.tokens) {
                macros::inline_args(&lit, out);
            }
        }
        Expr::Range(r) => {
            if let Some(x) = &r.start {
                paths(x, out, d);
            }
            if let Some(x) = &r.end {
                paths(x, out, d);
            }
        }
        _ => {}
    }
}

fn block_paths(b: &Block, out: &mut Vec<Name>, depth: u32) {
    for s in &b.stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(i) = &l.init {
                    paths(&i.expr, out, depth);
                }
            }
            Stmt::Expr(e, _) => paths(e, out, depth),
            Stmt::Macro(m) => macros::token_paths(&m.mac.tokens, out),
            Stmt::Item(_) => {}
        }
    }
}

/// Name literals in an expression (and the literal of `format!`-like macros).
pub(super) fn strings(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if depth > 32 || out.len() > 16 {
        return;
    }
    let d = depth + 1;
    match e {
        Expr::Lit(l) => {
            if let syn::Lit::Str(s) = &l.lit {
                out.push(Name::from(s.value()));
            }
        }
        Expr::Macro(m) => {
            let name = m
                .mac
                .path
                .segments
                .last()
                .map(|s| Name::display(&s.ident))
                .unwrap_or_default();
            if (macros::is_format_like(&name) || name == "concat")
                && let Some(s) = macros::first_literal(&m.mac.tokens)
            {
                out.push(s);
            }
        }
        Expr::MethodCall(m) => {
            strings(&m.receiver, out, d);
            m.args.each().for_each(|a| strings(a, out, d));
        }
        Expr::Call(c) => c.args.each().for_each(|a| strings(a, out, d)),
        Expr::Reference(r) => strings(&r.expr, out, d),
        Expr::Paren(p) => strings(&p.expr, out, d),
        Expr::Group(g) => strings(&g.expr, out, d),
        Expr::Await(a) => strings(&a.base, out, d),
        Expr::Try(t) => strings(&t.expr, out, d),
        Expr::Binary(b) => {
            strings(&b.left, out, d);
            strings(&b.right, out, d);
        }
        Expr::Array(a) => a.elems.each().for_each(|x| strings(x, out, d)),
        Expr::Tuple(a) => a.elems.each().for_each(|x| strings(x, out, d)),
        _ => {}
    }
}

fn struct_lit(e: &Expr) -> Option<StructLit> {
    match e {
        Expr::Struct(s) => Some(StructLit {
            ty: s
                .path
                .segments
                .last()
                .map(|x| Name::display(&x.ident))
                .unwrap_or_default(),
            fields: s.fields.each().map(|f| member(&f.member)).collect(),
        }),
        Expr::Call(c) => c.args.each().find_map(struct_lit),
        Expr::MethodCall(m) => {
            struct_lit(&m.receiver).or_else(|| m.args.each().find_map(struct_lit))
        }
        Expr::Reference(r) => struct_lit(&r.expr),
        Expr::Paren(p) => struct_lit(&p.expr),
        Expr::Await(a) => struct_lit(&a.base),
        Expr::Try(t) => struct_lit(&t.expr),
        _ => None,
    }
}

/// What the classifier needs to know about one argument. `scratch` is an empty buffer lent by
/// the caller (and left empty), so the usual one-place argument allocates nothing.
fn arg_info(e: &Expr, scratch: &mut Vec<Name>) -> Arg {
    let mut a = Arg::default();
    paths(e, scratch, 0);
    a.paths = scratch.drain(..).collect();
    let mut x = ArgExtra::default();
    let mut strs = Vec::new();
    strings(e, &mut strs, 0);
    for s in strs {
        if x.sql.is_none()
            && let Some(info) = sql::classify(&s)
        {
            x.sql = Some(info);
            continue;
        }
        if s.len() <= MAX_STR {
            x.strs.push(s);
        }
    }
    arg_scan(e, &mut x, 0);
    x.lit = struct_lit(e);
    if !x.is_empty() {
        a.extra = Some(Box::new(x));
    }
    a.mut_borrow = matches!(e, Expr::Reference(r) if r.mutability.is_some())
        || matches!(e, Expr::MethodCall(m) if m.method == "as_mut");
    a.closure = is_deferred(e);
    a
}

/// Closures and async blocks passed as arguments run later (or inside the callee), so they are
/// lowered after the call event: directly, or wrapped once (`Box::pin(async move { .. })`).
fn is_deferred(e: &Expr) -> bool {
    match e {
        Expr::Closure(_) | Expr::Async(_) => true,
        Expr::Call(c) => c
            .args
            .each()
            .any(|a| matches!(a, Expr::Closure(_) | Expr::Async(_))),
        Expr::MethodCall(m) => {
            matches!(&*m.receiver, Expr::Async(_) | Expr::Closure(_))
                || m.args
                    .each()
                    .any(|a| matches!(a, Expr::Closure(_) | Expr::Async(_)))
        }
        _ => false,
    }
}

/// Columns compared with `.eq(..)` & co. and function paths called, inside one argument.
fn arg_scan(e: &Expr, a: &mut ArgExtra, depth: u32) {
    if depth > 24 {
        return;
    }
    let d = depth + 1;
    match e {
        Expr::MethodCall(m) => {
            let name = Name::display(&m.method);
            if matches!(
                name.as_str(),
                "eq" | "ne"
                    | "gt"
                    | "lt"
                    | "ge"
                    | "le"
                    | "eq_any"
                    | "is_null"
                    | "is_not_null"
                    | "lte"
                    | "gte"
                    | "is_in"
                    | "like"
                    | "between"
            ) && let Some(col) = place_parts(&m.receiver).and_then(|p| p.last().cloned())
            {
                a.eq_cols.push(Name::from(col.to_ascii_lowercase()));
            }
            arg_scan(&m.receiver, a, d);
            m.args.each().for_each(|x| arg_scan(x, a, d));
        }
        Expr::Call(c) => {
            if let Expr::Path(p) = &*c.func {
                let s: Vec<Name> = p
                    .path
                    .segments
                    .iter()
                    .map(|s| Name::display(&s.ident))
                    .collect();
                if a.calls.len() < 8 {
                    a.calls.push(Name::join(&s, "::"));
                }
            }
            c.args.each().for_each(|x| arg_scan(x, a, d));
        }
        Expr::Reference(r) => arg_scan(&r.expr, a, d),
        Expr::Paren(p) => arg_scan(&p.expr, a, d),
        Expr::Unary(u) => arg_scan(&u.expr, a, d),
        Expr::Binary(b) => {
            arg_scan(&b.left, a, d);
            arg_scan(&b.right, a, d);
        }
        Expr::Struct(s) => s.fields.each().for_each(|f| arg_scan(&f.expr, a, d)),
        _ => {}
    }
}

fn block_diverges(b: &Block) -> bool {
    b.stmts.iter().any(|s| match s {
        Stmt::Expr(e, _) => expr_diverges(e),
        Stmt::Macro(m) => macro_diverges(&m.mac),
        _ => false,
    })
}

pub(super) fn expr_diverges(e: &Expr) -> bool {
    match e {
        Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => true,
        Expr::Block(b) => block_diverges(&b.block),
        Expr::Macro(m) => macro_diverges(&m.mac),
        Expr::If(i) => {
            block_diverges(&i.then_branch)
                && i.else_branch
                    .as_ref()
                    .is_some_and(|(_, e)| expr_diverges(e))
        }
        Expr::Try(t) => {
            matches!(&*t.expr, Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("Err")))
        }
        _ => false,
    }
}

fn macro_diverges(m: &syn::Macro) -> bool {
    m.path.segments.last_item().is_some_and(|s| {
        matches!(
            Name::display(&s.ident).as_str(),
            "bail" | "panic" | "unreachable" | "todo" | "unimplemented"
        )
    })
}

fn first_span(p: &syn::Path) -> Span {
    p.segments
        .first()
        .map(|s| s.ident.span())
        .unwrap_or_else(Span::call_site)
}

fn first_pat_span(p: &Pat) -> Span {
    match p {
        Pat::Ident(i) => i.ident.span(),
        Pat::Guard(g) => first_pat_span(&g.pat),
        Pat::Path(p) => first_span(&p.path),
        Pat::TupleStruct(t) => first_span(&t.path),
        Pat::Struct(s) => first_span(&s.path),
        Pat::Wild(w) => w.underscore_token.span,
        _ => p.span(),
    }
}

/// The left-most token of an expression, without building a token stream.
pub(super) fn start_span(e: &Expr) -> Span {
    match e {
        Expr::Path(p) => first_span(&p.path),
        Expr::Call(c) => start_span(&c.func),
        Expr::MethodCall(m) => start_span(&m.receiver),
        Expr::Field(f) => start_span(&f.base),
        Expr::Await(a) => start_span(&a.base),
        Expr::Try(t) => start_span(&t.expr),
        Expr::Macro(m) => first_span(&m.mac.path),
        Expr::Lit(l) => l.lit.span(),
        Expr::Reference(r) => r.and_token.span,
        Expr::Unary(u) => start_span(&u.expr),
        Expr::Paren(p) => p.paren_token.span.open(),
        Expr::Binary(b) => start_span(&b.left),
        Expr::Index(i) => start_span(&i.expr),
        Expr::Cast(c) => start_span(&c.expr),
        Expr::Struct(s) => first_span(&s.path),
        Expr::Async(a) => a.async_token.span,
        Expr::Closure(c) => c.inputs_begin.span,
        Expr::Block(b) => b.block.brace_token.span.open(),
        _ => Span::call_site(),
    }
}

/// The right-most token of an expression, without building a token stream.
pub(super) fn end_span(e: &Expr) -> Span {
    match e {
        Expr::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.span())
            .unwrap_or_else(Span::call_site),
        Expr::Call(c) => c.paren_token.span.close(),
        Expr::MethodCall(m) => m.paren_token.span.close(),
        Expr::Field(f) => match &f.member {
            Member::Named(i) => i.span(),
            Member::Unnamed(i) => i.span,
        },
        Expr::Await(a) => a.await_token.span,
        Expr::Try(t) => t.question_token.span,
        Expr::Macro(m) => m.mac.bang_token.span,
        Expr::Lit(l) => l.lit.span(),
        Expr::Reference(r) => end_span(&r.expr),
        Expr::Unary(u) => end_span(&u.expr),
        Expr::Paren(p) => p.paren_token.span.close(),
        Expr::Binary(b) => end_span(&b.right),
        Expr::Index(i) => i.bracket_token.span.close(),
        Expr::Let(l) => end_span(&l.expr),
        Expr::Block(b) => b.block.brace_token.span.close(),
        Expr::Struct(s) => s.brace_token.span.close(),
        _ => start_span(e),
    }
}

/// An expression whose value is SQL text or a prepared statement: a literal, `format!`,
/// `Name::from(..)`, `.to_string()`, `client.prepare(..).await`.
fn holds_sql_text(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) | Expr::Macro(_) => true,
        Expr::Reference(r) => holds_sql_text(&r.expr),
        Expr::Paren(p) => holds_sql_text(&p.expr),
        Expr::Try(t) => holds_sql_text(&t.expr),
        Expr::Await(a) => holds_sql_text(&a.base),
        Expr::MethodCall(m) => {
            let name = Name::display(&m.method);
            matches!(
                name.as_str(),
                "prepare" | "prepare_cached" | "prepare_typed"
            ) || matches!(
                name.as_str(),
                "to_string" | "to_owned" | "into" | "as_str" | "replace"
            ) && holds_sql_text(&m.receiver)
        }
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Path(p) if p.path.segments.last_item().is_some_and(|s| s.ident == "from" || s.ident == "AssertSqlSafe"))
        }
        _ => false,
    }
}

/// Std-only chains that no rule or summary can use: `x.clone()`, `v.iter().map(..).collect()`,
/// `Ok(..)`, `Arc::new(..)`, on a plain local or a constructor, with no `.await`, no `?`, no
/// SQL and no closure (a closure argument keeps the call, its region hangs off it).
fn is_noise(call: &Call) -> bool {
    const STEPS: &[&str] = &[
        "clone",
        "cloned",
        "copied",
        "to_string",
        "to_owned",
        "into",
        "unwrap",
        "expect",
        "unwrap_or",
        "unwrap_or_default",
        "ok",
        "map_err",
        "iter",
        "into_iter",
        "collect",
        "len",
        "is_empty",
        "is_some",
        "is_none",
        "is_ok",
        "is_err",
        "as_ref",
        "as_str",
        "as_slice",
        "as_deref",
        "borrow",
        "deref",
        "to_vec",
        "trim",
        "parse",
        "starts_with",
        "ends_with",
        "eq",
        "ne",
        "cmp",
        "partial_cmp",
        "hash",
        "fmt",
        "into_inner",
        "as_bytes",
        "to_lowercase",
        "to_uppercase",
        "chars",
        "bytes",
        "lines",
        "rev",
        "enumerate",
        "zip",
        "skip",
        "take",
        "saturating_sub",
        "saturating_add",
        "checked_add",
        "checked_sub",
        "abs",
        "max",
        "min",
        "sum",
        "count",
        "display",
    ];
    const FUNCS: &[&str] = &[
        "Ok",
        "Some",
        "Err",
        "new",
        "from",
        "default",
        "with_capacity",
        "from_secs",
        "from_millis",
        "from_str",
        "to_string",
        "format",
        "into",
        "clone",
        "len",
        "min",
        "max",
        "drop_in_place",
    ];
    if call
        .steps
        .iter()
        .any(|s| s.awaited || s.tried || s.args.iter().any(|a| a.sql().is_some() || a.closure))
    {
        return false;
    }
    let steps_noise = |skip: usize| {
        call.steps
            .iter()
            .skip(skip)
            .all(|s| STEPS.contains(&s.name.as_str()))
    };
    if call.func.is_empty() {
        return call.recv.len() == 1 && call.recv[0] != "self" && steps_noise(0);
    }
    let last = call.func_last();
    if call.func.len() == 1 {
        return matches!(last, "Ok" | "Some" | "Err") && steps_noise(1);
    }
    // `Type::new(..)`: only std containers and wrappers; a crate or client type may matter.
    let ty = call.func[call.func.len() - 2].as_str();
    FUNCS.contains(&last)
        && matches!(
            ty,
            "Arc"
                | "Rc"
                | "Box"
                | "Vec"
                | "Name"
                | "HashMap"
                | "HashSet"
                | "BTreeMap"
                | "BTreeSet"
                | "VecDeque"
                | "Duration"
                | "Instant"
                | "Cell"
                | "RefCell"
                | "PathBuf"
                | "Cow"
                | "Ok"
                | "Some"
                | "Default"
                | "Wrapping"
                | "AtomicBool"
                | "AtomicUsize"
                | "AtomicU64"
                | "Uuid"
                | "Utc"
                | "SystemTime"
        )
        && steps_noise(1)
}
