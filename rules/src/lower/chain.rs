//! Lowering a call chain (`self.http.post(url).json(&b).send().await?`) into one call event:
//! its root (a receiver place or a function path), its steps with their `.await`s and `?`s,
//! and what the classifier needs of each argument. Closures passed as arguments are lowered
//! after the call, as regions that hang off it.

use super::body::{BodyLowerer, MAX_STR};
use super::macros;
use super::places::{array_items, paths, place_parts, strings, struct_lit, value_text};
use super::spans::{end_span, start_span};
use super::{Seq, last_segment, segments};
use crate::apis;
use crate::ir::{Arg, ArgExtra, Call, EventKind, Region, Step, StepSpan};
use crate::name::Name;
use crate::small::Small;
use crate::sql;
use syn::{Expr, Member};

/// One step of a call chain as collected, outermost first: name, argument list (none for a
/// `.field` step), awaited, tried, and its span (name to closing parenthesis).
type RawStep<'a> = (
    Name,
    Option<&'a syn::punctuated::Punctuated<Expr, syn::Token![,]>>,
    bool,
    bool,
    crate::ir::Sp,
);

impl BodyLowerer<'_, '_> {
    /// A method-call chain with its awaits and `?`s, as one call event.
    pub(super) fn chain(&mut self, e: &Expr) -> Option<u32> {
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
                    let sp = self.lines.sp(id.span(), id.span());
                    raw.push((
                        Name::display(&format_args!(".{id}")),
                        None,
                        awaited,
                        tried,
                        sp,
                    ));
                    awaited = false;
                    tried = false;
                    cur = &f.base;
                }
                Expr::MethodCall(m) => {
                    let sp = self.lines.sp(m.method.span(), m.paren_token.span.close());
                    let name = Name::display(&m.method);
                    // `fut.instrument(span).await`: awaiting the adapter awaits the future.
                    let adapter = apis::FUTURE_ADAPTER_STEPS.contains(&name.as_str());
                    raw.push((name, Some(&m.args), awaited, tried, sp));
                    if !adapter {
                        awaited = false;
                        tried = false;
                    }
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
        let mut root_span: Option<StepSpan> = None;
        let root_start = start_span(cur);
        let mut deferred: Vec<&Expr> = Vec::new();
        match cur {
            Expr::Call(c) => {
                if let Expr::Path(p) = &*c.func {
                    call.func = segments(&p.path).collect();
                    let name = call.func.last().cloned().unwrap_or_default();
                    let args = self.args(c.args.each(), &mut deferred, false);
                    root_step = Some(Step {
                        name,
                        argc: argc(args.len()),
                        args,
                        awaited,
                        tried,
                    });
                    root_span = Some(StepSpan {
                        sp: self.lines.sp(root_start, c.paren_token.span.close()),
                        trailing_comma: c.args.trailing_punct(),
                    });
                } else {
                    self.expr(&c.func);
                    for a in c.args.each() {
                        self.expr(a);
                    }
                }
            }
            Expr::Macro(m) => {
                let name = last_segment(&m.mac.path);
                if macros::is_query_macro(&name) {
                    call.func = segments(&m.mac.path).collect();
                    if let Some(last) = call.func.last_mut() {
                        *last = last.with_suffix("!");
                    }
                    let exprs = macros::parse_args(&m.mac.tokens);
                    let mut inner = Vec::new();
                    let args = self.args(exprs.iter(), &mut inner, false);
                    for d in inner {
                        self.expr(d);
                    }
                    root_step = Some(Step {
                        name: name.with_suffix("!"),
                        argc: argc(args.len()),
                        args,
                        awaited,
                        tried,
                    });
                    root_span = Some(StepSpan {
                        sp: self.lines.sp(root_start, m.mac.delimiter.span().close()),
                        trailing_comma: false,
                    });
                } else {
                    let sp = self.lines.sp(root_start, m.mac.bang_token.span);
                    self.mac(&m.mac, sp);
                }
            }
            // `orders::ActiveModel { status: Set(..), .. }.update(db)`: the literal is bound to
            // a local of its own, typed by its path, as `let m = orders::ActiveModel { .. };
            // m.update(db)` would be (its module names the table, its fields the columns set).
            Expr::Struct(st) if st.qself.is_none() && st.path.segments.len() >= 2 => {
                self.expr(cur);
                let mut deps = Vec::new();
                super::places::paths(cur, &mut deps, 0);
                let name = Name::from(format!("{{lit}}{}", self.ev.len()));
                let ty: crate::ir::TypeRef =
                    vec![Name::join(&segments(&st.path).collect::<Vec<_>>(), "::")];
                let sp = self.lines.sp(root_start, st.brace_token.span.close());
                self.push(
                    sp,
                    EventKind::Bind(Box::new(
                        crate::ir::Bind::plain(vec![name.clone()], deps, Vec::new()).with_extra(
                            crate::ir::BindExtra {
                                ty: Some(ty),
                                lit: super::places::struct_lit(cur).map(Box::new),
                                ..Default::default()
                            },
                        ),
                    )),
                );
                call.recv = vec![name].into();
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
        let keep_spans = call.func.last().is_some_and(|f| f == "cmd")
            || raw
                .last()
                .is_some_and(|(name, ..)| apis::REDIS_SPAN_STEPS.contains(&name.as_str()))
                && root_step.is_none();
        // `builder.push(" WHERE ..").build()` on a local holding an sqlx `QueryBuilder`: its
        // text so far, as the statement the built query runs.
        let built = match call.recv.as_slice() {
            [b] if !self.builders.is_empty() && root_step.is_none() => {
                self.builder_steps(b, raw.iter().rev().map(|(n, a, ..)| (n, *a)))
            }
            _ => None,
        };
        let mut spans: Vec<StepSpan> = Vec::new();
        if keep_spans {
            spans.extend(root_span);
            spans.extend(raw.iter().rev().map(|(_, args, _, _, sp)| StepSpan {
                sp: *sp,
                trailing_comma: args.is_some_and(|a| a.trailing_punct()),
            }));
        }
        call.steps = root_step
            .into_iter()
            .chain(
                raw.into_iter()
                    .rev()
                    .map(|(name, args, awaited, tried, _)| {
                        let ints = apis::REDIS_INT_ARG_STEPS.contains(&name.as_str());
                        let args = match args {
                            Some(args) => self.args(args.each(), &mut deferred, ints),
                            None => Small::Empty,
                        };
                        Step {
                            argc: argc(args.len()),
                            args,
                            name,
                            awaited,
                            tried,
                        }
                    }),
            )
            .collect();
        if let Some((i, sql)) = built
            && let Some(step) = call.steps.get_mut(i)
        {
            let arg = Arg {
                extra: Some(Box::new(ArgExtra {
                    sql: Some(sql),
                    ..ArgExtra::default()
                })),
                ..Arg::default()
            };
            step.args = std::iter::once(arg)
                .chain(step.args.iter().cloned())
                .collect();
        }
        if call.steps.is_empty() || (deferred.is_empty() && is_noise(&call)) {
            return None;
        }
        // `timeout(d, client.post(url).send()).await` drives the inner future.
        if apis::TIMEOUT_FNS.contains(&call.func_last()) && call.steps[0].awaited {
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
        let idx = self.push(sp, EventKind::Call(Box::new(call)));
        if keep_spans {
            self.step_spans.push((idx, spans.into_boxed_slice()));
        }
        for d in deferred {
            self.push(sp, EventKind::Enter(Region::Closure { call: Some(idx) }));
            match d {
                Expr::Closure(c) => self.closure_body(c, recv_root.clone()),
                Expr::Async(a) => self.block(&a.block),
                other => {
                    self.expr(other);
                }
            }
            self.push(sp, EventKind::Leave);
        }
        if let Some(name) = drop_name {
            self.push(sp, EventKind::Drop { name });
        }
        Some(idx)
    }

    /// The steps of a call on `builder`, a local holding an sqlx `QueryBuilder`, in source
    /// order: the text they push is appended to the builder's (a bound value or a text not
    /// written as a literal stands in as a placeholder), and the first step that builds the
    /// query gives the statement so far, with its index.
    fn builder_steps<'e>(
        &mut self,
        builder: &Name,
        steps: impl Iterator<
            Item = (
                &'e Name,
                Option<&'e syn::punctuated::Punctuated<Expr, syn::Token![,]>>,
            ),
        >,
    ) -> Option<(usize, Box<sql::SqlInfo>)> {
        let at = self.builders.iter().position(|(n, _)| n == builder)?;
        let text = &mut self.builders[at].1;
        let mut built = None;
        for (i, (name, args)) in steps.enumerate() {
            match name.as_str() {
                "push" | "push_unseparated" => match args.and_then(|a| a.first()) {
                    Some(Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    })) => text.push_str(&s.value()),
                    _ => text.push_str(" x "),
                },
                "push_bind" | "push_bind_unseparated" => text.push_str(" ? "),
                "push_values" => text.push_str(" VALUES (?) "),
                step if apis::QUERY_BUILDER_BUILD_STEPS.contains(&step) && built.is_none() => {
                    built = sql::classify(text).map(|q| (i, Box::new(q)));
                }
                _ => {}
            }
        }
        built
    }

