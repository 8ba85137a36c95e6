//! Remote calls: reqwest, hyper, octocrab (the GitHub API), tonic generated clients, aws-sdk
//! fluent `.send()`, lapin / rdkafka / NATS publish. Channel sends (`tx.send(msg).await`) are
//! not remote calls.

use super::names::is_remote_name;
use super::{Class, Classifier};
use crate::apis::{
    BLOCKING_HTTP_CRATES, BLOCKING_SEND_STEPS, DATABASE_METHODS, GRPC_REQUEST_FNS, HTTP_VERBS,
    HYPER_SEND_STEPS, OCTOCRAB_HANDLERS, OCTOCRAB_READ_STEPS, PUBLISH_STEPS, READ_ONLY_HTTP_STEPS,
    REMOTE_API_CRATES, REQWEST_BLOCKING_FNS, WRITING_HTTP_STEPS,
};
use crate::effects::{Effect, EffectKind};
use crate::ir::Call;
use crate::name::Name;

pub(super) fn classify(
    cx: &Classifier<'_>,
    call: &Call,
    recv: &Class,
    resolved: &str,
) -> Option<Effect> {
    if *recv == Class::Channel {
        return None;
    }
    // Blocking HTTP crates: `ureq::post(url).call()`, `reqwest::blocking::get(url)`.
    // (A char pattern: paths hold no single colons, and it needs no searcher.)
    let krate = resolved.split(':').next().unwrap_or("");
    if BLOCKING_HTTP_CRATES.contains(&krate)
        && call
            .steps
            .iter()
            .skip(1)
            .any(|s| BLOCKING_SEND_STEPS.contains(&s.name.as_str()))
        || resolved.starts_with("reqwest::blocking::")
            && REQWEST_BLOCKING_FNS.contains(&call.func_last())
    {
        return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
    }
    // A mail transport's `send(message)` (lettre), on a transport held or made by a crate fn
    // declared to return one (`smtp_transport().send(email).await`).
    if call
        .steps
        .iter()
        .any(|s| s.name == "send" && s.args.len() == 1)
        && (*recv == Class::Mail || made_by_mail_fn(cx, call))
    {
        return Some(Effect::new(EffectKind::Remote, "sends an e-mail"));
    }
    // Blocking clients (`reqwest::blocking`) have type evidence instead of an `.await`.
    if !call.awaited() {
        if *recv == Class::Http
            && call
                .steps
                .iter()
                .any(|s| s.name == "send" && s.args.is_empty())
        {
            return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
        }
        return None;
    }
    // `reqwest::get(url).await`
    if resolved.starts_with("reqwest") && call.steps.first().is_some_and(|s| s.awaited) {
        return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
    }
    // `.send()` with no arguments after a builder: reqwest and aws-sdk.
    if let Some(i) = call
        .steps
        .iter()
        .position(|s| s.name == "send" && s.args.is_empty() && s.awaited)
    {
        let before = &call.steps[..i];
        let http =
            *recv == Class::Http || before.iter().any(|s| HTTP_VERBS.contains(&s.name.as_str()));
        if *recv == Class::Aws {
            return Some(Effect::new(EffectKind::Remote, "calls an AWS service"));
        }
        if http {
            return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
        }
        if !before.is_empty() || matches!(recv, Class::Unknown(_)) {
            return Some(Effect::new(
                EffectKind::Remote,
                "sends a request (`.send().await`)",
            ));
        }
    }
    // hyper.
    if let Some(s) = call
        .steps
        .iter()
        .find(|s| s.awaited && HYPER_SEND_STEPS.contains(&s.name.as_str()))
        && (*recv == Class::Http || s.name == "send_request")
    {
        return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
    }
    if *recv == Class::Http && call.steps.iter().any(|s| s.awaited && s.name == "execute") {
        return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
    }
    // An awaited call handed a remote client: `stripe::PaymentIntent::create(&self.stripe, ..)`.
    let client_arg = call.steps.iter().filter(|s| s.awaited).flat_map(|s| &s.args).any(|a| {
        // The argument is the client itself (`&self.stripe`), not a call built from it.
        a.ev.is_none() && a.paths.len() == 1 && a.paths.first().is_some_and(|p| {
            let parts: Vec<Name> = p.split('.').map(Name::new).collect();
            matches!(
                cx.place_class(&parts),
                Some(Class::Http | Class::Grpc | Class::Aws)
            ) || matches!(cx.place_class(&parts), Some(Class::Unknown(n)) if n.ends_with("Client") && parts.len() >= 2)
        })
    });
    // An awaited fn of a remote service's API crate: `stripe::Customer::create(&client, ..)`
    // whatever the client argument is built from.
    if REMOTE_API_CRATES.contains(&krate)
        && call.func.len() >= 2
        && call.steps.first().is_some_and(|s| s.awaited)
    {
        return Some(Effect::new(
            EffectKind::Remote,
            format!("calls the `{krate}` API"),
        ));
    }
    if client_arg && !call.func.is_empty() {
        return Some(Effect::new(
            EffectKind::Remote,
            "calls a remote API through its client",
        ));
    }
    if *recv == Class::Http
        && call
            .steps
            .iter()
            .any(|s| s.awaited && HTTP_VERBS.contains(&s.name.as_str()))
    {
        return Some(Effect::new(EffectKind::Remote, "sends an HTTP request"));
    }
    // octocrab, the GitHub API client: every awaited call through one of its handlers is a
    // request (`octo.issues(owner, repo).create_comment(n, body).await`).
    if let Some(e) = octocrab_call(call, recv, resolved) {
        return Some(e);
    }
    // Brokers.
    if call
        .steps
        .iter()
        .any(|s| s.awaited && PUBLISH_STEPS.contains(&s.name.as_str()))
        && !matches!(recv, Class::User(_) | Class::Trait(_))
    {
        return Some(Effect::new(EffectKind::Remote, "publishes a message"));
    }
    if call
        .steps
        .iter()
        .any(|s| s.name == "send" && s.args.len() == 2 && s.awaited)
        && (*recv == Class::Broker
            || call
                .all_args()
                .any(|a| a.calls().iter().any(|c| c.contains("FutureRecord"))))
    {
        return Some(Effect::new(
            EffectKind::Remote,
            "publishes a message to Kafka",
        ));
    }
    // tonic: an awaited call on a generated client or with a `Request::new(..)` argument.
    if *recv == Class::Grpc && call.steps.iter().any(|s| s.awaited) {
        return Some(Effect::new(EffectKind::Remote, "makes a gRPC call"));
    }
    if call.steps.iter().any(|s| {
        s.awaited
            && s.args.iter().any(|a| {
                a.calls()
                    .iter()
                    .any(|c| GRPC_REQUEST_FNS.contains(&c.as_str()))
            })
    }) || call.steps.iter().any(|s| {
        s.awaited
            && s.args
                .iter()
                .any(|a| a.paths.iter().any(|p| p.ends_with("into_request")))
    }) {
        return Some(Effect::new(EffectKind::Remote, "makes a gRPC call"));
    }
    if *recv == Class::Aws && call.steps.iter().any(|s| s.awaited) {
        return Some(Effect::new(EffectKind::Remote, "calls an AWS service"));
    }
    None
}

