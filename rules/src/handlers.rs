//! Which bodies handle a message from outside — a webhook or callback route, a broker or queue
//! consumer, what such a handler dispatches each kind of message to — and the evidence that
//! says so. A message may belong to the past: it was sent before the record last changed.

use crate::apis::{
    BROKER_CONSUMER_TYPES, BROKER_CRATES, BROKER_MESSAGE_TYPES, CONSUMER_REGISTRATION_STEPS,
    DECODE_STEPS, QUEUE_RECEIVE_STEPS, RECEIVE_STEPS, RESULT_ADAPTER_STEPS, ROUTE_STEPS,
    SUBSCRIBE_STEPS,
};
use crate::facts::BodyId;
use crate::fxhash::{FxHashMap, FxHashSet};
use crate::ir::{Body, Call, EventKind};
use crate::kb::names::{
    is_dispatch_target_name, is_event_type, is_message_handler_name, is_message_module,
    is_message_param_name, is_message_route, is_message_type, is_stored_record_type,
};
use crate::name::Name;
use crate::query::first;
use crate::rules::CrateView;

/// Why a body is taken for a message handler.
#[derive(Debug, Clone)]
pub(crate) enum Evidence {
    /// Registered at a route whose path receives messages (the path; empty for an attribute
    /// whose path is not kept).
    Routed(Name),
    /// Registered as the consumer of a queue or broker (apalis `build_fn`).
    Consumer,
    /// It takes a parameter of this message type.
    Receives(Name),
    /// Its name says it receives a message (`stripe_webhook`, `handle_payment_event`).
    Named,
    /// It takes messages from a broker subscription or a queue service itself (`while let
    /// Some(msg) = sub.next().await` after `client.subscribe(..).await`, SQS
    /// `receive_message()`).
    Subscribed,
    /// A message handler hands it the message, and its name (or its module's path) says it
    /// handles what it is handed.
    Dispatched(BodyId),
}

impl Evidence {
    /// How the note under a finding says it.
    pub fn describe(&self, krate: &CrateView<'_>) -> String {
        match self {
            Evidence::Routed(p) if p.is_empty() => {
                "its route attribute says it receives messages".to_string()
            }
            Evidence::Routed(p) => format!("it is routed at `{p}`"),
            Evidence::Consumer => "it is registered as a queue consumer".to_string(),
            Evidence::Receives(t) => format!("it receives a `{t}`"),
            Evidence::Named => "its name says it receives a message".to_string(),
            Evidence::Subscribed => {
                "it takes messages from a broker subscription or a queue".to_string()
            }
            Evidence::Dispatched(c) => format!(
                "the message handler `{}` hands messages to it",
                krate.body(*c).name()
            ),
        }
    }
}

/// The bodies the crate registers at message routes or as consumers, with the route path
/// (empty for a consumer).
pub(crate) fn registrations(krate: &CrateView<'_>) -> FxHashMap<BodyId, Name> {
    let mut names: Vec<(u32, Name, Name)> = Vec::new();
    for (id, body) in krate.facts.all_bodies() {
        let mut here = Vec::new();
        for ev in &body.events {
            if let EventKind::Call(c) = &ev.kind {
                registered(body, c, &mut here);
            }
        }
        names.extend(here.into_iter().map(|(h, p)| (id.file, h, p)));
    }
    let mut out: FxHashMap<BodyId, Name> = FxHashMap::default();
    for (file, handler, path) in names {
        for id in registered_fns(krate, file, &handler) {
            out.entry(id).or_insert_with(|| path.clone());
        }
    }
    out
}

/// The fns a handler named in a registration written in `file` is, as Rust scopes the name: a
/// bare name is the file's own fn or the one its `use` imports (`bare_fn`: a name that several
/// other packages define is not guessed), a module path (`hooks::on_paid`) a fn of that
/// module, `Hooks::on_paid` that type's method, and `Self::on_paid` a method of that name, the
/// registering file's own first.
fn registered_fns(krate: &CrateView<'_>, file: u32, handler: &str) -> Vec<BodyId> {
    let parts: Vec<Name> = handler.split('.').map(Name::new).collect();
    let Some((ident, quals)) = parts.split_last() else {
        return Vec::new();
    };
    match quals.last().map(Name::as_str) {
        None => krate.facts.bare_fn(file, ident),
        Some(q) if q != "Self" && q.starts_with(char::is_uppercase) => {
            krate.facts.methods(q, ident).to_vec()
        }
        Some("self" | "Self") => {
            let methods: Vec<BodyId> = krate
                .facts
                .methods_named
                .get(ident.as_str())
                .into_iter()
                .flatten()
                .copied()
                .collect();
            let own: Vec<BodyId> = methods.iter().copied().filter(|m| m.file == file).collect();
            if own.is_empty() { methods } else { own }
        }
        Some(_) => krate.facts.free_fns_in(file, &parts),
    }
}

