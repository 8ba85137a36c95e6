//! Redis: `redis::cmd("SET").arg(..).arg("NX")`, pipelines, Lua scripts and the `AsyncCommands`
//! methods (`get`, `del`, `set_nx`, `getdel`, ..).

use super::names::is_token_name;
use super::{Class, Classifier};
use crate::apis::{
    REDIS_ADD_COMMANDS, REDIS_CHAIN_STEPS, REDIS_CLAIM_COMMANDS, REDIS_CLAIM_METHODS,
    REDIS_COMMAND_FNS, REDIS_COUNT_COMMANDS, REDIS_DELETE_COMMANDS, REDIS_DELETE_METHODS,
    REDIS_LIST_MOVE_COMMANDS, REDIS_LIST_MOVE_METHODS, REDIS_READ_COMMANDS, REDIS_READ_METHODS,
    REDIS_SCRIPT_STEPS, REDIS_UNTYPED_METHODS, REDIS_WRITE_COMMANDS, REDIS_WRITE_METHODS,
};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::Call;
use crate::name::Name;

pub(super) fn classify(
    cx: &Classifier<'_>,
    call: &Call,
    recv: &Class,
    resolved: &str,
) -> Option<Effect> {
    // Lua scripts are atomic.
    if resolved.contains("Script")
        && call
            .steps
            .iter()
            .any(|s| REDIS_SCRIPT_STEPS.contains(&s.name.as_str()))
    {
        let mut e = Effect::new(EffectKind::Claim, "runs a Lua script atomically");
        e.kv = true;
        e.token = true;
        e.table = key_of(cx, call, 1);
        return Some(e);
    }

    // `redis::cmd("SET").arg(key)..query_async(&mut con)` and `redis::pipe()`.
    if REDIS_COMMAND_FNS.contains(&call.func_last())
        && (call.func.len() == 1 || resolved.contains("redis"))
    {
        let mut cmds: Vec<(String, usize)> = Vec::new();
        let mut flags: Vec<String> = Vec::new();
        let mut atomic = call.func_last() == "pipe" && call.has_step("atomic");
        for (i, s) in call.steps.iter().enumerate() {
            if s.name == "cmd" {
                if let Some(c) = s.args.first().and_then(|a| a.strs().first()) {
                    cmds.push((c.to_ascii_uppercase(), i));
                }
            } else if s.name == "arg" {
                for a in &s.args {
                    flags.extend(a.strs().iter().map(|x| x.to_ascii_uppercase()));
                }
            } else if s.name == "atomic" {
                atomic = true;
            } else if !REDIS_CHAIN_STEPS.contains(&s.name.as_str()) {
                cmds.push((s.name.to_ascii_uppercase(), i));
            }
        }
        let key = key_of(cx, call, 1);
        let token = key.as_deref().is_some_and(is_token_name);
        let names: Vec<&str> = cmds.iter().map(|(c, _)| c.as_str()).collect();
        // A list move names its two lists in its first two arguments.
        if let [name] = names[..]
            && REDIS_LIST_MOVE_COMMANDS.contains(&name)
        {
            let to = call
                .steps
                .get(2)
                .filter(|s| s.name == "arg")
                .and_then(|_| key_of(cx, call, 2));
            return key.zip(to).map(|(from, to)| list_move(name, from, to));
        }
        let eff = if names.iter().any(|c| REDIS_CLAIM_COMMANDS.contains(c))
            || (names.contains(&"SET") && flags.iter().any(|f| f == "NX"))
            || (atomic && names.len() > 1)
        {
            EffectKind::Claim
        } else if names.iter().any(|c| REDIS_WRITE_COMMANDS.contains(c)) {
            EffectKind::Write
        } else if names.iter().any(|c| REDIS_READ_COMMANDS.contains(c)) {
            EffectKind::Read
        } else {
            return None;
        };
        let mut e = Effect::new(eff, format!("runs redis `{}`", names.join(" ")));
        e.kv = true;
        e.delete = names.iter().any(|c| REDIS_DELETE_COMMANDS.contains(c));
        e.counts = names.iter().any(|c| REDIS_COUNT_COMMANDS.contains(c));
        e.insert = eff == EffectKind::Write && names.iter().any(|c| REDIS_ADD_COMMANDS.contains(c));
        e.token = token;
        e.table = key;
        if eff == EffectKind::Claim && e.table.as_deref().is_some_and(names_a_lock) {
            e.what = "acquires a redis lock".into();
            e.lock_claim = true;
            e.lease = true;
            e.attempt = true;
        }
        return Some(e);
    }

    if let Some(e) = namespaced(call, recv) {
        return Some(e);
    }

    // AsyncCommands / Commands methods on a redis connection (or an unknown receiver, awaited).
    if !call.func.is_empty() {
        return None;
    }
    let step = call.steps.first()?;
    let name = step.name.as_str();
    let is_redis = *recv == Class::Redis
        || (matches!(recv, Class::Unknown(_))
            && step.awaited
            && call.steps.len() <= 3
            && step.args.len() <= 3
            && !step.args.is_empty());
    // Every command these methods run names its key: `pool.get()` on a pool of Redis
    // connections takes a connection, it reads nothing.
    if !is_redis || step.args.is_empty() {
        return None;
    }
    if REDIS_LIST_MOVE_METHODS.contains(&name) {
        let from = key_of(cx, call, 0)?;
        let to = cx.arg_strs(step.args.get(1)?).into_iter().next()?;
        return Some(list_move(&name.to_ascii_uppercase(), from, to));
    }
    // `set_options` claims only with an `NX` argument; otherwise it is a plain write.
    let kind = if REDIS_CLAIM_METHODS.contains(&name) && (name != "set_options" || has_nx(step)) {
        EffectKind::Claim
    } else if REDIS_WRITE_METHODS.contains(&name) {
        EffectKind::Write
    } else if REDIS_READ_METHODS.contains(&name) {
        EffectKind::Read
    } else {
        return None;
    };
    if matches!(recv, Class::Unknown(_))
        && !matches!(kind, EffectKind::Claim)
        && !REDIS_UNTYPED_METHODS.contains(&name)
    {
        // `x.get(k).await` on an unknown receiver is too weak unless the key looks like one.
        let key = key_of(cx, call, 0);
        if !key
            .as_deref()
            .is_some_and(|k| k.contains(':') || is_token_name(k))
        {
            return None;
        }
    }
    let upper = name.to_ascii_uppercase();
    let mut e = Effect::new(kind, format!("runs redis `{upper}`"));
    e.kv = true;
    e.delete = REDIS_DELETE_METHODS.contains(&name);
    e.counts = REDIS_COUNT_COMMANDS.contains(&upper.as_str());
    e.insert = kind == EffectKind::Write && REDIS_ADD_COMMANDS.contains(&upper.as_str());
    e.table = key_of(cx, call, 0);
    e.token = e.table.as_deref().is_some_and(is_token_name);
    if kind == EffectKind::Claim && e.table.as_deref().is_some_and(names_a_lock) {
        e.what = "acquires a redis lock".into();
        e.lock_claim = true;
        e.lease = true;
        e.attempt = true;
    }
    if matches!(kind, EffectKind::Write | EffectKind::Claim) {
        e.sets = assigned(step, name).into();
        e.expires = matches!(name, "set_ex" | "pset_ex");
    }
    Some(e)
}