    /// The arguments of one step; `ints` keeps their integer literals (see
    /// `apis::REDIS_INT_ARG_STEPS`).
    pub(super) fn args<'e>(
        &mut self,
        it: impl Iterator<Item = &'e Expr>,
        deferred: &mut Vec<&'e Expr>,
        ints: bool,
    ) -> Small<Arg> {
        it.map(|a| {
            let mut arg = arg_info(a, &mut self.scratch);
            if ints
                && let Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) = a
            {
                let text = i.to_string();
                let text = text.strip_suffix(i.suffix()).unwrap_or(&text);
                let x = arg.extra.get_or_insert_with(Box::default);
                x.fix.get_or_insert_with(Box::default).int = Some(Name::new(text));
            }
            if let Some(x) = arg.extra.as_mut().filter(|x| x.sql.is_some())
                && let Some(lit) = str_lit(a)
            {
                let end = sql_end(lit);
                let at = x
                    .sql
                    .as_ref()
                    .is_some_and(|q| {
                        q.filtered && matches!(q.kind, sql::SqlKind::Update | sql::SqlKind::Delete)
                    })
                    .then(|| sql_where(lit))
                    .flatten();
                if end.is_some() || at.is_some() {
                    let fix = x.fix.get_or_insert_with(Box::default);
                    fix.sql_end = end;
                    fix.sql_where = at;
                }
            }
            if arg.closure {
                deferred.push(a);
            } else {
                arg.ev = self.expr(a);
            }
            arg
        })
        .collect()
    }
}