/// The handlers one call chain registers: after a route step whose path receives messages,
/// the functions named in its arguments and the next steps' (axum `.route("/hook",
/// post(h))`, actix `web::resource("/hook").route(web::post().to(h))`); every function a
/// consumer registration names.
fn registered(body: &Body, c: &Call, out: &mut Vec<(Name, Name)>) {
    // A route step's path applies to the functions that step names (axum's `.route(path,
    // post(h))`), or, when it names none, to the next step's (actix's
    // `resource(path).route(web::post().to(h))`); not to the layers and state after them.
    let mut pending: Option<Name> = None;
    for step in &c.steps {
        let literal = step
            .args
            .first()
            .and_then(|a| a.strs().iter().find(|s| s.starts_with('/')))
            .filter(|_| ROUTE_STEPS.contains(&step.name.as_str()));
        let consumer = CONSUMER_REGISTRATION_STEPS.contains(&step.name.as_str());
        let at = match literal {
            Some(p) => is_message_route(p).then(|| p.clone()),
            None => pending.take(),
        }
        .or_else(|| consumer.then_some(Name::EMPTY));
        pending = None;
        let Some(at) = at else {
            continue;
        };
        let mut named = false;
        for a in step.args.iter().skip(usize::from(literal.is_some())) {
            named_fns(body, a, 0, &mut |f| {
                named = true;
                out.push((f.clone(), at.clone()));
            });
        }
        if !named && literal.is_some() {
            pending = Some(at);
        }
    }
}

/// The function paths an argument names: its places, and those of the calls it lowered to
/// (`post(h)`, `web::post().to(h)`).
fn named_fns(body: &Body, a: &crate::ir::Arg, depth: u32, f: &mut dyn FnMut(&Name)) {
    for p in &a.paths {
        f(p);
    }
    if let Some(ev) = a.ev
        && depth < 2
        && let Some(EventKind::Call(inner)) = body.events.get(ev as usize).map(|e| &e.kind)
    {
        for x in inner.all_args() {
            named_fns(body, x, depth + 1, f);
        }
    }
}

/// Why body `id` handles a message from outside, when it does: its own evidence, or a message
/// handler that dispatches the message to it.
pub(crate) fn message_handler(krate: &CrateView<'_>, id: BodyId) -> Option<Evidence> {
    direct(krate, id).or_else(|| {
        let body = krate.body(id);
        if !is_dispatch_target_name(&body.ident)
            && !is_message_module(krate.paths[id.file as usize])
        {
            return None;
        }
        krate
            .call_sites(id)
            .iter()
            .find(|&&(caller, site)| {
                dispatches(krate, caller, site) && names(krate, caller, site, id)
            })
            .map(|(caller, _)| Evidence::Dispatched(*caller))
    })
}

/// Does call `site` of body `caller` hand on the message `caller` handles: is `caller` a
/// message handler by its own evidence, and does the call pass the message, or what a pattern
/// took out of it (`match event { Event::Closed(payload) => on_closed(payload) }`)?
pub(crate) fn dispatches(krate: &CrateView<'_>, caller: BodyId, site: u32) -> bool {
    if direct(krate, caller).is_none() {
        return false;
    }
    let body = krate.body(caller);
    let Some(EventKind::Call(call)) = body.events.get(site as usize).map(|e| &e.kind) else {
        return false;
    };
    message_locals(body, site).passed_to(call)
}