/// A move of an entry from list `from` to list `to` (`BRPOPLPUSH queue processing 0`): a write
/// of `to` (its table) that takes from `from` (its one filter "column"), marked as a list move.
fn list_move(name: &str, from: Name, to: Name) -> Effect {
    let mut e = Effect::new(
        EffectKind::Write,
        format!("runs redis `{name}` into `{to}`"),
    );
    e.kv = true;
    e.set_list_move(true);
    e.where_cols = [from].into();
    e.table = Some(to);
    e
}

/// A namespaced cache or key-value client, awaited: the first argument names the namespace
/// (an enum variant or a constant path: `db.get(Cache::AuthCode, id)`, `kv.delete(Bucket::Pow,
/// key)`), the next the key, and a put the value. The namespace is the effect's table: it says
/// what the entries are (an authorization code is a one-time token). A map's `get` / `remove`
/// take one argument and its `insert` two, so they never match.
fn namespaced(call: &Call, recv: &Class) -> Option<Effect> {
    if !matches!(recv, Class::Unknown(_)) {
        return None;
    }
    // The awaited step, the last one but for error adapters (`.map_err(..)`).
    let i = call.steps.iter().position(|s| s.awaited)?;
    let step = &call.steps[i];
    if call.steps[i + 1..].iter().any(|s| {
        !matches!(
            s.name.as_str(),
            "map_err" | "ok" | "context" | "unwrap" | "expect" | "is_some" | "is_none"
        )
    }) {
        return None;
    }
    let name = step.name.as_str();
    let (kind, delete, min_args) = match name {
        "get" | "get_bytes" | "fetch" => (EffectKind::Read, false, 2),
        "delete" | "remove" | "del" | "invalidate" | "evict" | "take" => {
            (EffectKind::Write, true, 2)
        }
        "put" | "put_bytes" | "set" | "insert" => (EffectKind::Write, false, 3),
        _ => return None,
    };
    if step.args.len() < min_args {
        return None;
    }
    let ns = step.args.first()?.value()?;
    let last = ns.rsplit("::").next()?;
    if !ns.contains("::") || !last.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let mut e = Effect::new(
        kind,
        format!("`{name}` on the `{ns}` entries of a key-value client"),
    );
    e.kv = true;
    e.delete = delete;
    // What the entries are, by the namespace (`Cache::AuthCode`) or by the key they are found
    // by (`kv.get(Cache::Pow, challenge)`, `kv.delete(Cache::Pow, pow.challenge)`: a nonce).
    let key_names_token = step.args[1]
        .paths
        .first()
        .is_some_and(|p| is_token_name(p.rsplit('.').next().unwrap_or(p)));
    e.token = is_token_name(ns) || key_names_token;
    e.table = Some(ns.clone());
    Some(e)
}

