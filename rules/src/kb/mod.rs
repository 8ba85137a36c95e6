//! The knowledge base: classifies each call event of a body into effects (lock, transaction,
//! state read / write, remote call, token claim, spawn, sleep, schedule) from evidence — receiver
//! types, `.await`, SQL text, known crate APIs — and names last.
//!
//! Calls to the crate's own functions are resolved to their bodies here (`resolve.rs`); what
//! those bodies do is filled in later by [`crate::summary`]. `values.rs` says what places,
//! arguments and results hold; `configured.rs` applies the project's knowledge; `sync.rs`,
//! `db.rs`, `redis.rs` and `net.rs` know the libraries (their names are in [`crate::apis`]).

mod configured;
pub(crate) mod db;
mod mongo;
pub mod names;
mod net;
mod redis;
mod resolve;
mod sync;
pub mod types;
mod values;

use crate::Knowledge;
use crate::apis::MUTEX_LOCK_STEPS;
use crate::effects::{Assigned, AssignedValue, BodyEffects, Effect, EffectKind, GuardUse, Sparse};
use crate::facts::{BodyId, Facts};
use crate::fxhash::FxHashMap;
use crate::ir::{Body, Call, EventKind, Region, StructLit, TypeRef};
use crate::name::Name;
use crate::sql::SqlInfo;
pub use types::Class;

/// Per-body classification context.
pub(crate) struct Classifier<'a> {
    pub facts: &'a Facts<'a>,
    pub knowledge: &'a Knowledge,
    pub file: u32,
    pub body: &'a Body,
    pub env: FxHashMap<Name, Class>,
    pub sql_locals: FxHashMap<Name, SqlInfo>,
    pub str_locals: FxHashMap<Name, Vec<Name>>,
    pub lit_locals: FxHashMap<Name, StructLit>,
    /// Guard locals and the place they lock.
    pub guard_places: FxHashMap<Name, Name>,
    /// Locals declared with a module-qualified type (`order::ActiveModel`): the module.
    pub local_modules: FxHashMap<Name, Name>,
    /// Locals holding a row read by this body (the table it was read from), and the values
    /// made from them (`let mut m = row.into_active_model()`): a model saved back writes there.
    pub read_tables: FxHashMap<Name, Name>,
    /// What has been assigned to a local's fields so far (`model.status = Set(..)`, the
    /// struct literal it was made from): an ORM model's pending writes.
    pub model_sets: FxHashMap<Name, Vec<Assigned>>,
    /// Locals holding a request builder (`let req = http.get(url)`): its HTTP verbs.
    pub request_verbs: FxHashMap<Name, Vec<Name>>,
    /// Locals known to hold a library's value: a parameter typed by library paths only
    /// (`err: sqlx::Error`), and what is taken out of one by a pattern or a field
    /// (`sqlx::Error::Database(db_err) => ..`). Only an extension trait's method runs on them.
    pub library_locals: Vec<Name>,
    /// Locals holding the current time (`let now = clock.now();`, `Utc::now()`): a column
    /// given one is stamped with the time, as SQL's `now()` stamps it.
    pub now_locals: Vec<Name>,
    /// The classifying thread's type-class memo.
    pub memo: &'a types::Memo,
}

/// Whether `needle` occurs in `hay`. On short texts std sets up a two-way searcher for every
/// call (below 16 bytes it has no vectorised path), and type names are mostly short: that was a
/// tenth of the check's instructions. Texts under 32 bytes are scanned directly; longer ones go
/// to std.
pub(crate) fn has(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if h.len() >= 32 {
        return hay.contains(needle);
    }
    n.len() <= h.len()
        && (0..=h.len() - n.len()).any(|i| h[i..i + n.len()].iter().zip(n).all(|(a, b)| a == b))
}

/// Is the `let` bound from one call whose last step reads the clock (`let now = clock.now();`,
/// `let at = Utc::now();`)?
fn reads_clock(body: &Body, b: &crate::ir::Bind) -> bool {
    matches!(b.calls.as_slice(), [k] if matches!(&body.events[*k as usize].kind,
        EventKind::Call(c) if c.steps.last().is_some_and(|s| crate::apis::CLOCK_STEPS.contains(&s.name.as_str()))))
}