/// The locals that hold the message a handler was given, before event `upto`: its message
/// parameters, and what a pattern or a decoding took out of them (a match arm, a `let`,
/// `serde_json::from_slice(&delivery.data)`, `request.into_inner()`); a lookup keyed by the
/// message (`let repo = ctx.repo(&name)`) is not the message.
pub(crate) fn message_locals(body: &Body, upto: u32) -> Messages<'_> {
    let mut m = Messages::new(body, message_params(body), Vec::new());
    m.advance(upto);
    m
}

/// The message locals of body `id` as a walk over its events goes (see [`Messages`]): its
/// message parameters, and those a handler that dispatches to it passes the message (or what
/// a pattern took out of it) in the place of.
pub(crate) fn messages_of<'a>(krate: &CrateView<'a>, id: BodyId) -> Messages<'a> {
    let body = krate.body(id);
    let mut seeds = message_params(body);
    let with_self = usize::from(body.params.first().is_some_and(|(n, _)| n == "self"));
    for &(caller, site) in krate.call_sites(id) {
        if !dispatches(krate, caller, site) || !names(krate, caller, site, id) {
            continue;
        }
        let cbody = krate.body(caller);
        let Some(EventKind::Call(call)) = cbody.events.get(site as usize).map(|e| &e.kind) else {
            continue;
        };
        let Some(k) = call.steps.iter().position(|s| s.name == body.ident) else {
            continue;
        };
        // `Self::on_paid(self, db, ev)` passes the receiver among the arguments; `x.on_paid(db,
        // ev)` does not.
        let offset = if k == 0 && !call.func.is_empty() {
            0
        } else {
            with_self
        };
        let message = message_locals(cbody, site);
        for (j, a) in call.steps[k].args.iter().enumerate() {
            if a.paths.iter().any(|p| message.holds(p))
                && let Some((n, _)) = body.params.get(j + offset)
                && !seeds.contains(&n)
            {
                seeds.push(n);
            }
        }
    }
    Messages::new(body, seeds, consumer_receipts(krate, id))
}

/// A route's message locals: those of [`messages_of`], and the parameters the framework fills
/// from the request's body (`Json(json): Json<Value>`, `body: Bytes`, `web::Form<T>`): what a
/// route is sent is its message, whatever the parameter is called.
pub(crate) fn route_messages<'a>(krate: &CrateView<'a>, id: BodyId) -> Messages<'a> {
    let mut m = messages_of(krate, id);
    for (n, ty) in krate.body(id).params.iter() {
        let body = ty.iter().any(|t| {
            matches!(
                t.rsplit("::").next().unwrap_or(t),
                "Json" | "Form" | "Bytes" | "Payload" | "Body"
            )
        });
        if body && n != "self" {
            m.locals.insert(n.as_str());
        }
    }
    m
}

/// The locals that hold a handler's message, followed event by event: [`Messages::advance`]
/// to an event, then ask [`Messages::holds`]. One pass over the body for the whole walk.
pub(crate) struct Messages<'a> {
    body: &'a Body,
    locals: FxHashSet<&'a str>,
    /// The calls that take a message from a broker consumer known by its type (see
    /// [`consumer_receipts`]).
    receipts: Vec<u32>,
    at: u32,
}

impl<'a> Messages<'a> {
    fn new(body: &'a Body, seeds: Vec<&'a Name>, receipts: Vec<u32>) -> Self {
        Messages {
            body,
            locals: seeds.into_iter().map(Name::as_str).collect(),
            receipts,
            at: 0,
        }
    }

    /// Takes in the bindings before event `upto` (a walk only goes forward).
    pub fn advance(&mut self, upto: u32) {
        let upto = upto.min(self.body.events.len() as u32);
        for i in self.at..upto {
            let EventKind::Bind(b) = &self.body.events[i as usize].kind else {
                continue;
            };
            let of_message = b.calls.iter().all(|&c| decodes(self.body, c))
                && b.deps.iter().any(|d| self.locals.contains(first(d)))
                || b.calls
                    .iter()
                    .any(|&c| receives(self.body, c) || self.receipts.contains(&c));
            for n in b.names.iter() {
                if of_message {
                    self.locals.insert(n.as_str());
                } else {
                    self.locals.remove(n.as_str());
                }
            }
        }
        self.at = self.at.max(upto);
    }

    /// Does the dotted place start from a local that holds the message?
    pub fn holds(&self, place: &str) -> bool {
        self.locals.contains(first(place))
    }