/// What a write or claim command sets: `hset(key, field, value)` (and `hset_nx`) the field,
/// `set(key, value)` (and `set_nx`) the key (named by its last word: `job:{}:state` sets
/// `state`).
fn assigned(step: &crate::ir::Step, name: &str) -> Vec<Assigned> {
    let value = |i: usize| {
        step.args
            .get(i)
            .and_then(|a| a.value())
            .map_or(AssignedValue::Unknown, |v| AssignedValue::Const(v.clone()))
    };
    let key_word = || {
        let key = step.args.first().and_then(|a| a.strs().first())?;
        let word = key
            .rsplit([':', '.', '/'])
            .find(|w| !w.is_empty() && !w.contains('{'))?;
        Some(Name::new(word))
    };
    match name {
        "hset" | "hset_nx" => {
            let Some(field) = step.args.get(1).and_then(|a| a.strs().first()) else {
                return Vec::new();
            };
            vec![Assigned {
                column: field.clone(),
                value: value(2),
            }]
        }
        "set" | "set_ex" | "pset_ex" | "set_nx" => {
            let Some(column) = key_word() else {
                return Vec::new();
            };
            vec![Assigned {
                column,
                value: value(1),
            }]
        }
        _ => Vec::new(),
    }
}

/// A key named as a lock (`lock:order:{}`, `seat_lock`).
fn names_a_lock(key: &str) -> bool {
    key.to_ascii_lowercase().contains("lock")
}

fn has_nx(step: &crate::ir::Step) -> bool {
    step.args.iter().any(|a| {
        a.paths.iter().any(|p| p.contains("NX") || p.contains("nx"))
            || a.calls().iter().any(|c| c.contains("NX"))
    })
}

/// The key argument's visible text: literals, `format!` literals, the local's literal, or the
/// local's name (`idempotency_key`).
fn key_of(cx: &Classifier<'_>, call: &Call, step_index: usize) -> Option<Name> {
    let step = call.steps.get(step_index)?;
    let arg = step.args.first()?;
    let strs = cx.arg_strs(arg);
    strs.iter()
        .find(|s| is_token_name(s))
        .cloned()
        .or_else(|| strs.first().cloned())
}