/// Does the remote call change nothing at the remote? An HTTP request whose verbs are all `get`
/// / `head`, an AWS SDK operation named `get_*` / `list_*` / `describe_*` / `head_*` (on an AWS
/// client, or as the fluent builder any client sends: `s3.get_object().bucket(b).send()`), a
/// gRPC method named `get_*` / `list_*` (the standard methods that only read), an API crate's
/// lookup by path (`stripe::Customer::retrieve`, `Invoice::list`). `built` holds the verbs of the
/// request builders the chain sends that were made in earlier statements (`let req =
/// http.get(url); auth.apply(req).send().await`).
pub(super) fn reads_only(call: &Call, recv: &Class, built: &[Name]) -> bool {
    let names = || call.steps.iter().map(|s| s.name.as_str());
    let reads = |n: &str| {
        ["get_", "list_", "describe_", "head_", "batch_get_"]
            .iter()
            .any(|p| n.starts_with(p))
    };
    // `stripe::Customer::retrieve(..)`, `stripe::Invoice::list(..)`.
    if matches!(call.func_last(), "retrieve" | "list" | "get" | "search") && call.func.len() >= 2 {
        return true;
    }
    match recv {
        Class::Aws => names().next().is_some_and(reads),
        Class::Grpc => call
            .steps
            .iter()
            .find(|s| s.awaited)
            .is_some_and(|s| reads(&s.name)),
        _ => {
            // The chain's steps and the verbs of the builders it was made from.
            let steps = || names().chain(built.iter().map(Name::as_str));
            let mut verbs = steps().filter(|n| HTTP_VERBS.contains(n)).peekable();
            if verbs.peek().is_none() {
                // An SDK's fluent operation, sent with no verb: `client.get_object()..send()`.
                return !call.recv.is_empty()
                    && names().next().is_some_and(reads)
                    && call
                        .steps
                        .last()
                        .is_some_and(|s| s.name == "send" && s.args.is_empty());
            }
            verbs.all(|n| READ_ONLY_HTTP_STEPS.contains(&n))
                && !steps().any(|n| WRITING_HTTP_STEPS.contains(&n))
        }
    }
}

