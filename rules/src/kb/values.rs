//! What a place, an argument or a call's result holds, as classification sees it: the class
//! of a receiver (from declared types, field types and how a local was made), the string
//! literals and SQL reaching an argument, a scheduled task's payload.

use super::{Class, Classifier, has, types};
use crate::apis::{
    CHANNEL_FN_WORDS, CONSTRUCTOR_FNS, HANDLE_CHAIN_STEPS, HANDLE_STEPS, REDIS_CONNECTION_STEPS,
};
use crate::effects::{Effect, EffectKind};
use crate::ir::Call;
use crate::name::Name;
use crate::sql::SqlInfo;

impl Classifier<'_> {
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

    /// The class of a value bound from a call.
    pub(super) fn result_class(&self, call: &Call, effs: &[Effect]) -> Option<Class> {
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
}