    /// Is the message, or a place of it, among the call's arguments?
    pub fn passed_to(&self, call: &Call) -> bool {
        call.all_args()
            .flat_map(|a| &a.paths)
            .any(|p| self.holds(p))
    }
}

/// Does call `site` of `caller` name body `id` itself: its only callee, or the one whose file
/// the call's module path names (`session_events::handler(..)` among many `handler`s)? A name
/// that resolves to several bodies is not taken for any of them.
pub(crate) fn names(krate: &CrateView<'_>, caller: BodyId, site: u32, id: BodyId) -> bool {
    let callees = krate.effects_of(caller).callees(site);
    if callees.len() == 1 {
        return true;
    }
    let body = krate.body(caller);
    let Some(EventKind::Call(call)) = body.events.get(site as usize).map(|e| &e.kind) else {
        return false;
    };
    let module = match call.func.len() {
        n if n >= 2 => Some(call.func[n - 2].as_str()),
        _ => None,
    };
    module.is_some_and(|m| {
        let file = krate.paths[id.file as usize];
        file.contains(m)
            && callees
                .iter()
                .filter(|c| krate.paths[c.file as usize].contains(m))
                .count()
                == 1
    })
}

/// Is call event `c` the receipt of a message from outside: the next message of a broker
/// subscription (see [`takes_from_subscription`]), or a batch fetched from a queue service
/// (`sqs.receive_message()..send().await`)?
fn receives(body: &Body, c: u32) -> bool {
    takes_from_subscription(body, c)
        || matches!(body.events.get(c as usize).map(|e| &e.kind), Some(EventKind::Call(call))
            if call.awaited()
                && call.steps.iter().any(|s| QUEUE_RECEIVE_STEPS.contains(&s.name.as_str())))
}

/// Is call event `c` the next message of a broker subscription: `sub.next().await`, where `sub`
/// was bound from an awaited `subscribe(..)`?
fn takes_from_subscription(body: &Body, c: u32) -> bool {
    let Some(EventKind::Call(call)) = body.events.get(c as usize).map(|e| &e.kind) else {
        return false;
    };
    let (Some(first_step), [root]) = (call.steps.first(), &call.recv[..]) else {
        return false;
    };
    RECEIVE_STEPS.contains(&first_step.name.as_str())
        && crate::query::binding(body, c, root).is_some_and(|b| {
            b.calls.iter().any(|&k| {
                matches!(body.events.get(k as usize).map(|e| &e.kind), Some(EventKind::Call(s))
                    if s.awaited() && s.steps.iter().any(|st| SUBSCRIBE_STEPS.contains(&st.name.as_str())))
            })
        })
}

/// The calls of body `id` that take the next message from a broker consumer it holds in a
/// parameter or a field of `self`, known by the declared type (`consumer.recv().await` on
/// rdkafka's `StreamConsumer`, `sub.next().await` on an async-nats `Subscriber`): the
/// subscription was made elsewhere.
fn consumer_receipts(krate: &CrateView<'_>, id: BodyId) -> Vec<u32> {
    let body = krate.body(id);
    let typed = |ty: &crate::ir::TypeRef| ty.iter().any(|t| is_consumer_type(krate, id, t));
    (0..body.events.len() as u32)
        .filter(|&c| {
            let Some(EventKind::Call(call)) = body.events.get(c as usize).map(|e| &e.kind) else {
                return false;
            };
            if !call.awaited()
                || !call
                    .steps
                    .iter()
                    .any(|s| RECEIVE_STEPS.contains(&s.name.as_str()))
            {
                return false;
            }
            let field_typed = |field: &str| {
                body.self_ty
                    .as_deref()
                    .and_then(|t| krate.facts.field_type(t, field))
                    .is_some_and(typed)
            };
            match &call.recv[..] {
                // A parameter, or a local the consumer field was moved into (`let consumer =
                // self.consumer;`, then polled in a task of its own).
                [root] => {
                    body.params.iter().any(|(n, ty)| n == root && typed(ty))
                        || crate::query::binding(body, c, root).is_some_and(|b| {
                            b.calls.is_empty()
                                && matches!(&b.deps[..], [d] if d.strip_prefix("self.").is_some_and(|f| !f.contains('.') && field_typed(f)))
                        })
                }
                [me, field] if me == "self" => field_typed(field),
                _ => false,
            }
        })
        .collect()
}