/// The HTTP verbs of a request builder a chain makes (`http.get(url).header(..)`), with those of
/// the builders it was made from (`built`): what a local bound to it holds.
pub(super) fn request_verbs(call: &Call, built: &[Name]) -> Vec<Name> {
    let mut verbs: Vec<Name> = built.to_vec();
    for s in call.steps.iter() {
        if HTTP_VERBS.contains(&s.name.as_str()) && !verbs.contains(&s.name) {
            verbs.push(s.name.clone());
        }
    }
    verbs
}

/// Is the chain's root a call of a crate fn declared to return a mail transport?
fn made_by_mail_fn(cx: &Classifier<'_>, call: &Call) -> bool {
    call.func.len() == 1
        && cx
            .facts
            .bare_fn(cx.file, call.func_last())
            .iter()
            .any(|&id| {
                cx.facts
                    .body(id)
                    .ret
                    .iter()
                    .any(|t| super::types::is_mail_transport(t, t.rsplit(':').next().unwrap_or(t)))
            })
}

/// The last resort: an awaited call on a receiver whose name says it is a remote client
/// (`self.payment_gateway.charge(..).await`) and whose code is not in the crate.
pub(super) fn by_name(cx: &Classifier<'_>, call: &Call, recv: &Class) -> Option<Effect> {
    if !call.func.is_empty() || !call.steps.first().is_some_and(|s| s.awaited) {
        return None;
    }
    // The crate defines a method of that name (on several types, so the call was not resolved
    // to one): the code is in the crate and is judged by what it does, not by the receiver's
    // name (`new_client.save_txn(&txn)` on an OAuth client entity).
    if cx.facts.methods_named.contains_key(call.head()) {
        return None;
    }
    let type_name = match recv {
        Class::Unknown(n) | Class::Trait(n) | Class::User(n) => n.as_str(),
        _ => return None,
    };
    // Database-shaped methods on a `client` are a database client.
    if DATABASE_METHODS.contains(&call.head()) {
        return None;
    }
    // A field (`self.payment_gateway`) or a declared type names the client; a local merely
    // called `client` is not evidence.
    let place = if call.recv.len() >= 2 {
        call.recv.last().map(Name::as_str).unwrap_or("")
    } else {
        ""
    };
    if is_remote_name(place) || is_remote_name(type_name) {
        let mut e = Effect::new(
            EffectKind::Remote,
            format!(
                "calls `{}` on `{}`, a remote client by its name",
                call.head(),
                call.recv.join(".")
            ),
        );
        e.by_name = true;
        return Some(e);
    }
    None
}

/// An awaited call of the GitHub API through octocrab: on a client (`self.github`, a field of
/// the `Octocrab` type) or on the global instance (`octocrab::instance()`), through one of its
/// handlers. Marked read-only when it only gets or lists.
fn octocrab_call(call: &Call, recv: &Class, resolved: &str) -> Option<Effect> {
    let global = resolved.starts_with("octocrab");
    let handlers = if global {
        // `octocrab::instance().issues(..)`: the handler is the step after the instance.
        call.steps.get(1)
    } else {
        call.steps.first()
    };
    let on_client = *recv == Class::Http || global;
    if !on_client
        || !handlers.is_some_and(|s| OCTOCRAB_HANDLERS.contains(&s.name.as_str()))
        || !call.steps.iter().any(|s| s.awaited)
    {
        return None;
    }
    let mut e = Effect::new(EffectKind::Remote, "calls the GitHub API (octocrab)");
    let reads = |n: &str| {
        OCTOCRAB_READ_STEPS.contains(&n) || n.starts_with("list_") || n.starts_with("get_")
    };
    let skip = usize::from(global);
    let api_steps: Vec<&str> = call.steps[skip + 1..]
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| *n != "send")
        .collect();
    let first = call.steps[skip].name.as_str();
    e.set_read_only(
        matches!(first, "_get" | "search" | "ratelimit")
            || !api_steps.is_empty()
                && api_steps.iter().any(|n| reads(n))
                && !api_steps.iter().any(|n| {
                    n.starts_with("create")
                        || n.starts_with("update")
                        || n.starts_with("delete")
                        || n.starts_with("merge")
                        || n.starts_with("add")
                        || n.starts_with("remove")
                }),
    );
    Some(e)
}