/// Classifies every call event of a body.
pub fn classify_body(
    facts: &Facts,
    knowledge: &Knowledge,
    file: u32,
    body: &Body,
    memo: &types::Memo,
) -> BodyEffects {
    let mut cx = Classifier {
        facts,
        knowledge,
        file,
        body,
        env: FxHashMap::default(),
        sql_locals: FxHashMap::default(),
        str_locals: FxHashMap::default(),
        lit_locals: FxHashMap::default(),
        guard_places: FxHashMap::default(),
        local_modules: FxHashMap::default(),
        read_tables: FxHashMap::default(),
        model_sets: FxHashMap::default(),
        request_verbs: FxHashMap::default(),
        library_locals: Vec::new(),
        now_locals: Vec::new(),
        memo,
    };
    let mut tx_param = None;
    for (name, ty) in &body.params {
        let class = types::class_of(ty, facts, file, cx.memo);
        if class == Class::DbTx && tx_param.is_none() {
            tx_param = Some(name.clone());
        }
        if library_typed(facts, file, ty) {
            cx.library_locals.push(name.clone());
        }
        // A sea-orm model handed in (`payment: payment::ActiveModel`): its module's table, and
        // the fields its caller set on it (given at each call: `CALLER_FIELDS`).
        if let Some(module) = ty
            .iter()
            .find_map(|t| t.strip_suffix("::ActiveModel"))
            .map(|m| m.rsplit(':').next().unwrap_or(m))
        {
            cx.local_modules.insert(name.clone(), Name::new(module));
            cx.model_sets.insert(
                name.clone(),
                vec![Assigned {
                    column: Name::new(crate::effects::CALLER_FIELDS),
                    value: AssignedValue::param_of(body, name),
                }],
            );
        }
        cx.env.insert(name.clone(), class);
    }
    let n = body.events.len();
    let arm_variants = arm_variants(body);
    // Which events sit in a branch that always leaves: asked only of a value bound from
    // several calls, so computed on first need.
    let mut diverging: Option<Vec<bool>> = None;
    let mut direct: Sparse<Effect> = Sparse::new(n);
    let mut callees = Sparse::new(n);
    for (i, ev) in body.events.iter().enumerate() {
        match &ev.kind {
            EventKind::Call(call) => {
                cx.extend_sql_local(call);
                let (effs, called) = cx.classify(call);
                direct.set(i, effs);
                callees.set(i, called);
            }
            EventKind::Bind(b) => {
                // A variant's one binding (`Backend::Smtp(transport) =>`): its field's type.
                let variant_ty = arm_variants
                    .get(&(i as u32))
                    .filter(|_| b.names.len() == 1 && b.deps.len() == 1)
                    .and_then(|v| cx.variant_field(&b.deps[0], v, &b.names[0]));
                let class = if let Some(ty) = b.ty().or(variant_ty) {
                    Some(types::class_of(ty, facts, file, cx.memo))
                } else if let Some(l) = b
                    .lit()
                    .filter(|l| l.whole && facts.structs.contains_key(l.ty.as_str()))
                {
                    // A literal of a crate struct is of that type, whatever its fields call.
                    Some(Class::User(l.ty.clone()))
                } else if let Some(last) = match b.calls.as_slice() {
                    [] => None,
                    [only] => Some(*only),
                    calls => {
                        let outer = outer_calls(body, calls, i);
                        let leaves = diverging.get_or_insert_with(|| diverging_events(body));
                        outer
                            .iter()
                            .rev()
                            .find(|&&c| !leaves[c as usize])
                            .or(outer.last())
                            .copied()
                    }
                } {
                    // The value comes from the arms that go on: `match find(..).await? { None
                    // => return Err(Error::new(..)), Some(row) => row }` holds the row.
                    let last = last as usize;
                    match &body.events[last].kind {
                        EventKind::Call(c) => {
                            // `for row in find_all().await? { .. }`: the binding is an element.
                            let element = i > 0
                                && matches!(
                                    body.events[i - 1].kind,
                                    EventKind::Enter(Region::Loop)
                                )
                                && last < i - 1;
                            cx.result_class(c, &direct[last], &callees[last], element)
                        }
                        _ => None,
                    }
                } else if b.deps.len() == 1 {
                    cx.place_class(
                        &b.deps[0]
                            .split('.')
                            .map(Name::new)
                            .collect::<crate::small::Small<_>>(),
                    )
                } else {
                    b.lit().map(|l| Class::User(l.ty.clone()))
                };
                let locked = b.calls.last().and_then(|&l| {
                    direct[l as usize]
                        .iter()
                        .find(|e| e.kind == EffectKind::Lock)
                        .and_then(|e| e.table.clone())
                });
                let verbs = match b.calls.last().map(|&l| &body.events[l as usize].kind) {
                    Some(EventKind::Call(c)) => net::request_verbs(c, &cx.built_verbs(c)),
                    _ => Vec::new(),
                };
                // Declared with a module-qualified type, or made by a literal of one
                // (`let model = jobs::ActiveModel { .. }`).
                let module = b
                    .ty()
                    .and_then(|t| t.first())
                    .and_then(|t| t.rsplit_once("::"))
                    .map(|(m, _)| m.rsplit(':').next().unwrap_or(m))
                    .or_else(|| b.lit().and_then(|l| l.module.as_deref()));
                if let (Some(module), [name]) = (module, b.names.as_slice()) {
                    cx.local_modules.insert(name.clone(), Name::new(module));
                }
                // The table of the row this value holds: read by the call it is bound from, or
                // made from a local that holds one.
                let read_table = b
                    .calls
                    .iter()
                    .rev()
                    .find_map(|&l| {
                        direct[l as usize]
                            .iter()
                            .find(|e| e.kind == EffectKind::Read && !e.in_memory)
                            .and_then(|e| e.table.clone())
                    })
                    .or_else(|| {
                        b.deps.iter().find_map(|d| {
                            let root = d.split('.').next().unwrap_or(d);
                            cx.read_tables.get(root).cloned()
                        })
                    });
                let from_library = (b.calls.is_empty()
                    && b.ty().is_none()
                    && !b.deps.is_empty()
                    && b.deps.iter().all(|d| {
                        let root = d.split('.').next().unwrap_or(d);
                        cx.library_locals.iter().any(|l| l == root)
                    }))
                    || matches!(b.calls.as_slice(), [only]
                        if matches!(&body.events[*only as usize].kind,
                            EventKind::Call(c) if cx.handle_of_library_value(c)));
                let now = b.names.len() == 1 && reads_clock(body, b);
                for name in &b.names {
                    if now {
                        if !cx.now_locals.contains(name) {
                            cx.now_locals.push(name.clone());
                        }
                    } else {
                        cx.now_locals.retain(|l| l != name);
                    }
                    if from_library {
                        if !cx.library_locals.contains(name) {
                            cx.library_locals.push(name.clone());
                        }
                    } else {
                        cx.library_locals.retain(|l| l != name);
                    }
                    if verbs.is_empty() {
                        cx.request_verbs.remove(name);
                    } else {
                        cx.request_verbs.insert(name.clone(), verbs.clone());
                    }
                    match &read_table {
                        Some(t) if b.names.len() == 1 => {
                            cx.read_tables.insert(name.clone(), t.clone());
                        }
                        _ => {
                            cx.read_tables.remove(name);
                        }
                    }
                    match &locked {
                        Some(place) => {
                            cx.guard_places.insert(name.clone(), place.clone());
                        }
                        None => {
                            cx.guard_places.remove(name);
                        }
                    }
                    match &class {
                        Some(c) if b.names.len() == 1 || *c == Class::Channel => {
                            cx.env.insert(name.clone(), c.clone());
                        }
                        _ => {
                            cx.env.remove(name);
                        }
                    }
                    if let Some(sql) = b.sql() {
                        cx.sql_locals
                            .insert(name.clone(), cx.with_table_consts(sql.clone()));
                    } else if let Some(sql) = b.calls.last().and_then(|&k| {
                        cx.built_sql(k)
                            .or_else(|| cx.finished_statement(k))
                            .or_else(|| cx.built_query(k))
                    }) {
                        cx.sql_locals.insert(name.clone(), sql);
                    }
                    if !b.strs().is_empty() {
                        cx.str_locals.insert(name.clone(), b.strs().to_vec());
                    } else if b.deps.len() == 1
                        && let Some(s) = cx.str_locals.get(&b.deps[0]).cloned()
                    {
                        cx.str_locals.insert(name.clone(), s);
                    }
                    if let Some(l) = b.lit() {
                        cx.lit_locals.insert(name.clone(), l.clone());
                    }
                    // A new value: the fields it was made with, or nothing pending.
                    let made = b.lit().map(|l| {
                        l.fields
                            .iter()
                            .zip(&l.values)
                            .map(|(f, v)| Assigned {
                                column: f.clone(),
                                value: v
                                    .clone()
                                    .map_or(AssignedValue::Unknown, AssignedValue::Const),
                            })
                            .collect()
                    });
                    match made {
                        Some(sets) => {
                            cx.model_sets.insert(name.clone(), sets);
                        }
                        None => {
                            cx.model_sets.remove(name);
                        }
                    }
                }
            }
            EventKind::Assign(a) => {
                let target = &a.target;
                // `g.balance -= amount` / `*g = ..` through a guard.
                let root = target.split('.').next().unwrap_or(target);
                if cx.env.get(root) == Some(&Class::Guard) {
                    let mut e = Effect::new(
                        EffectKind::Write,
                        format!("writes through the guard `{target}`"),
                    )
                    .with_table(cx.guard_places.get(root).cloned());
                    e.in_memory = true;
                    direct.push(i, e);
                }
                // `model.status = Set(Status::Paid)`: a pending field write of a model.
                if let Some((local, field)) = target.split_once('.')
                    && !field.contains('.')
                {
                    let sets = cx.model_sets.entry(Name::new(local)).or_default();
                    crate::effects::set_field(sets, field, a.value.as_ref());
                }
            }
            _ => {}
        }
    }
    // `seats.lock().unwrap().hold(seat)`: a crate method called on a temporary mutex guard
    // reads the guarded state when it takes `&self` and writes it when it takes `&mut self`.
    for i in 0..n {
        let effs = &direct[i];
        if let Some(pos) = effs
            .iter()
            .position(|e| e.kind == EffectKind::Lock && e.guard == GuardUse::TemporaryMethod)
        {
            let EventKind::Call(call) = &body.events[i].kind else {
                continue;
            };
            let method = call
                .steps
                .iter()
                .skip_while(|s| !MUTEX_LOCK_STEPS.contains(&s.name.as_str()))
                .skip(1)
                .find(|s| !s.name.starts_with('.') && !sync::is_after_lock_noise(&s.name));
            let Some(defs) = method.and_then(|m| facts.methods_named.get(m.name.as_str())) else {
                continue;
            };
            let writes = if defs.iter().all(|id| facts.mut_self.contains(id)) {
                true
            } else if defs.iter().all(|id| !facts.mut_self.contains(id)) {
                false
            } else {
                continue;
            };
            let mut v = effs.to_vec();
            let e = &mut v[pos];
            let place = e.table.clone().unwrap_or_default();
            e.kind = if writes {
                EffectKind::Write
            } else {
                EffectKind::Read
            };
            e.what = format!("{} `{place}`", if writes { "writes" } else { "reads" }).into();
            e.in_memory = true;
            e.guard = GuardUse::Temporary;
            direct.set(i, v);
        }
    }
    let detached = crate::query::detached(body, &direct);
    let mut out = BodyEffects::new(direct, callees, tx_param);
    out.set_detached(detached);
    out.conn_param = body.params.iter().any(|(n, ty)| {
        n != "self"
            && types::hands_in_connection(ty)
            && matches!(
                types::class_of(ty, facts, file, memo),
                Class::Db | Class::DbTx | Class::Unknown(_) | Class::Trait(_)
            )
    });
    out.tx_holder = body
        .self_ty
        .as_ref()
        .is_some_and(|t| memo.holds_tx(t, facts, file));
    out
}

