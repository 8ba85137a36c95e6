//! What a place, an argument or a call's result holds, as classification sees it: the class
//! of a receiver (from declared types, field types and how a local was made), the string
//! literals and SQL reaching an argument, a scheduled task's payload.

use super::{Class, Classifier, has, types};
use crate::apis::{
    CHANNEL_FN_WORDS, CONSTRUCTOR_FNS, EXEC_STEPS, HANDLE_CHAIN_STEPS, HANDLE_STEPS,
    QUERY_BUILDER_BUILD_STEPS, REDIS_CONNECTION_STEPS, RESULT_ADAPTER_STEPS, SQL_APPEND_STEPS,
    STATEMENT_FINISH_STEPS, TYPE_WRAPPERS,
};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind, Payload};
use crate::facts::BodyId;
use crate::ir::Call;
use crate::name::Name;
use crate::sql::{SqlInfo, SqlValue};

impl Classifier<'_> {
    /// What an argument gives a column: its constant, or the body's parameter it is (`state`,
    /// `&state`), or nothing seen.
    pub fn arg_value(&self, a: &crate::ir::Arg) -> AssignedValue {
        if let Some(v) = a.value() {
            return AssignedValue::Const(v.clone());
        }
        match (a.paths.as_slice(), a.calls().is_empty() && a.ev.is_none()) {
            ([one], true) if self.now_locals.contains(one) => AssignedValue::Now,
            ([one], true) => self.param_value(one),
            _ => AssignedValue::Unknown,
        }
    }

    /// The body's parameter named `name`, as a value.
    pub fn param_value(&self, name: &str) -> AssignedValue {
        AssignedValue::param_of(self.body, name)
    }

    /// The class of a place: `self`, `self.db`, `state.http`, a local.
    pub fn place_class(&self, parts: &[Name]) -> Option<Class> {
        let first = parts.first()?;
        let mut class = if first == "self" {
            self.body.self_ty.clone().map(Class::User)?
        } else if let Some(c) = self.env.get(first) {
            c.clone()
        } else {
            return None;
        };
        for field in &parts[1..] {
            let ty_name = match &class {
                Class::User(t) => t.clone(),
                _ => return Some(Class::Unknown(field.clone())),
            };
            match self.field_through_deref(&ty_name, field) {
                Some(ty) => class = types::class_of(ty, self.facts, self.file, self.memo),
                None => return Some(Class::Unknown(field.clone())),
            }
        }
        Some(class)
    }

    /// The declared type of a `self.` place (`self.login_codes`): the last field's, on the
    /// crate type [`Classifier::place_class`] finds for the place before it.
    pub fn self_place_type(&self, parts: &[Name]) -> Option<&crate::ir::TypeRef> {
        let (last, owner) = parts.split_last()?;
        if owner.first()? != "self" {
            return None;
        }
        match self.place_class(owner)? {
            Class::User(ty) => self.field_through_deref(&ty, last),
            _ => None,
        }
    }

    /// Is the in-memory place effect `e` accesses a `self.` field declared as a map of task
    /// controls (`DashMap<String, CancellationToken>`, `HashMap<Id, JoinHandle<()>>`)? Such a
    /// map holds no credentials, whatever it is called.
    pub fn holds_task_controls(&self, e: &crate::effects::Effect) -> bool {
        e.table.as_deref().is_some_and(|t| {
            let parts: Vec<Name> = t.split('.').map(Name::new).collect();
            self.self_place_type(&parts).is_some_and(|ty| {
                ty.iter().any(|t| {
                    crate::apis::TASK_CONTROL_TYPES.contains(&t.rsplit("::").next().unwrap_or(t))
                })
            })
        })
    }

    /// The type of field `field` of crate type `ty`, or, when `ty` has no such field and is a
    /// newtype (`struct AppState(Arc<App>)`), of the type it wraps: `state.emails` only
    /// compiles through the newtype's `Deref`. Two wrappers deep at most.
    fn field_through_deref(&self, ty: &str, field: &str) -> Option<&crate::ir::TypeRef> {
        let mut ty = Name::new(ty);
        for _ in 0..3 {
            if let Some(t) = self.facts.field_type(&ty, field) {
                return Some(t);
            }
            let inner = self.facts.field_type(&ty, "0")?;
            let fields = self.facts.structs.get(ty.as_str())?;
            if fields.len() != 1 {
                return None;
            }
            match types::class_of(inner, self.facts, self.file, self.memo) {
                Class::User(t) => ty = t,
                _ => return None,
            }
        }
        None
    }

    /// The class of a call's receiver.
    pub fn recv_class(&self, call: &Call) -> Class {
        if call.recv.is_empty() {
            return Class::Unknown(Name::EMPTY);
        }
        self.place_class(&call.recv)
            .unwrap_or_else(|| Class::Unknown(call.recv.last().cloned().unwrap_or_default()))
    }

    /// String literals reaching an argument (directly, through a local, or a const).
    pub fn arg_strs(&self, arg: &crate::ir::Arg) -> Vec<Name> {
        let mut out = arg.strs().to_vec();
        for p in &arg.paths {
            if let Some(s) = self.str_locals.get(p) {
                out.extend(s.iter().cloned());
            }
            if let Some(s) = self.facts.str_consts.get(p) {
                out.push(s.clone());
            }
            out.push(p.clone());
        }
        out
    }

    /// The SQL text a call event returns when it calls a free fn of the crate that only builds
    /// SQL (`dml::fetch_jobs(schema)`; see `sql_builder` in lowering).
    pub fn built_sql(&self, k: u32) -> Option<SqlInfo> {
        match &self.body.events.get(k as usize)?.kind {
            crate::ir::EventKind::Call(c)
                if c.recv.is_empty() && c.steps.len() == 1 && !c.func.is_empty() =>
            {
                self.builder_sql(c.func_last())
            }
            _ => None,
        }
    }

    /// The statement a call finishes: a builder held by a local turned into SQL text
    /// (`let (sql, values) = statement.build_sqlx(PostgresQueryBuilder)`, `.to_string(..)`).
    pub fn finished_statement(&self, k: u32) -> Option<SqlInfo> {
        match &self.body.events.get(k as usize)?.kind {
            crate::ir::EventKind::Call(c)
                if c.func.is_empty()
                    && !c.steps.is_empty()
                    && c.steps
                        .iter()
                        .all(|s| STATEMENT_FINISH_STEPS.contains(&s.name.as_str())) =>
            {
                let [local] = c.recv.as_slice() else {
                    return None;
                };
                self.sql_locals.get(local).cloned()
            }
            _ => None,
        }
    }

    /// The statement of a query built from an sqlx `QueryBuilder` and not run yet (`let query
    /// = builder.build().bind(now)`): a local holding it runs it later.
    pub fn built_query(&self, k: u32) -> Option<SqlInfo> {
        match &self.body.events.get(k as usize)?.kind {
            crate::ir::EventKind::Call(c)
                if c.func.is_empty()
                    && !c
                        .steps
                        .iter()
                        .any(|s| EXEC_STEPS.contains(&s.name.as_str())) =>
            {
                let first = c.steps.first()?;
                if !QUERY_BUILDER_BUILD_STEPS.contains(&first.name.as_str()) {
                    return None;
                }
                first.args.first()?.sql().cloned()
            }
            _ => None,
        }
    }

    /// A statement's tables named by a string const of the crate (`.table(USER_TABLE)` in a
    /// sea-query builder, kept as written) are the tables the consts name.
    pub fn with_table_consts(&self, mut sql: SqlInfo) -> SqlInfo {
        for t in &mut sql.tables {
            if !t.chars().any(|c| c.is_lowercase())
                && let Some(v) = self.facts.str_consts.get(t.as_str())
            {
                *t = Name::from(v.to_ascii_lowercase());
            }
        }
        sql
    }

    /// The SQL text the crate's SQL-building fn (or SQL const) `path` stands for, by its last
    /// segment (`dml::fetch_jobs`).
    fn builder_sql(&self, path: &str) -> Option<SqlInfo> {
        let last = path.rsplit("::").next().unwrap_or(path);
        self.facts.sql_consts.get(last).cloned()
    }

    /// SQL reaching any argument of the call.
    pub fn call_sql(&self, call: &Call) -> Option<SqlInfo> {
        if let Some(s) = call.sql() {
            return Some(s.clone());
        }
        if let Some(s) = call.recv.first().and_then(|r| self.sql_locals.get(r)) {
            return Some(s.clone());
        }
        for a in call.all_args() {
            // `query(&dml::fetch_jobs(schema))`: a builder called in place.
            if let [built] = a.calls()
                && let Some(s) = self.builder_sql(built)
            {
                return Some(s);
            }
            for p in &a.paths {
                if let Some(s) = self.sql_locals.get(p) {
                    return Some(s.clone());
                }
                let last = p.rsplit('.').next().unwrap_or(p);
                if let Some(s) = self.facts.sql_consts.get(last) {
                    return Some(s.clone());
                }
            }
        }
        None
    }

    /// The class of a value bound from a call.
    pub(super) fn result_class(
        &self,
        call: &Call,
        effs: &[Effect],
        callees: &[BodyId],
        element: bool,
    ) -> Option<Class> {
        for e in effs {
            match e.kind {
                EffectKind::TxBegin => return Some(Class::DbTx),
                EffectKind::Lock => return Some(Class::Guard),
                _ => {}
            }
        }
        let resolved = self.facts.resolve_parts(self.file, &call.func);
        let lower = resolved.to_ascii_lowercase();
        let head = call.head();
        if has(&lower, "channel")
            && (CHANNEL_FN_WORDS.iter().any(|w| has(&lower, w)) || lower.starts_with("channel"))
            || lower.ends_with("unbounded_channel")
        {
            return Some(Class::Channel);
        }
        if has(&lower, "delayqueue") {
            return Some(Class::DelayQueue);
        }
        if has(&lower, "reqwest") || has(&lower, "hyper") {
            return Some(Class::Http);
        }
        if has(&lower, "redis") {
            return Some(Class::Redis);
        }
        if has(&lower, "aws_sdk") {
            return Some(Class::Aws);
        }
        if REDIS_CONNECTION_STEPS.iter().any(|s| call.has_step(s)) {
            return Some(Class::Redis);
        }
        let recv = self.recv_class(call);
        if HANDLE_STEPS.contains(&head)
            || call
                .steps
                .iter()
                .all(|s| HANDLE_CHAIN_STEPS.contains(&s.name.as_str()))
        {
            match recv {
                Class::Db
                | Class::Redis
                | Class::Http
                | Class::Grpc
                | Class::Aws
                | Class::Mail
                | Class::Broker
                | Class::Mutex
                | Class::RwLock => {
                    return Some(recv);
                }
                Class::User(_) | Class::Trait(_)
                    if call.steps.iter().all(|s| s.name == "clone") =>
                {
                    return Some(recv);
                }
                _ => {}
            }
        }
        if let Some(c) = self.declared_result(call, callees, element) {
            return Some(c);
        }
        if call.func.len() >= 2 {
            let ty = &call.func[call.func.len() - 2];
            if CONSTRUCTOR_FNS.contains(&call.func_last()) {
                let c = types::class_of(std::slice::from_ref(ty), self.facts, self.file, self.memo);
                if !matches!(c, Class::Unknown(_)) {
                    return Some(c);
                }
            }
        }
        None
    }

    /// The crate type a crate fn declares it returns (`-> Result<Self, E>`, `-> Option<Order>`,
    /// `-> ModelResult<Self>`), when the call runs exactly one crate fn (its `callees`, as
    /// classification resolved them) and only result adapters follow it (`.await?`,
    /// `.map_err(..)`, `.ok_or(..)`): the local it is bound to holds that type, and its methods
    /// are the crate's.
    /// With `element`, the value is one element of what the call returns (a `for` loop's
    /// binding): `-> Result<Vec<Self>, E>` gives `Self`.
    fn declared_result(&self, call: &Call, callees: &[BodyId], element: bool) -> Option<Class> {
        if call.steps.iter().skip(1).any(|s| {
            !RESULT_ADAPTER_STEPS.contains(&s.name.as_str()) && !self.crate_adapter(&s.name)
        }) {
            return None;
        }
        let callees: Vec<BodyId> = callees
            .iter()
            .copied()
            .filter(|&id| !self.crate_adapter(&self.facts.body(id).ident))
            .collect();
        self.returned_class(&callees, element)
    }

    /// The class of what bodies `ids` all declare they return: a crate struct (see
    /// [`Classifier::returned_struct`]), or a crate trait's object (`-> Box<dyn
    /// UserEmailRepository + 'c>`, `-> Result<BoxRepository, E>` through a type alias, `-> impl
    /// Store`). `None` when they disagree.
    pub(super) fn returned_class(&self, ids: &[BodyId], element: bool) -> Option<Class> {
        let (first, rest) = ids.split_first()?;
        let class = self.returned_class_of(*first, element)?;
        rest.iter()
            .all(|&id| self.returned_class_of(id, element).as_ref() == Some(&class))
            .then_some(class)
    }

    fn returned_class_of(&self, id: BodyId, element: bool) -> Option<Class> {
        if let Some(ty) = self.returned_struct(id, element) {
            return Some(Class::User(Name::new(ty)));
        }
        // Through `Result`s and the like, and the future an `async` fn written out returns
        // (`-> impl Future<Output = Result<BoxRepository, E>>`).
        let ret = &self.facts.body(id).ret;
        let from = ret.iter().position(|t| {
            let last = t.rsplit(':').next().unwrap_or(t);
            let bare = last.trim_start_matches("impl ").trim_start_matches("dyn ");
            !wraps_value(last, element) && bare != "Future"
        })?;
        // A trait the crate implements a few times (a repository with its PostgreSQL and SQLite
        // stores): what its implementations do is known. Which of many (a plugin point) runs
        // is not, and is not guessed.
        match types::class_of(&ret[from..], self.facts, id.file, self.memo) {
            Class::Trait(t)
                if self.facts.trait_impls.get(&t).is_some_and(|tys| {
                    tys.iter()
                        .filter(|ty| !super::names::is_test_double(ty))
                        .count()
                        <= MAX_RETURNED_IMPLS
                }) =>
            {
                Some(Class::Trait(t))
            }
            // A helper that builds the crate's mail transport (`-> Result<SmtpTransport, E>`):
            // what it returns sends mail, whatever the local is called.
            Class::Mail => Some(Class::Mail),
            _ => None,
        }
    }

    /// The crate struct that body `id` declares it returns, through `Result`, `Option` and the
    /// like (`-> QueryResult<Self>` in `impl CrateOwner` gives `CrateOwner`); with `element`, one
    /// element of a collection it returns. A library's type of the same name is not it.
    pub(super) fn returned_struct(&self, id: BodyId, element: bool) -> Option<&str> {
        let body = self.facts.body(id);
        let (full, ty) = body
            .ret
            .iter()
            .map(|t| (t, t.rsplit(':').next().unwrap_or(t)))
            .find(|(_, t)| !wraps_value(t, element))?;
        // A library's type (`-> &'static hiqlite::Client`) is not the crate's struct of that name.
        if full.contains("::")
            && !types::is_own_type(full, ty, self.facts, self.facts.package_of(id.file))
        {
            return None;
        }
        let ty = if ty == "Self" {
            body.self_ty.as_deref()?
        } else {
            ty
        };
        self.facts.structs.contains_key(ty).then_some(ty)
    }

    /// Is `name` a result adapter of the crate's own: every crate method so named is implemented
    /// on `Result` or `Option` (`impl<S, E> MapResult<S> for Result<S, E> { fn map_res(..) }`),
    /// handing the value through?
    fn crate_adapter(&self, name: &str) -> bool {
        self.facts.methods_named.get(name).is_some_and(|ids| {
            !ids.is_empty()
                && ids.iter().all(|&id| {
                    matches!(
                        self.facts.body(id).self_ty.as_deref(),
                        Some("Result" | "Option")
                    )
                })
        })
    }

    /// Fills a schedule effect's payload from its arguments.
    pub fn fill_payload(&self, call: &Call, e: &mut Effect) {
        let mut payload = Payload::default();
        for a in call.all_args() {
            if let Some(l) = a.lit() {
                payload.names.extend(l.fields.iter().cloned());
                payload.ty = Some(l.ty.clone());
            }
            for p in &a.paths {
                if let Some(l) = self.lit_locals.get(p) {
                    payload.names.extend(l.fields.iter().cloned());
                    payload.ty = Some(l.ty.clone());
                } else if let Some(Class::User(t)) = self.env.get(p) {
                    if let Some(fields) = self.facts.structs.get(t.as_str()) {
                        payload.names.extend(fields.iter().map(|(n, _)| n.clone()));
                    }
                    payload.ty = Some(t.clone());
                } else {
                    payload.names.push(p.clone());
                }
            }
        }
        if let Some(t) = &payload.ty
            && let Some(fields) = self.facts.structs.get(t.as_str())
        {
            for (n, _) in fields.iter() {
                if !payload.names.contains(n) {
                    payload.names.push(n.clone());
                }
            }
        }
        e.payload = Some(Box::new(payload));
    }

    /// The columns a statement assigns, with the values bound to its placeholders where the
    /// call shows them: `.bind(x)` steps and `query!` arguments in order (`$n`, the n-th `?`),
    /// `.bind("name", x)` for `:name` / `@name`.
    pub fn sql_assignments(&self, sql: &SqlInfo, call: &Call) -> Vec<Assigned> {
        let mut positional: Vec<AssignedValue> = Vec::new();
        let mut named: Vec<(&Name, AssignedValue)> = Vec::new();
        for (i, step) in call.steps.iter().enumerate() {
            if step.name == "bind" {
                match step.args.as_slice() {
                    [one] => positional.push(self.arg_value(one)),
                    [name, value] => {
                        if let Some(n) = name.strs().first() {
                            named.push((n, self.arg_value(value)));
                        }
                    }
                    _ => {}
                }
            } else if let Some(items) = step.args.iter().find(|a| !a.items().is_empty()) {
                // tokio-postgres: `execute(sql, &[&a, &b])`.
                positional.extend(items.items().iter().map(|v| {
                    v.as_ref()
                        .map_or(AssignedValue::Unknown, |v| AssignedValue::Const(v.clone()))
                }));
            } else if i == 0 && step.name.ends_with('!') {
                // `query!("..", a, b)`, `query_as!(T, "..", a, b)`: the arguments after the SQL.
                let sql_at = step.args.iter().position(|a| a.sql().is_some());
                if let Some(at) = sql_at {
                    positional.extend(step.args[at + 1..].iter().map(|a| self.arg_value(a)));
                }
            }
        }
        sql.assigns
            .iter()
            .map(|(column, value)| {
                let value = match value {
                    SqlValue::Literal(l) => AssignedValue::Const(l.clone()),
                    SqlValue::Now => AssignedValue::Now,
                    SqlValue::Relative => AssignedValue::Relative,
                    SqlValue::Expr => AssignedValue::Unknown,
                    SqlValue::Param(p) => {
                        let bound = match p.strip_prefix(['$', '?']).map(str::parse::<usize>) {
                            Some(Ok(n)) if n >= 1 => positional.get(n - 1),
                            _ => named
                                .iter()
                                .find(|(n, _)| p.get(1..) == Some(n.as_str()))
                                .map(|(_, v)| v),
                        };
                        bound.cloned().unwrap_or(AssignedValue::Unknown)
                    }
                };
                Assigned {
                    column: column.clone(),
                    value,
                }
            })
            .collect()
    }

    /// `query.push_str(" AND status = $2 FOR UPDATE SKIP LOCKED")` on a local holding SQL: the
    /// fragment's filter columns and row lock become the statement's.
    pub fn extend_sql_local(&mut self, call: &Call) {
        let ([local], [step]) = (call.recv.as_slice(), call.steps.as_slice()) else {
            return;
        };
        if !SQL_APPEND_STEPS.contains(&step.name.as_str()) || !self.sql_locals.contains_key(local) {
            return;
        }
        let Some(fragment) = step.args.first().and_then(|a| a.strs().first()) else {
            return;
        };
        let lower = fragment.to_ascii_lowercase();
        let Some(sql) = self.sql_locals.get_mut(local) else {
            return;
        };
        if ["for update", "for no key update", "for share"]
            .iter()
            .any(|l| lower.contains(l))
        {
            sql.locking = true;
        }
        let tail = lower.trim_start();
        let tail = tail
            .strip_prefix("and ")
            .or_else(|| tail.strip_prefix("or "))
            .unwrap_or(tail);
        let probe = if tail.starts_with("where ") {
            format!("SELECT 1 FROM t {tail}")
        } else {
            format!("SELECT 1 FROM t WHERE {tail}")
        };
        if let Some(part) = crate::sql::classify(&probe) {
            for c in part.where_cols {
                if !sql.where_cols.contains(&c) {
                    sql.where_cols.push(c);
                }
            }
        }
    }
}

/// Does the declared result type `t` wrap the value rather than name it (`Result`, `Option`,
/// `Arc`, a `..Result` alias; with `element`, a list whose element the binding is)?
/// The most implementations of a returned trait object that a call is resolved to.
const MAX_RETURNED_IMPLS: usize = 4;

fn wraps_value(t: &str, element: bool) -> bool {
    TYPE_WRAPPERS.contains(&t)
        || t == "Result"
        || t.ends_with("Result")
        || element && matches!(t, "Vec" | "VecDeque" | "HashSet" | "BTreeSet")
}