/// A string literal argument (through `&`).
fn str_lit(e: &Expr) -> Option<&syn::LitStr> {
    let mut e = e;
    while let Expr::Reference(r) = e {
        e = &r.expr;
    }
    match e {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

/// Where the `WHERE` predicate of a SQL string literal is in the source, when the literal's
/// text is its value (a raw string, or one with no escapes): the predicate's (line, column)
/// in the SQL text maps onto the literal's lines.
fn sql_where(s: &syn::LitStr) -> Option<crate::ir::SqlWhere> {
    let raw = s.token().to_string();
    let (open, close) = match raw.strip_prefix('r') {
        Some(rest) => {
            let hashes = rest.len() - rest.trim_start_matches('#').len();
            (hashes + 2, hashes + 1)
        }
        None => (1, 1),
    };
    let body = raw.get(open..raw.len().checked_sub(close)?)?;
    if !s.suffix().is_empty() || open == 1 && body.contains('\\') {
        return None;
    }
    let p = crate::sql::predicate(body)?;
    let start = s.span().start();
    let at = |(line, col): (u32, u32)| {
        if line == 1 {
            (start.line as u32, (start.column + open) as u32 + col)
        } else {
            (start.line as u32 + line - 1, col)
        }
    };
    let (line, col) = at(p.start);
    let (end_line, end_col) = at(p.end);
    Some(crate::ir::SqlWhere {
        sp: crate::ir::Sp {
            line,
            col,
            end_line,
            end_col,
        },
        or: p.or,
        ambiguous: p.ambiguous,
    })
}

/// The point just before the closing quote of a SQL string literal argument, when the
/// statement's text ends there plainly.
fn sql_end(s: &syn::LitStr) -> Option<crate::ir::Sp> {
    let raw = s.token().to_string();
    // `"..."` or `r#"..."#`: the closing delimiter is a quote and as many `#` as open it.
    let hashes = raw.len() - raw.trim_end_matches('#').len();
    let body = raw.get(..raw.len() - hashes - 1)?;
    let last = body.chars().last()?;
    if last.is_whitespace() || last == ';' || last == '"' || body.ends_with("\\n") {
        return None;
    }
    if !raw.starts_with('r') && body.chars().rev().nth(1) == Some('\\') {
        return None;
    }
    let end = s.span().end();
    // The closing delimiter is on the last line: one quote and the hashes.
    let col = end.column.checked_sub(hashes + 1)?;
    Some(crate::ir::Sp {
        line: end.line as u32,
        col: col as u32 + 1,
        end_line: end.line as u32,
        end_col: col as u32 + 1,
    })
}

/// What the classifier needs to know about one argument. `scratch` is an empty buffer lent by
/// the caller (and left empty), so the usual one-place argument allocates nothing.
pub(super) fn arg_info(e: &Expr, scratch: &mut Vec<Name>) -> Arg {
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
            x.sql = Some(Box::new(info));
            continue;
        }
        if s.len() <= MAX_STR {
            x.strs.push(s);
        }
    }
    arg_scan(e, &mut x, 0);
    x.value = value_text(e, false);
    x.items = array_items(e);
    x.lit = struct_lit(e).map(Box::new);
    if !x.is_empty() {
        a.extra = Some(Box::new(x));
    }
    a.mut_borrow = matches!(e, Expr::Reference(r) if r.mutability.is_some())
        || matches!(e, Expr::MethodCall(m) if m.method == "as_mut");
    a.moved = matches!(e, Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some());
    a.closure = is_deferred(e);
    a
}