impl Classifier<'_> {
    /// Is `call` a handle taken from a library's value (`self.client.get_connection()` on a
    /// field declared `client: redis::Client`, `pool.get()` on a library-typed parameter)? The
    /// connection it hands back is the library's value too: only an extension trait's method
    /// runs on it, never the crate's method of the same name (`conn.lpush(..)` inside the
    /// crate's own `lpush` wrapper is the library's command).
    fn handle_of_library_value(&self, call: &Call) -> bool {
        if !call.func.is_empty()
            || call.steps.is_empty()
            || !call.steps.iter().all(|s| {
                crate::apis::HANDLE_STEPS.contains(&s.name.as_str())
                    || crate::apis::REDIS_CONNECTION_STEPS.contains(&s.name.as_str())
                    || matches!(s.name.as_str(), "unwrap" | "expect")
            })
        {
            return false;
        }
        match call.recv.as_slice() {
            [local] => self.library_locals.contains(local),
            // Imported from a library (`use redis::Client;` then `client: Client`) counts.
            place => self.self_place_type(place).is_some_and(|ty| {
                !ty.is_empty()
                    && ty
                        .iter()
                        .all(|t| names_library_type(self.facts, self.file, t))
            }),
        }
    }
}

/// Is a parameter's type made of library paths only (`sqlx::Error`, `reqwest::Response`), with
/// no type of the crate in it (`Json<CreateOrder>` has one)?
fn library_typed(facts: &Facts, file: u32, ty: &TypeRef) -> bool {
    !ty.is_empty()
        && ty
            .iter()
            .all(|t| t.contains(':') && names_library_type(facts, file, t))
}

