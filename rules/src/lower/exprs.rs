//! Lowering expressions in evaluation order: branches, matches and loops as regions, closures
//! and async blocks, assignments, comparisons (as tests), exits, and macros in statement or
//! expression position.

use super::body::BodyLowerer;
use super::macros;
use super::pat_names;
use super::places::{paths, place, value_text};
use super::spans::{end_span, first_pat_span, first_span, start_span};
use super::{Seq, conds, last_segment};
use crate::apis;
use crate::ir::{Assign, Bind, Event, EventKind, Region, Sp, TestRole};
use crate::name::Name;
use crate::parse::MAX_DEPTH;
use syn::{BinOp, Block, Expr, Pat, Stmt};

impl BodyLowerer<'_, '_> {
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

    pub(super) fn expr_inner(&mut self, e: &Expr) -> Option<u32> {
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
                let cond = self.test(sp, start, &[&i.cond], TestRole::If, let_patterns(&i.cond));
                let div = block_diverges(&i.then_branch);
                let fails = conds::block_fails(&i.then_branch);
                self.push(
                    sp,
                    EventKind::Enter(Region::Branch {
                        diverges: div,
                        fails,
                        nothing: conds::block_answers_nothing(&i.then_branch),
                    }),
                );
                self.bind_tested(sp, cond, let_pats);
                self.block(&i.then_branch);
                self.push(sp, EventKind::Leave);
                if let Some((_, els)) = &i.else_branch {
                    let div = expr_diverges(els);
                    let fails = conds::fails(els);
                    self.push(
                        sp,
                        EventKind::Enter(Region::Branch {
                            diverges: div,
                            fails,
                            nothing: conds::answers_nothing(els),
                        }),
                    );
                    self.expr(els);
                    self.push(sp, EventKind::Leave);
                }
            }
            Expr::Match(m) => {
                let start = self.ev.len();
                self.expr(&m.expr);
                let sp = self.lines.sp(m.match_token.span, end_span(&m.expr));
                let arms: Vec<Box<[Name]>> = m
                    .arms
                    .iter()
                    .map(|a| {
                        let mut v = Vec::new();
                        let pat = match &a.pat {
                            Pat::Guard(g) => &*g.pat,
                            p => p,
                        };
                        conds::pattern(pat, &mut v, 0);
                        v.into()
                    })
                    .collect();
                // Every arm's constants are string literals (`"paid" => .., _ => ..`).
                let str_lits = m.arms.iter().all(|a| {
                    let mut consts = Vec::new();
                    conds::pattern(&a.pat, &mut consts, 0);
                    let mut strs = Vec::new();
                    conds::pattern_strs(&a.pat, &mut strs);
                    consts.len() == strs.len()
                }) && arms.iter().any(|a| !a.is_empty());
                let cond = self.test(sp, start, &[&m.expr], TestRole::Match, arms);
                if let EventKind::Cond(t) = &mut self.ev[cond as usize].kind {
                    t.str_lits = str_lits;
                }
                for arm in &m.arms {
                    let asp = self
                        .lines
                        .sp(first_pat_span(&arm.pat), arm.fat_arrow_token.spans[1]);
                    self.push(
                        asp,
                        EventKind::Enter(Region::Branch {
                            diverges: expr_diverges(&arm.body),
                            fails: conds::fails(&arm.body),
                            nothing: conds::answers_nothing(&arm.body),
                        }),
                    );
                    let mut names = Vec::new();
                    pat_names(&arm.pat, &mut names);
                    self.bind_tested(asp, cond, names);
                    if let Pat::Guard(g) = &arm.pat {
                        let gstart = self.ev.len();
                        self.expr(&g.guard);
                        let gsp = self.lines.sp(g.if_token.span, end_span(&g.guard));
                        self.test(gsp, gstart, &[&g.guard], TestRole::Guard, Vec::new());
                    }
                    self.expr(&arm.body);
                    self.push(asp, EventKind::Leave);
                }
            }
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(b) => self.block(&b.block),
            Expr::Const(b) => self.block(&b.block),
            Expr::TryBlock(b) => self.block(&b.block),
            Expr::Loop(l) => {
                let sp = self.lines.sp(l.loop_token.span, l.loop_token.span);
                self.push(sp, EventKind::Enter(Region::Loop));
                self.block(&l.body);
                self.push(sp, EventKind::Leave);
            }
            Expr::While(w) => {
                let sp = self.lines.sp(w.while_token.span, end_span(&w.cond));
                self.push(sp, EventKind::Enter(Region::Loop));
                let start = self.ev.len();
                let mut let_pats = Vec::new();
                self.cond_expr(&w.cond, &mut let_pats);
                let cond = self.test(
                    sp,
                    start,
                    &[&w.cond],
                    TestRole::While,
                    let_patterns(&w.cond),
                );
                self.bind_tested(sp, cond, let_pats);
                self.block(&w.body);
                self.push(sp, EventKind::Leave);
            }
            Expr::ForLoop(f) => {
                let start = self.ev.len();
                self.expr(&f.expr);
                let calls = self.calls_since(start);
                let sp = self.lines.sp(f.for_token.span, f.in_token.span);
                self.push(sp, EventKind::Enter(Region::Loop));
                let mut names = Vec::new();
                pat_names(&f.pat, &mut names);
                let mut deps = Vec::new();
                paths(&f.expr, &mut deps, 0);
                self.push(
                    sp,
                    EventKind::Bind(Box::new(Bind::plain(names, deps, calls))),
                );
                self.block(&f.body);
                self.push(sp, EventKind::Leave);
            }
            Expr::Closure(c) => {
                let sp = self.lines.sp(c.inputs_begin.span, c.inputs_end.span);
                self.push(sp, EventKind::Enter(Region::Closure { call: None }));
                self.closure_body(c, Vec::new());
                self.push(sp, EventKind::Leave);
            }
            Expr::Async(a) => {
                let sp = self.lines.sp(a.async_token.span, a.async_token.span);
                self.push(sp, EventKind::Enter(Region::Closure { call: None }));
                self.block(&a.block);
                self.push(sp, EventKind::Leave);
            }
            Expr::Assign(a) => {
                self.expr(&a.right);
                let mut deps = Vec::new();
                paths(&a.right, &mut deps, 0);
                let sp = self.lines.sp(start_span(&a.left), end_span(&a.right));
                if let Some(target) = place(&a.left) {
                    self.push(
                        sp,
                        EventKind::Assign(Box::new(Assign {
                            target,
                            deps: deps.into(),
                            value: value_text(&a.right, true),
                        })),
                    );
                } else {
                    // Not a plain place: the left side calls (`*map.entry(k).or_insert(0) = v`,
                    // `guard.lock().unwrap().n = v`), and those calls are what writes.
                    self.expr(&a.left);
                }
            }
            Expr::Binary(b) => {
                if is_assign_op(&b.op) {
                    self.expr(&b.right);
                    let mut deps = Vec::new();
                    paths(&b.right, &mut deps, 0);
                    paths(&b.left, &mut deps, 0);
                    let sp = self.lines.sp(start_span(&b.left), end_span(&b.right));
                    if let Some(target) = place(&b.left) {
                        self.push(
                            sp,
                            EventKind::Assign(Box::new(Assign {
                                target,
                                deps: deps.into(),
                                value: None,
                            })),
                        );
                    } else {
                        // `*counts.entry(k).or_insert(0) += 1`: the calls on the left write.
                        self.expr(&b.left);
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
                        self.test(sp, start, &[e], TestRole::Other, Vec::new());
                    }
                }
            }
            Expr::Return(r) => {
                if let Some(x) = &r.expr {
                    self.expr(x);
                }
                let sp = self.lines.sp(r.return_token.span, r.return_token.span);
                self.push(sp, EventKind::Exit);
            }
            Expr::Break(b) => {
                if let Some(x) = &b.expr {
                    self.expr(x);
                }
                let sp = self.lines.sp(b.break_token.span, b.break_token.span);
                self.push(sp, EventKind::Exit);
            }
            Expr::Continue(c) => {
                let sp = self.lines.sp(c.continue_token.span, c.continue_token.span);
                self.push(sp, EventKind::Exit);
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
            // `state.settings.read().await.max_pins`: a field copied out of a guard the same
            // expression takes keeps its place in the chain, so that the guard is known for a
            // temporary one (dropped at the end of the statement), not a guard held.
            Expr::Field(f) if matches!(f.member, syn::Member::Named(_)) && takes_guard(&f.base) => {
                return self.chain(e);
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

    pub(super) fn closure_body(&mut self, c: &syn::ExprClosure, from: Vec<Name>) {
        let mut names = Vec::new();
        for p in c.inputs.each() {
            pat_names(p, &mut names);
        }
        if !names.is_empty() {
            let sp = self.lines.sp(c.inputs_begin.span, c.inputs_end.span);
            self.push(
                sp,
                EventKind::Bind(Box::new(Bind::plain(names, from, Vec::new()))),
            );
        }
        self.expr(&c.body);
    }

    /// An `if` / `while` condition; `let` patterns inside it are collected for the branch.
    pub(super) fn cond_expr(&mut self, e: &Expr, let_pats: &mut Vec<Name>) {
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

    /// A macro in statement or expression position.
    pub(super) fn mac(&mut self, m: &syn::Macro, sp: Sp) -> Option<u32> {
        let name = last_segment(&m.path);
        let name = name.as_str();
        if apis::SELECT_MACROS.contains(&name) {
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
                    EventKind::Enter(Region::Branch {
                        diverges: body.as_ref().is_some_and(expr_diverges),
                        fails: body.as_ref().is_some_and(conds::fails),
                        nothing: body.as_ref().is_some_and(conds::answers_nothing),
                    }),
                );
                if let Some(p) = &pat {
                    let mut names = Vec::new();
                    pat_names(p, &mut names);
                    if !names.is_empty() {
                        self.push(
                            sp,
                            EventKind::Bind(Box::new(Bind::plain(names, Vec::new(), fut_call))),
                        );
                    }
                }
                if let Some(b) = &body {
                    self.expr(b);
                }
                self.push(sp, EventKind::Leave);
            }
        } else if apis::ASSERTION_MACROS.contains(&name) {
            let args = macros::parse_args(&m.tokens);
            let start = self.ev.len();
            let tested: Vec<&Expr> = args
                .iter()
                .take(if name.contains("eq") { 2 } else { 1 })
                .collect();
            for a in &tested {
                self.expr(a);
            }
            self.test(sp, start, &tested, TestRole::Other, Vec::new());
        } else if apis::DIVERGING_MACROS.contains(&name) {
            self.push(sp, EventKind::Exit);
        } else if macros::is_query_macro(name) {
            let e = Expr::Macro(syn::ExprMacro {
                attrs: Vec::new(),
                mac: m.clone(),
            });
            return self.chain(&e);
        } else if apis::JOIN_MACROS.contains(&name) {
            for a in macros::parse_args(&m.tokens) {
                if let Some(idx) = self.expr(&a) {
                    self.mark_awaited(idx);
                }
            }
        } else if (macros::is_format_like(name) || macros::is_lowered_macro(name))
            && macros::mentions_await(&m.tokens)
        {
            // Re-parsing a macro's tokens costs; only when an effect can hide inside.
            for a in macros::parse_args(&m.tokens) {
                self.expr(&a);
            }
        } else if !apis::CODE_FREE_MACROS.contains(&name) {
            self.wrapped_code(m, sp);
        }
        None
    }

    /// The program's code a macro of its own wraps: each `{..}` group among its tokens that
    /// parses as statements (`db_run! { conn: sqlite { .. } postgres { .. } }`: alternatives,
    /// so each is a branch that may run), and its closure or block arguments
    /// (`with_conn!(pool, |c| async move { .. })`).
    fn wrapped_code(&mut self, m: &syn::Macro, sp: Sp) {
        // Deeper code is left opaque, as expressions past `MAX_DEPTH` are.
        if !macros::shallow(&m.tokens, 64) {
            return;
        }
        if !matches!(m.delimiter, syn::MacroDelimiter::Brace(_)) && macros::has_code_args(&m.tokens)
        {
            let args = macros::parse_args(&m.tokens);
            // `with_transaction!(pool, |tx| async move { .. })`: a macro of the crate named for
            // a transaction, handed a pool and a closure, runs the closure in one, as
            // `pool.transaction(|tx| ..)` does.
            if let [recv, closure @ Expr::Closure(_)] = args.as_slice()
                && macros::names_transaction(&last_segment(&m.path))
            {
                let call = Expr::MethodCall(syn::ExprMethodCall {
                    attrs: Vec::new(),
                    receiver: Box::new(recv.clone()),
                    dot_token: Default::default(),
                    method: syn::Ident::new(
                        "transaction",
                        m.path
                            .segments
                            .last()
                            .map_or_else(proc_macro2::Span::call_site, |s| s.ident.span()),
                    ),
                    turbofish: None,
                    paren_token: Default::default(),
                    args: std::iter::once(closure.clone()).collect(),
                });
                self.expr(&call);
                return;
            }
            let code: Vec<Expr> = args
                .into_iter()
                .filter(|a| matches!(a, Expr::Closure(_) | Expr::Async(_) | Expr::Block(_)))
                .collect();
            if !code.is_empty() {
                for a in &code {
                    self.expr(a);
                }
                return;
            }
        }
        // A call handed to the macro as its first argument (`ok_or!(charge(id), e => ..)`,
        // `log_err!(store.save(&row).await)`): the call runs where the macro is.
        if !matches!(m.delimiter, syn::MacroDelimiter::Brace(_))
            && !macros::is_format_like(&last_segment(&m.path))
            && let Some(first) = macros::first_call_arg(&m.tokens)
        {
            self.expr(&first);
            return;
        }
        // A braced body that is itself code (`attempt! { async with_tx!(..)? }`,
        // `stream! { let x = f().await; yield x; }`): its statements run where the macro is.
        if matches!(m.delimiter, syn::MacroDelimiter::Brace(_))
            && let Some(stmts) = macros::code_body(&m.tokens)
        {
            for st in &stmts {
                self.stmt(st);
            }
            return;
        }
        for group in macros::brace_groups(&m.tokens) {
            let Ok(stmts) = syn::parse::Parser::parse2(syn::Block::parse_within, group) else {
                continue;
            };
            if stmts.is_empty() {
                continue;
            }
            self.push(
                sp,
                EventKind::Enter(Region::Branch {
                    diverges: false,
                    fails: false,
                    nothing: false,
                }),
            );
            for st in &stmts {
                self.stmt(st);
            }
            self.push(sp, EventKind::Leave);
        }
    }

    /// A future driven by `select!` / `join!` is awaited by the macro.
    pub(super) fn mark_awaited(&mut self, idx: u32) {
        if let Some(Event {
            kind: EventKind::Call(c),
            ..
        }) = self.ev.get_mut(idx as usize)
            && let Some(last) = c.steps.last_mut()
        {
            last.awaited = true;
        }
    }
}

/// The patterns of the `let`s in an `if` / `while` condition (`if let Some(x) = a && let Ok(y) = b`).
fn let_patterns(e: &Expr) -> Vec<Box<[Name]>> {
    let mut out = Vec::new();
    let mut todo = vec![e];
    while let Some(e) = todo.pop() {
        match e {
            Expr::Let(l) => {
                let mut v = Vec::new();
                conds::pattern(&l.pat, &mut v, 0);
                out.push(v.into());
            }
            Expr::Binary(b) if matches!(b.op, BinOp::And(_) | BinOp::Or(_)) => {
                todo.push(&b.right);
                todo.push(&b.left);
            }
            Expr::Paren(p) => todo.push(&p.expr),
            _ => {}
        }
    }
    out
}

pub(super) fn is_assign_op(op: &BinOp) -> bool {
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

pub(super) fn block_diverges(b: &Block) -> bool {
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

pub(super) fn macro_diverges(m: &syn::Macro) -> bool {
    apis::DIVERGING_MACROS.contains(&last_segment(&m.path).as_str())
}

/// Does the expression end by taking a lock guard (`x.read().await`, `m.lock().unwrap()`,
/// `rw.write()`: the lock steps `kb::sync` knows)?
fn takes_guard(e: &Expr) -> bool {
    match e {
        Expr::Await(a) => takes_guard(&a.base),
        Expr::Try(t) => takes_guard(&t.expr),
        Expr::MethodCall(m) if matches!(m.method.to_string().as_str(), "unwrap" | "expect") => {
            takes_guard(&m.receiver)
        }
        Expr::MethodCall(m) => {
            let name = m.method.to_string();
            m.args.is_empty()
                && [
                    apis::READ_GUARD_STEPS,
                    apis::WRITE_GUARD_STEPS,
                    apis::MUTEX_LOCK_STEPS,
                ]
                .iter()
                .any(|steps| steps.contains(&name.as_str()))
        }
        _ => false,
    }
}
