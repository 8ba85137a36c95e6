//! Locks (tokio::sync, std::sync, parking_lot, per-key lock maps), guarded in-memory state,
//! task spawning, sleeps and delayed work (`tokio::time`, `DelayQueue`, job queues).

use super::{Class, Cx};
use crate::effects::{Effect, EffectKind, GuardUse};
use crate::ir::Call;
use crate::name::Name;

const LOCK_STEPS: &[&str] = &[
    "lock",
    "lock_owned",
    "write",
    "write_owned",
    "read",
    "read_owned",
    "blocking_lock",
    "try_lock",
    "try_write",
    "upgradable_read",
];
pub(super) fn is_after_lock_noise(name: &str) -> bool {
    AFTER_LOCK_NOISE.contains(&name) || matches!(name, "await")
}

const AFTER_LOCK_NOISE: &[&str] = &[
    "unwrap",
    "expect",
    "map_err",
    "ok",
    "ok_or",
    "ok_or_else",
    "context",
    "with_context",
    "unwrap_or_else",
];
const MEM_READS: &[&str] = &[
    "get",
    "contains_key",
    "contains",
    "len",
    "is_empty",
    "cloned",
    "clone",
    "iter",
    "values",
    "keys",
    "first",
    "last",
    "copied",
    "status",
    "state",
];
const MEM_WRITES: &[&str] = &[
    "insert",
    "remove",
    "push",
    "push_back",
    "push_front",
    "and_modify",
    "or_insert",
    "or_insert_with",
    "extend",
    "clear",
    "retain",
    "pop",
    "truncate",
    "swap",
    "replace",
    "take",
    "get_mut",
    "and_modify",
    "set",
    "drain",
    "append",
];