/// Does the type path `t`, written in `file`, name a library's type (through the file's `use`
/// aliases), not one of the crate's?
fn names_library_type(facts: &Facts, file: u32, t: &str) -> bool {
    let parts: Vec<Name> = t.split("::").map(Name::new).collect();
    !facts.is_crate_path(file, &parts)
}

/// The calls among `calls` (those a binding at event `bind` takes its value from) that are not
/// inside a closure handed to another of them: `find(id).await?.ok_or_else(|| Error::new(..))?`
/// binds what `find` returned, not the error the closure would build.
/// (Asked only of a binding from several calls: one call is the value whatever it sits in.)
fn outer_calls(body: &Body, calls: &[u32], bind: usize) -> Vec<u32> {
    let Some(&first) = calls.iter().min() else {
        return Vec::new();
    };
    let mut depth = 0u32;
    let mut inner: Vec<u32> = Vec::new();
    for (k, e) in body
        .events
        .iter()
        .enumerate()
        .take(bind)
        .skip(first as usize)
    {
        match &e.kind {
            EventKind::Enter(Region::Closure { .. }) => depth += 1,
            EventKind::Enter(_) if depth > 0 => depth += 1,
            EventKind::Leave if depth > 0 => depth -= 1,
            EventKind::Call(_) if depth > 0 => inner.push(k as u32),
            _ => {}
        }
    }
    calls
        .iter()
        .copied()
        .filter(|c| !inner.contains(c))
        .collect()
}