/// Closures and async blocks passed as arguments run later (or inside the callee), so they are
/// lowered after the call event: directly, or wrapped once (`Box::pin(async move { .. })`).
pub(super) fn is_deferred(e: &Expr) -> bool {
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

/// A column's name in snake_case: sea-orm's `Column::TokenId` is the column `token_id`;
/// diesel's `orders::status` stays as written.
pub(super) fn snake_case(col: &str) -> Name {
    let mut s = String::with_capacity(col.len() + 4);
    let mut prev_lower = false;
    for c in col.chars() {
        if c.is_uppercase() && prev_lower {
            s.push('_');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        s.push(c.to_ascii_lowercase());
    }
    Name::from(s)
}

/// Is `v` the column `col` moved by its own value (`access_count + 1`, `balance - amount`)?
fn moves_itself(v: &Expr, col: &Name) -> bool {
    match v {
        Expr::Paren(p) => moves_itself(&p.expr, col),
        Expr::Binary(b)
            if matches!(
                b.op,
                syn::BinOp::Add(_) | syn::BinOp::Sub(_) | syn::BinOp::Mul(_)
            ) =>
        {
            place_parts(&b.left)
                .and_then(|p| p.last().cloned())
                .is_some_and(|c| snake_case(&c) == snake_case(col))
        }
        _ => false,
    }
}

/// Columns compared with `.eq(..)` & co. and function paths called, inside one argument.
pub(super) fn arg_scan(e: &Expr, a: &mut ArgExtra, depth: u32) {
    if depth > 24 {
        return;
    }
    let d = depth + 1;
    match e {
        Expr::MethodCall(m) => {
            let name = Name::display(&m.method);
            if apis::COLUMN_TESTS.contains(&name.as_str())
                && let Some(col) = place_parts(&m.receiver).and_then(|p| p.last().cloned())
            {
                a.eq_cols.push(snake_case(&col));
                let assigned = (name == "eq").then(|| m.args.first_item()).flatten();
                if name == "is_null" {
                    a.eq_values.push(Some(Name::new(crate::ir::NULL_VALUE)));
                } else {
                    a.eq_values.push(assigned.and_then(|v| {
                        value_text(v, true)
                            .or_else(|| {
                                plain_local(v)
                                    .map(|l| Name::from(format!("{}{l}", crate::ir::LOCAL_VALUE)))
                            })
                            .or_else(|| {
                                moves_itself(v, &col).then(|| Name::new(crate::ir::RELATIVE_VALUE))
                            })
                    }));
                }
            }
            // A condition builder's `.eq(users::Column::ResetToken, token)`: the column first.
            if apis::COLUMN_TESTS.contains(&name.as_str())
                && m.args.len() == 2
                && let Some(Expr::Path(p)) = m.args.first_item()
                && p.path.segments.len() >= 2
                && p.path
                    .segments
                    .iter()
                    .rev()
                    .nth(1)
                    .is_some_and(|s| s.ident == "Column")
                && let Some(col) = p.path.segments.last_item()
            {
                a.eq_cols.push(snake_case(&col.ident.to_string()));
                let assigned = (name == "eq").then(|| m.args.iter().nth(1)).flatten();
                a.eq_values.push(assigned.and_then(|v| value_text(v, true)));
            }
            arg_scan(&m.receiver, a, d);
            m.args.each().for_each(|x| arg_scan(x, a, d));
        }
        Expr::Call(c) => {
            if let Expr::Path(p) = &*c.func {
                let s: Vec<Name> = segments(&p.path).collect();
                if a.calls.len() < 8 {
                    a.calls.push(Name::join(&s, "::"));
                }
            }
            c.args.each().for_each(|x| arg_scan(x, a, d));
        }
        // A BSON document (`doc! { "_id": id, "status": "paid" }`): its fields are the filter's
        // columns, or the update's (`$set.status`).
        Expr::Macro(m) if last_segment(&m.mac.path) == "doc" => {
            for (field, value) in macros::doc_fields(&m.mac.tokens) {
                a.eq_cols.push(field);
                a.eq_values.push(value);
            }
        }
        Expr::Reference(r) => arg_scan(&r.expr, a, d),
        Expr::Paren(p) => arg_scan(&p.expr, a, d),
        Expr::Unary(u) => arg_scan(&u.expr, a, d),
        Expr::Binary(b) => {
            arg_scan(&b.left, a, d);
            arg_scan(&b.right, a, d);
        }
        Expr::Struct(s) => s.fields.each().for_each(|f| arg_scan(&f.expr, a, d)),
        Expr::Tuple(t) => t.elems.each().for_each(|x| arg_scan(x, a, d)),
        Expr::Array(t) => t.elems.each().for_each(|x| arg_scan(x, a, d)),
        _ => {}
    }
}

/// Std-only chains that no rule or summary can use: `x.clone()`, `v.iter().map(..).collect()`,
/// `Ok(..)`, `Arc::new(..)`, on a plain local or a constructor, with no `.await`, no `?`, no
/// SQL and no closure (a closure argument keeps the call, its region hangs off it).
pub(super) fn is_noise(call: &Call) -> bool {
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
            .all(|s| apis::NOISE_STEPS.contains(&s.name.as_str()))
    };
    if call.func.is_empty() {
        return call.recv.len() == 1 && call.recv[0] != "self" && steps_noise(0);
    }
    let last = call.func_last();
    if call.func.len() == 1 {
        return apis::WRAPPING_VARIANTS.contains(&last) && steps_noise(1);
    }
    // `Type::new(..)`: only std containers and wrappers; a crate or client type may matter.
    let ty = call.func[call.func.len() - 2].as_str();
    apis::NOISE_FNS.contains(&last) && apis::STD_VALUE_TYPES.contains(&ty) && steps_noise(1)
}

/// A plain local (`state`, `&state`, `*state`), by name.
fn plain_local(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let id = p.path.segments.first_item()?.ident.to_string();
            id.starts_with(|c: char| c.is_lowercase() || c == '_')
                .then_some(id)
        }
        Expr::Reference(r) => plain_local(&r.expr),
        Expr::Unary(u) => plain_local(&u.expr),
        Expr::Paren(p) => plain_local(&p.expr),
        _ => None,
    }
}

/// A step's argument count as kept in [`Step::argc`].
fn argc(n: usize) -> u8 {
    n.min(u8::MAX as usize) as u8
}
