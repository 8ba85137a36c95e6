//! The knowledge base: classifies each call event of a body into effects (lock, transaction,
//! state read / write, remote call, token claim, spawn, sleep, schedule) from evidence — receiver
//! types, `.await`, SQL text, known crate APIs — and names last.
//!
//! Calls to the crate's own functions are resolved to their bodies here; what those bodies do is
//! filled in later by [`crate::summary`].

use crate::fxhash::FxHashMap;
mod db;
pub mod names;
mod net;
mod redis;
mod sync;
pub mod types;

use crate::Knowledge;
use crate::apis::{
    CHANNEL_FN_WORDS, COMMON_METHODS, CONSTRUCTOR_FNS, HANDLE_CHAIN_STEPS, HANDLE_STEPS,
    MUTEX_LOCK_STEPS, REDIS_CONNECTION_STEPS,
};
use crate::effects::{BodyEffects, Effect, EffectKind, GuardUse, Sparse};
use crate::facts::{BodyId, Facts};
use crate::ir::{Body, Call, Ev, StructLit};
use crate::name::Name;
use crate::sql::SqlInfo;
pub use types::Class;

/// Per-body classification context.
pub(crate) struct Cx<'a> {
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

/// Classifies every call event of a body.
pub fn classify_body(
    facts: &Facts,
    knowledge: &Knowledge,
    file: u32,
    body: &Body,
    memo: &types::Memo,
) -> BodyEffects {
    let mut cx = Cx {
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
        memo,
    };
    let mut tx_param = None;
    for (name, ty) in &body.params {
        let class = types::class_of(ty, facts, file, cx.memo);
        if class == Class::DbTx && tx_param.is_none() {
            tx_param = Some(name.clone());
        }
        cx.env.insert(name.clone(), class);
    }
    let n = body.events.len();
    let mut direct: Sparse<Effect> = Sparse::new(n);
    let mut callees = Sparse::new(n);
    for (i, ev) in body.events.iter().enumerate() {
        match &ev.kind {
            Ev::Call(call) => {
                let (effs, called) = cx.classify(call);
                direct.set(i, effs);
                callees.set(i, called);
            }
            Ev::Bind(b) => {
                let class = if let Some(ty) = b.ty() {
                    Some(types::class_of(ty, facts, file, cx.memo))
                } else if let Some(&last) = b.calls.last() {
                    let last = last as usize;
                    match &body.events[last].kind {
                        Ev::Call(c) => cx.result_class(c, &direct[last]),
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
                if let (Some(ty), [name]) = (b.ty(), b.names.as_slice())
                    && let Some((module, _)) = ty.first().and_then(|t| t.rsplit_once("::"))
                {
                    cx.local_modules.insert(
                        name.clone(),
                        Name::new(module.rsplit(':').next().unwrap_or(module)),
                    );
                }
                for name in &b.names {
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
                        cx.sql_locals.insert(name.clone(), sql.clone());
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
                }
            }
            Ev::Assign(a) => {
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
            let Ev::Call(call) = &body.events[i].kind else {
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
    out
}

impl Cx<'_> {
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
            match self.facts.field_type(&ty_name, field) {
                Some(ty) => class = types::class_of(ty, self.facts, self.file, self.memo),
                None => return Some(Class::Unknown(field.clone())),
            }
        }
        Some(class)
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

    /// SQL reaching any argument of the call.
    pub fn call_sql(&self, call: &Call) -> Option<SqlInfo> {
        if let Some(s) = call.sql() {
            return Some(s.clone());
        }
        if let Some(s) = call.recv.first().and_then(|r| self.sql_locals.get(r)) {
            return Some(s.clone());
        }
        for a in call.all_args() {
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

    fn classify(&self, call: &Call) -> (Vec<Effect>, Vec<BodyId>) {
        let recv = self.recv_class(call);
        if let Some(e) = self.knowledge_eff(call, &recv) {
            return (vec![e], Vec::new());
        }
        let mut effs = Vec::new();
        let resolved = self.facts.resolve_parts(self.file, &call.func);
        for f in [sync::classify, db::classify, redis::classify, net::classify] {
            if let Some(e) = f(self, call, &recv, &resolved) {
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

    /// The class of a value bound from a call.
    fn result_class(&self, call: &Call, effs: &[Effect]) -> Option<Class> {
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

    fn knowledge_eff(&self, call: &Call, recv: &Class) -> Option<Effect> {
        for (kind, names) in self.knowledge.lists() {
            if names.iter().any(|name| self.matches_name(call, recv, name)) {
                let mut e = Effect::new(kind.effect, kind.what);
                e.configured = true;
                e.token = kind.token;
                e.delete = kind.delete;
                if kind.effect == EffectKind::Schedule {
                    self.fill_payload(call, &mut e);
                }
                return Some(e);
            }
        }
        None
    }

    /// `charge`, `PaymentGateway::charge`, `payments::charge`.
    fn matches_name(&self, call: &Call, recv: &Class, name: &str) -> bool {
        let (qual, method) = match name.rsplit_once("::") {
            Some((q, m)) => (Some(q.rsplit(':').next().unwrap_or(q)), m),
            None => (None, name),
        };
        if !call.func.is_empty() && call.func_last() == method {
            return match qual {
                None => true,
                Some(q) => call.func.iter().rev().nth(1).is_some_and(|s| s == q),
            };
        }
        for s in call.steps.iter().skip(usize::from(!call.func.is_empty())) {
            if s.name == method {
                return match (qual, recv) {
                    (None, _) => true,
                    (Some(q), Class::User(t) | Class::Trait(t) | Class::Unknown(t)) => {
                        t == q
                            || t.is_empty()
                            || self.body.self_ty.as_deref() == Some(q) && *call.recv == ["self"]
                    }
                    (Some(_), _) => false,
                };
            }
        }
        false
    }

    /// Fills a schedule effect's payload from its arguments.
    pub fn fill_payload(&self, call: &Call, e: &mut Effect) {
        for a in call.all_args() {
            if let Some(l) = a.lit() {
                e.payload.extend(l.fields.iter().cloned());
                e.payload_ty = Some(l.ty.clone());
            }
            for p in &a.paths {
                if let Some(l) = self.lit_locals.get(p) {
                    e.payload.extend(l.fields.iter().cloned());
                    e.payload_ty = Some(l.ty.clone());
                } else if let Some(Class::User(t)) = self.env.get(p) {
                    if let Some(fields) = self.facts.structs.get(t.as_str()) {
                        e.payload.extend(fields.iter().map(|(n, _)| n.clone()));
                    }
                    e.payload_ty = Some(t.clone());
                } else {
                    e.payload.push(p.clone());
                }
            }
        }
        if let Some(t) = &e.payload_ty
            && let Some(fields) = self.facts.structs.get(t.as_str())
        {
            for (n, _) in fields.iter() {
                if !e.payload.contains(n) {
                    e.payload.push(n.clone());
                }
            }
        }
    }

    /// The crate bodies a call may run.
    fn resolve(&self, call: &Call, recv: &Class) -> Vec<BodyId> {
        if !call.func.is_empty() && !call.steps.is_empty() {
            let name = call.func_last();
            if name.ends_with('!') {
                return Vec::new();
            }
            let mut out = self.resolve_func(&call.func);
            // Method steps after a crate fn returning a crate type are not followed.
            if out.is_empty() && call.steps.len() > 1 {
                out = Vec::new();
            }
            return out;
        }
        // Method calls: the first step on the receiver.
        let Some(step) = call.steps.first() else {
            return Vec::new();
        };
        match recv {
            Class::User(t) | Class::Trait(t) => {
                let m = self.facts.methods(t, &step.name);
                if !m.is_empty() {
                    return m.to_vec();
                }
                // A trait implemented by the type (default methods).
                let mut out = Vec::new();
                if self.facts.methods_named.contains_key(step.name.as_str()) {
                    for tr in self
                        .facts
                        .traits_of
                        .get(t)
                        .map(Vec::as_slice)
                        .unwrap_or(&[])
                    {
                        out.extend_from_slice(self.facts.methods(tr, &step.name));
                    }
                }
                if matches!(recv, Class::Trait(_))
                    && let Some(tys) = self.facts.trait_impls.get(t)
                {
                    {
                        for ty in tys {
                            out.extend_from_slice(self.facts.methods(ty, &step.name));
                        }
                    }
                }
                out.sort();
                out.dedup();
                out
            }
            // A method defined once in the crate (an extension trait on a library type, or a
            // receiver of unknown type).
            _ => match self.facts.methods_named.get(step.name.as_str()) {
                Some(c) if c.len() == 1 && !COMMON_METHODS.contains(&step.name.as_str()) => {
                    c.clone()
                }
                _ => Vec::new(),
            },
        }
    }

    fn resolve_func(&self, func: &[Name]) -> Vec<BodyId> {
        let Some(name) = func.last() else {
            return Vec::new();
        };
        if func.len() >= 2 {
            let q = &func[func.len() - 2];
            let q = if q == "Self" {
                self.body.self_ty.clone().unwrap_or_default()
            } else {
                q.clone()
            };
            let typed = self.facts.methods(&q, name);
            if !typed.is_empty() {
                return typed.to_vec();
            }
        }
        if func.len() == 1 || q_is_module(func) {
            self.facts
                .free_fns
                .get(name.as_str())
                .cloned()
                .unwrap_or_default()
        } else {
            Vec::new()
        }
    }
}

fn q_is_module(func: &[Name]) -> bool {
    func.len() >= 2
        && func[func.len() - 2]
            .chars()
            .next()
            .is_some_and(|c| c.is_lowercase())
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