pub(super) fn classify(cx: &Cx<'_>, call: &Call, recv: &Class, resolved: &str) -> Option<Effect> {
    let flast = call.func_last();

    // Access through a guard held in a local.
    if *recv == Class::Guard && call.func.is_empty() {
        let place = Name::join(&call.recv, ".");
        let locked = call
            .recv
            .first()
            .and_then(|g| cx.guard_places.get(g))
            .cloned();
        if let Some(first) = call.steps.first() {
            let kind = if MEM_WRITES.contains(&first.name.as_str()) {
                EffectKind::Write
            } else if MEM_READS.contains(&first.name.as_str()) {
                EffectKind::Read
            } else {
                return None;
            };
            let verb = if kind == EffectKind::Write {
                "writes"
            } else {
                "reads"
            };
            let mut e =
                Effect::new(kind, format!("{verb} through the guard `{place}`")).with_table(locked);
            e.in_memory = true;
            return Some(e);
        }
        return None;
    }

    // Closures that run once after a delay (actix `run_later`, one-shot scheduler jobs).
    if call.steps.iter().any(|s| {
        matches!(
            s.name.as_str(),
            "run_later" | "new_one_shot_async" | "new_one_shot" | "spawn_after" | "call_later"
        ) && s.args.iter().any(|a| a.closure)
    }) {
        let mut e = Effect::new(EffectKind::Spawn, "schedules a delayed closure");
        e.delayed = true;
        return Some(e);
    }

    // Spawned tasks.
    if matches!(flast, "spawn" | "spawn_local" | "spawn_blocking")
        && (call.func.len() == 1
            || resolved.contains("tokio")
            || resolved.contains("task")
            || resolved.contains("thread")
            || resolved.contains("rt")
            || resolved.contains("async_std"))
        && call.steps.len() <= 2
    {
        return Some(Effect::new(EffectKind::Spawn, "spawns a task"));
    }
    if call.func.is_empty()
        && let Some(s) = call
            .steps
            .iter()
            .find(|s| s.name == "spawn" || s.name == "spawn_local")
        && s.args.iter().any(|a| a.closure)
    {
        return Some(Effect::new(EffectKind::Spawn, "spawns a task"));
    }

    // Sleeps and timers.
    if matches!(flast, "sleep" | "sleep_until" | "delay_for" | "delay_until")
        && (call.func.len() == 1
            || resolved.contains("time")
            || resolved.contains("tokio")
            || resolved.contains("thread"))
    {
        return Some(Effect::new(EffectKind::Sleep, "sleeps"));
    }
    if call.func.is_empty()
        && call
            .steps
            .first()
            .is_some_and(|s| s.name == "tick" && s.awaited)
    {
        return Some(Effect::new(EffectKind::Sleep, "waits for a timer tick"));
    }

    // Delayed work.
    if let Some(step) = call.steps.iter().find(|s| is_schedule_step(&s.name)) {
        let delay_queue =
            *recv == Class::DelayQueue && matches!(step.name.as_str(), "insert" | "insert_at");
        if delay_queue || !matches!(step.name.as_str(), "insert" | "insert_at") {
            let mut e = Effect::new(
                EffectKind::Schedule,
                if delay_queue {
                    "inserts into a `DelayQueue`"
                } else {
                    "schedules a delayed job"
                },
            );
            cx.fill_payload(call, &mut e);
            if delay_queue {
                e.table = Some(Name::join(&call.recv, "."));
            }
            return Some(e);
        }
    }

    // Concurrent maps: a read under a short shard lock, or a write guard.
    if *recv == Class::ConcurrentMap && call.func.is_empty() {
        let place = Name::join(&call.recv, ".");
        let first = call.steps.first().map(|s| s.name.as_str()).unwrap_or("");
        let (kind, verb) = match first {
            "get" | "contains_key" | "contains" | "len" | "is_empty" | "iter" => {
                (EffectKind::Read, "reads")
            }
            "get_mut" | "entry" | "alter" => (EffectKind::Lock, "takes a write guard on"),
            "insert" | "remove" | "retain" | "clear" | "remove_if" | "alter_all" => {
                (EffectKind::Write, "writes")
            }
            _ => return None,
        };
        let mut e = Effect::new(kind, format!("{verb} `{place}`")).with_table(Some(place));
        e.in_memory = true;
        return Some(e);
    }
    // Distributed lock managers: `locks.lock(resource, ttl).await`.
    if *recv == Class::DistLock
        && let Some(s) = call.steps.iter().find(|s| {
            matches!(
                s.name.as_str(),
                "lock" | "acquire" | "acquire_no_guard" | "try_lock"
            )
        })
        && s.awaited
    {
        let mut e = Effect::new(EffectKind::Lock, "acquires a distributed lock");
        e.table = Some(Name::join(&call.recv, "."));
        return Some(e);
    }

    // Locks.
    let lock_at = call
        .steps
        .iter()
        .position(|s| LOCK_STEPS.contains(&s.name.as_str()) && s.args.is_empty())?;
    let step = &call.steps[lock_at];
    let is_lock = match recv {
        Class::Mutex | Class::RwLock | Class::LockMap => true,
        Class::Db
        | Class::DbTx
        | Class::Redis
        | Class::Http
        | Class::Grpc
        | Class::Aws
        | Class::Channel
        | Class::Broker
        | Class::Collection => false,
        _ => {
            step.name.starts_with("lock")
                || step.name == "blocking_lock"
                || step.name == "try_lock"
                || step.awaited
                || call
                    .steps
                    .get(lock_at + 1)
                    .is_some_and(|s| s.name == "unwrap" || s.name == "expect")
                || call.steps[..lock_at]
                    .iter()
                    .any(|s| matches!(s.name.as_str(), "entry" | "or_default" | "or_insert_with"))
        }
    };
    if !is_lock {
        return None;
    }
    let lock_place = Name::join(&call.recv, ".");
    let rest: Vec<&str> = call.steps[lock_at + 1..]
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !AFTER_LOCK_NOISE.contains(n) && !n.starts_with('.'))
        .collect();
    // `state.write().await.slots.insert(..)`: the field of the guarded value is the place.
    let mut place = lock_place.clone();
    for s in &call.steps[lock_at + 1..] {
        if let Some(f) = s.name.strip_prefix('.') {
            place = Name::join(&[place, Name::new(f)], ".");
        } else if !AFTER_LOCK_NOISE.contains(&s.name.as_str()) {
            break;
        }
    }
    let mut e = Effect::new(
        EffectKind::Lock,
        format!("takes the lock on `{lock_place}`"),
    );
    e.table = Some(lock_place.clone());
    if let Some(first) = rest.first() {
        // A temporary guard: the access after it is the effect that matters.
        if MEM_WRITES.contains(first) {
            let mut w = Effect::new(EffectKind::Write, format!("writes `{place}`"));
            w.in_memory = true;
            w.table = Some(place);
            w.guard = GuardUse::Temporary;
            return Some(w);
        }
        if MEM_READS.contains(first) || rest.iter().any(|r| MEM_READS.contains(r)) {
            let mut r = Effect::new(EffectKind::Read, format!("reads `{place}`"));
            r.in_memory = true;
            r.table = Some(place);
            r.guard = GuardUse::Temporary;
            return Some(r);
        }
        if !rest.iter().all(|r| LOCK_STEPS.contains(r) || *r == "clone") {
            // A domain method on the guarded value: a read guard reads, a write guard writes.
            let kind = match step.name.as_str() {
                "read" | "read_owned" | "upgradable_read" => EffectKind::Read,
                "write" | "write_owned" | "try_write" => EffectKind::Write,
                // A mutex has one kind of guard: whether the method reads or writes is told
                // by its use (see `classify_body`).
                "lock" | "blocking_lock" => {
                    let mut e = Effect::new(
                        EffectKind::Lock,
                        format!("takes the lock on `{lock_place}`"),
                    )
                    .with_table(Some(place));
                    e.guard = GuardUse::TemporaryMethod;
                    return Some(e);
                }
                _ => return None,
            };
            let verb = if kind == EffectKind::Write {
                "writes"
            } else {
                "reads"
            };
            let mut e = Effect::new(kind, format!("{verb} `{place}` (`{}`)", first))
                .with_table(Some(place));
            e.in_memory = true;
            e.guard = GuardUse::Temporary;
            return Some(e);
        }
    }
    Some(e)
}

fn is_schedule_step(name: &str) -> bool {
    matches!(
        name,
        "insert"
            | "insert_at"
            | "enqueue_in"
            | "enqueue_at"
            | "enqueue_after"
            | "schedule"
            | "schedule_in"
            | "schedule_at"
            | "schedule_after"
            | "push_delayed"
            | "push_in"
            | "push_at"
            | "enqueue_delayed"
            | "send_delayed"
            | "publish_delayed"
            | "delay"
            | "run_at"
            | "run_in"
            | "enqueue_scheduled"
            | "schedule_job"
            | "defer"
    )
}
