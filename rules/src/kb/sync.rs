//! Locks (tokio::sync, std::sync, parking_lot, per-key lock maps), guarded in-memory state,
//! task spawning, sleeps and delayed work (`tokio::time`, `DelayQueue`, job queues).

use super::{Class, Classifier};
use crate::apis::{
    AFTER_LOCK_NOISE, CONCURRENT_MAP_GUARDS, CONCURRENT_MAP_READS, CONCURRENT_MAP_WRITES,
    DELAYED_CLOSURE_STEPS, DIST_LOCK_STEPS, GUARDED_READS, GUARDED_WRITES, LOCK_STEPS,
    MUTEX_LOCK_STEPS, PER_KEY_LOCK_STEPS, READ_GUARD_STEPS, SCHEDULE_STEPS, SLEEP_FNS,
    SLEEP_PATH_WORDS, SPAWN_FNS, SPAWN_METHODS, SPAWN_PATH_WORDS, TICK_STEPS, WRITE_GUARD_STEPS,
};
use crate::effects::{Effect, EffectKind, GuardUse};
use crate::ir::{Call, EventKind};
use crate::name::Name;

pub(super) fn is_after_lock_noise(name: &str) -> bool {
    AFTER_LOCK_NOISE.contains(&name) || name == "await"
}

pub(super) fn classify(
    cx: &Classifier<'_>,
    call: &Call,
    recv: &Class,
    resolved: &str,
) -> Option<Effect> {
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
            let kind = if GUARDED_WRITES.contains(&first.name.as_str()) {
                EffectKind::Write
            } else if GUARDED_READS.contains(&first.name.as_str()) {
                EffectKind::Read
            } else {
                return None;
            };
            let verb = verb(kind);
            let mut e =
                Effect::new(kind, format!("{verb} through the guard `{place}`")).with_table(locked);
            e.in_memory = true;
            return Some(e);
        }
        return None;
    }

    // Closures that run once after a delay (actix `run_later`, one-shot scheduler jobs).
    if call.steps.iter().any(|s| {
        DELAYED_CLOSURE_STEPS.contains(&s.name.as_str()) && s.args.iter().any(|a| a.closure)
    }) {
        let mut e = Effect::new(EffectKind::Spawn, "schedules a delayed closure");
        e.delayed = true;
        return Some(e);
    }

    // Spawned tasks.
    if SPAWN_FNS.contains(&flast)
        && (call.func.len() == 1 || SPAWN_PATH_WORDS.iter().any(|w| resolved.contains(w)))
        && call.steps.len() <= 2
    {
        return Some(Effect::new(EffectKind::Spawn, "spawns a task"));
    }
    if call.func.is_empty()
        && let Some(s) = call
            .steps
            .iter()
            .find(|s| SPAWN_METHODS.contains(&s.name.as_str()))
        && s.args.iter().any(|a| a.closure)
    {
        return Some(Effect::new(EffectKind::Spawn, "spawns a task"));
    }

    // A crate fn that spawns what it is handed (`spawn_try_task(async move { .. })`).
    if call.func.len() == 1
        && call
            .steps
            .first()
            .is_some_and(|s| s.args.iter().any(|a| a.closure))
        && spawns_its_argument(cx, flast)
    {
        return Some(Effect::new(
            EffectKind::Spawn,
            "spawns a task (through a crate helper)",
        ));
    }

    // Sleeps and timers.
    if SLEEP_FNS.contains(&flast)
        && (call.func.len() == 1 || SLEEP_PATH_WORDS.iter().any(|w| resolved.contains(w)))
    {
        return Some(Effect::new(EffectKind::Sleep, "sleeps"));
    }
    if call.func.is_empty()
        && call
            .steps
            .first()
            .is_some_and(|s| TICK_STEPS.contains(&s.name.as_str()) && s.awaited)
    {
        return Some(Effect::new(EffectKind::Sleep, "waits for a timer tick"));
    }

    // Delayed work.
    if let Some(step) = call
        .steps
        .iter()
        .find(|s| SCHEDULE_STEPS.contains(&s.name.as_str()))
    {
        // `insert` and `insert_at` schedule only on a `DelayQueue`.
        let insert = matches!(step.name.as_str(), "insert" | "insert_at");
        let delay_queue = *recv == Class::DelayQueue && insert;
        if delay_queue || !insert {
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
        let (kind, verb) = if CONCURRENT_MAP_READS.contains(&first) {
            (EffectKind::Read, "reads")
        } else if CONCURRENT_MAP_GUARDS.contains(&first) {
            (EffectKind::Lock, "takes a write guard on")
        } else if CONCURRENT_MAP_WRITES.contains(&first) {
            (EffectKind::Write, "writes")
        } else {
            return None;
        };
        let mut e = Effect::new(kind, format!("{verb} `{place}`")).with_table(Some(place));
        e.in_memory = true;
        return Some(e);
    }
    // Distributed lock managers: `locks.lock(resource, ttl).await`.
    if *recv == Class::DistLock
        && let Some(s) = call
            .steps
            .iter()
            .find(|s| DIST_LOCK_STEPS.contains(&s.name.as_str()))
        && s.awaited
    {
        let mut e = Effect::new(EffectKind::Lock, "acquires a distributed lock");
        e.table = Some(Name::join(&call.recv, "."));
        e.lease = true;
        e.attempt = s.name.starts_with("try_");
        return Some(e);
    }

    // A Kubernetes Lease patched (`leases.patch(name, &params, &Patch::Merge(..)).await`): the
    // leader election's lease written. Merge, strategic and apply patches replace what they name
    // whatever the object holds now, unless they carry `metadata.resourceVersion`.
    if *recv == Class::KubeLeases
        && let Some(step) = call.steps.first()
        && step.name == "patch"
        && step.args.len() == 3
        && step.awaited
    {
        let mut e = Effect::new(EffectKind::Write, "patches a Kubernetes Lease");
        e.table = Some(Name::new("lease"));
        e.lease = true;
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
        | Class::Mail
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
                    .any(|s| PER_KEY_LOCK_STEPS.contains(&s.name.as_str()))
        }
    };
    if !is_lock {
        return None;
    }
    // `memory_cache().read()`: a fn that hands out one lock (a static's accessor) names it; two
    // such fns are two places, not one unnamed one.
    let lock_place = if call.recv.is_empty() && !call.func.is_empty() && lock_at > 0 {
        let mut p = format!("{}()", call.func.join("::"));
        for s in &call.steps[1..lock_at] {
            if let Some(f) = s.name.strip_prefix('.') {
                p.push('.');
                p.push_str(f);
            }
        }
        Name::from(p)
    } else {
        Name::join(&call.recv, ".")
    };
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
    // `let max = state.settings.read().await.max_pins;`: a field copied out of a temporary
    // guard, which drops at the end of the statement: a read of the field, no lock held after.
    if place != lock_place
        && rest
            .iter()
            .all(|r| matches!(*r, "clone" | "to_owned" | "to_string"))
    {
        return Some(through_temporary(EffectKind::Read, place, None));
    }
    let mut e = Effect::new(
        EffectKind::Lock,
        format!("takes the lock on `{lock_place}`"),
    );
    e.table = Some(lock_place.clone());
    if let Some(first) = rest.first() {
        // A temporary guard: the access after it is the effect that matters.
        if GUARDED_WRITES.contains(first) {
            return Some(through_temporary(EffectKind::Write, place, None));
        }
        if GUARDED_READS.contains(first) || rest.iter().any(|r| GUARDED_READS.contains(r)) {
            return Some(through_temporary(EffectKind::Read, place, None));
        }
        if !rest.iter().all(|r| LOCK_STEPS.contains(r) || *r == "clone") {
            // A domain method on the guarded value: a read guard reads, a write guard writes.
            let guard = step.name.as_str();
            let kind = if READ_GUARD_STEPS.contains(&guard) {
                EffectKind::Read
            } else if WRITE_GUARD_STEPS.contains(&guard) {
                EffectKind::Write
            } else if MUTEX_LOCK_STEPS.contains(&guard) {
                // A mutex has one kind of guard: whether the method reads or writes is told
                // by its use (see `classify_body`).
                let mut e = Effect::new(
                    EffectKind::Lock,
                    format!("takes the lock on `{lock_place}`"),
                )
                .with_table(Some(place));
                e.guard = GuardUse::TemporaryMethod;
                return Some(e);
            } else {
                return None;
            };
            return Some(through_temporary(kind, place, Some(first)));
        }
    }
    Some(e)
}