/// A broker's consumer type: rdkafka's `StreamConsumer` / `BaseConsumer` by name, or a
/// `Consumer` / `Subscriber` that the file's `use` paths take from a broker crate.
fn is_consumer_type(krate: &CrateView<'_>, id: BodyId, t: &str) -> bool {
    let last = t.rsplit("::").next().unwrap_or(t);
    BROKER_CONSUMER_TYPES.contains(&last)
        || matches!(
            last,
            "Consumer" | "Subscriber" | "PullConsumer" | "PushConsumer"
        ) && {
            let full = krate.facts.resolve(id.file, t);
            BROKER_CRATES.iter().any(|c| full.starts_with(c))
        }
}

/// The first call of the body that takes the next message of a subscription (the loop around
/// it is where each message is handled).
pub(crate) fn subscription_receipt(krate: &CrateView<'_>, id: BodyId) -> Option<u32> {
    let body = krate.body(id);
    let subscribed = (0..body.events.len() as u32).find(|&c| takes_from_subscription(body, c));
    let typed = consumer_receipts(krate, id).first().copied();
    subscribed.into_iter().chain(typed).min()
}

/// Is call event `c` a decoding of what it is given (`serde_json::from_slice`, `into_inner`,
/// `decode`), not a lookup?
fn decodes(body: &Body, c: u32) -> bool {
    matches!(
        body.events.get(c as usize).map(|e| &e.kind),
        Some(EventKind::Call(call)) if call.steps.iter().all(|s| {
            DECODE_STEPS.contains(&s.name.as_str()) || RESULT_ADAPTER_STEPS.contains(&s.name.as_str())
        })
    )
}

/// The body's parameters that hold its message.
fn message_params(body: &Body) -> Vec<&Name> {
    body.params
        .iter()
        .filter(|(n, ty)| n != "self" && carries_message(n, ty))
        .map(|(n, _)| n)
        .collect()
}

/// A parameter that holds the message: typed as one, or named as one (`event`, `payload`).
fn carries_message(name: &str, ty: &[Name]) -> bool {
    is_message_param_name(name)
        || ty.iter().any(|t| {
            let last = t.rsplit("::").next().unwrap_or(t);
            BROKER_MESSAGE_TYPES.contains(&last) || is_message_type(last) || is_event_type(last)
        })
}

/// The body's own evidence of handling a message: a message route, a consumer registration,
/// a message parameter, or its name.
fn direct(krate: &CrateView<'_>, id: BodyId) -> Option<Evidence> {
    let body = krate.body(id);
    if body.message_route {
        return Some(Evidence::Routed(Name::EMPTY));
    }
    if let Some(path) = krate.registered().get(&id) {
        return Some(if path.is_empty() {
            Evidence::Consumer
        } else {
            Evidence::Routed(path.clone())
        });
    }
    if (0..body.events.len() as u32).any(|c| receives(body, c))
        || !consumer_receipts(krate, id).is_empty()
    {
        return Some(Evidence::Subscribed);
    }
    let handles = is_dispatch_target_name(&body.ident);
    for (name, ty) in &body.params {
        if name == "self" {
            continue;
        }
        for t in ty {
            let last = t.rsplit("::").next().unwrap_or(t);
            let broker = BROKER_MESSAGE_TYPES.contains(&last)
                || last == "Message" && {
                    let full = krate.facts.resolve(id.file, t);
                    BROKER_CRATES.iter().any(|c| full.starts_with(c))
                };
            if broker || is_message_type(last) || handles && is_event_type(last) {
                return Some(Evidence::Receives(Name::new(last)));
            }
        }
    }
    (is_message_handler_name(&body.ident) && !takes_stored_record(body)).then_some(Evidence::Named)
}

/// Does the body take a record the crate stored (`event: ScheduledEventRow`, `jobs:
/// Vec<JobRecord>`)? A function named for events that works on rows of its own table is a
/// worker of its own queue, not the receiver of a message from outside.
fn takes_stored_record(body: &Body) -> bool {
    body.params
        .iter()
        .filter(|(n, _)| n != "self")
        .flat_map(|(_, ty)| ty)
        .any(|t| is_stored_record_type(t.rsplit("::").next().unwrap_or(t)))
}