/// Which events sit in a branch that always leaves (`None => return Err(..)`).
fn diverging_events(body: &Body) -> Vec<bool> {
    let mut out = vec![false; body.events.len()];
    let mut stack: Vec<bool> = Vec::new();
    for (i, ev) in body.events.iter().enumerate() {
        match &ev.kind {
            EventKind::Enter(r) => {
                let inside = stack.last().copied().unwrap_or(false);
                stack.push(inside || matches!(r, crate::ir::Region::Branch { diverges: true, .. }));
            }
            EventKind::Leave => {
                stack.pop();
            }
            _ => {}
        }
        out[i] = stack.last().copied().unwrap_or(false);
    }
    out
}

/// The binding that opens an arm of a `match` (or an `if let`) whose pattern names one variant
/// (`Backend::Smtp(transport) =>`): the binding's event and the variant's name. Arms follow
/// their test one after another, each opened by its `Enter`.
fn arm_variants(body: &Body) -> FxHashMap<u32, Name> {
    let evs = &body.events;
    let mut out = FxHashMap::default();
    for (t, ev) in evs.iter().enumerate() {
        let EventKind::Cond(test) = &ev.kind else {
            continue;
        };
        if test.pats.is_empty() {
            continue;
        }
        let mut i = t + 1;
        for pats in test.pats.iter() {
            if !matches!(evs.get(i).map(|e| &e.kind), Some(EventKind::Enter(_))) {
                break;
            }
            if let ([variant], Some(EventKind::Bind(_))) =
                (&pats[..], evs.get(i + 1).map(|e| &e.kind))
            {
                out.insert(i as u32 + 1, variant.clone());
            }
            // Past this arm's region to the next arm's `Enter`.
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match evs.get(j).map(|e| &e.kind) {
                    Some(EventKind::Enter(_)) => depth += 1,
                    Some(EventKind::Leave) => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    None => break,
                    _ => {}
                }
                j += 1;
            }
            i = j + 1;
        }
    }
    out
}