/// A read or a write of `place` through a temporary guard (the lock is taken at the access
/// itself), by the crate method `method` when one is called on the guarded value.
fn through_temporary(kind: EffectKind, place: Name, method: Option<&str>) -> Effect {
    let verb = verb(kind);
    let what = match method {
        Some(m) => format!("{verb} `{place}` (`{m}`)"),
        None => format!("{verb} `{place}`"),
    };
    let mut e = Effect::new(kind, what).with_table(Some(place));
    e.in_memory = true;
    e.guard = GuardUse::Temporary;
    e
}

/// How a read or a write through a guard is described.
fn verb(kind: EffectKind) -> &'static str {
    if kind == EffectKind::Write {
        "writes"
    } else {
        "reads"
    }
}

/// Is every crate free fn named `name` a wrapper that spawns one of its parameters
/// (`fn spawn_try_task(task: impl Future ..) { tokio::spawn(async move { task.await .. }) }`)?
fn spawns_its_argument(cx: &Classifier<'_>, name: &str) -> bool {
    let Some(defs) = cx.facts.free_fns.get(name) else {
        return false;
    };
    !defs.is_empty()
        && defs.iter().all(|&id| {
            let body = cx.facts.body(id);
            let params: Vec<&str> = body
                .params
                .iter()
                .map(|(n, _)| n.as_str())
                .filter(|n| *n != "self")
                .collect();
            body.events.iter().any(|ev| {
                matches!(&ev.kind, EventKind::Call(c)
                if SPAWN_FNS.contains(&c.func_last())
                    && c.all_args().any(|a| a.paths.iter().any(|p| {
                        params.contains(&crate::query::first(p))
                    })))
            })
        })
}

/// Is `e` an access to an in-memory map or cache of one-time credentials (`pending_codes`,
/// `reset_tokens`, `login_nonces`: the place's last name says so)?
pub(super) fn names_token_entry(e: &Effect) -> bool {
    e.in_memory
        && matches!(e.kind, EffectKind::Read | EffectKind::Write)
        && e.table
            .as_deref()
            .is_some_and(|p| crate::kb::names::is_token_name(p.rsplit('.').next().unwrap_or(p)))
}

/// Marks an access to such a map (see [`names_token_entry`]): a lookup in it is a token check,
/// and taking an entry out (`remove`, `invalidate`, `take`) consumes the token, as a `DEL` of a
/// Redis key would.
pub(super) fn mark_token_entry(call: &Call, e: &mut Effect) {
    e.token = true;
    if e.kind == EffectKind::Write
        && call
            .steps
            .iter()
            .any(|s| crate::apis::ENTRY_REMOVAL_STEPS.contains(&s.name.as_str()))
    {
        e.delete = true;
    }
}