impl Classifier<'_> {
    /// The type of what a variant's pattern binds: `scrutinee` is of a crate enum that has the
    /// variant, a one-field tuple variant (`Smtp(transport)`) or a struct variant with a field
    /// named like the binding (`Http { client }`).
    fn variant_field(&self, scrutinee: &Name, variant: &Name, name: &Name) -> Option<&TypeRef> {
        let parts: crate::small::Small<Name> = scrutinee.split('.').map(Name::new).collect();
        let Some(Class::User(en)) = self.place_class(&parts) else {
            return None;
        };
        self.facts
            .field_type(en.as_str(), &format!("{variant}.0"))
            .or_else(|| {
                self.facts
                    .field_type(en.as_str(), &format!("{variant}.{name}"))
            })
    }

    /// The HTTP verbs of the request builders a chain sends that earlier statements made: its
    /// receiver's root or an argument is a local bound to one (`auth.apply(req).send()`).
    fn built_verbs(&self, call: &Call) -> Vec<Name> {
        if self.request_verbs.is_empty() {
            return Vec::new();
        }
        let root = |p: &str| Name::new(p.split('.').next().unwrap_or(p));
        let args = call
            .steps
            .iter()
            .flat_map(|s| &s.args)
            .flat_map(|a| &a.paths);
        let mut out: Vec<Name> = Vec::new();
        for local in call
            .recv
            .first()
            .cloned()
            .into_iter()
            .chain(args.map(|p| root(p)))
        {
            for v in self.request_verbs.get(&local).into_iter().flatten() {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        out
    }

    fn classify(&self, call: &Call) -> (Vec<Effect>, Vec<BodyId>) {
        let recv = self.recv_class(call);
        if let Some(e) = self.knowledge_eff(call, &recv) {
            return (vec![e], Vec::new());
        }
        let mut effs = Vec::new();
        let resolved = self.facts.resolve_parts(self.file, &call.func);
        for f in [
            sync::classify,
            mongo::classify,
            db::classify,
            redis::classify,
            net::classify,
        ] {
            if let Some(mut e) = f(self, call, &recv, &resolved) {
                // `SET reset_token = NULL` / `model.magic_token = Set(None)`: an update that
                // clears a token column consumes the token stored in that row.
                if e.clears_token() {
                    e.token = true;
                }
                if sync::names_token_entry(&e) && !self.holds_task_controls(&e) {
                    sync::mark_token_entry(call, &mut e);
                }
                if e.kind == EffectKind::Remote {
                    e.set_read_only(net::reads_only(call, &recv, &self.built_verbs(call)));
                }
                effs.push(e);
                break;
            }
        }
        let callees = if effs.is_empty() {
            self.resolve(call, &recv)
        } else {
            Vec::new()
        };
        if effs.is_empty()
            && callees.is_empty()
            && let Some(e) = net::by_name(self, call, &recv)
        {
            effs.push(e);
        }
        (effs, callees)
    }
}

#[cfg(test)]
mod tests {
    use super::has;

    #[test]
    fn has_agrees_with_str_contains() {
        let long = "alloc::sync::arc tokio::sync::mutex hashmap";
        let hays = ["", "a", "mutex", "tokio::sync::mutex", "xxmutexx", long];
        let needles = [
            "",
            "a",
            "mutex",
            "x",
            "dashmap",
            "mutexx",
            "hashmap",
            "tokio::sync::mutex!",
        ];
        for h in hays {
            for n in needles {
                assert_eq!(has(h, n), h.contains(n), "{h:?} {n:?}");
            }
        }
    }
}
