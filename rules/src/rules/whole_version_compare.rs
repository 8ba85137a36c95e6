//! `whole-version-compare`: a callback or message handler that rejects its message when the
//! whole object's version changed, where the identity of the operation the message answers
//! was meant.

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::EffectKind;
use crate::handlers;
use crate::ir::EventKind;
use crate::kb::names::is_whole_version;
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a message handler (see `blind-callback-write` for how one is recognised) that
    /// decides whether its message still applies by the whole object's version: a test that
    /// compares a version read from the record (`order.version`, `lock_version`, `revision`,
    /// `etag`) with the version the message carries, or a write filtered on the version the
    /// message carries (`UPDATE .. WHERE id = $1 AND version = $2`) in a handler that did not
    /// read the row itself.
    ///
    /// And a Kubernetes reconciler (a fn the crate hands to kube's `Controller::..run(..)`)
    /// that writes the object it was handed back whole — `replace_status` / `replace` of a copy
    /// of its `Arc<K>` (`let mut copy = (*obj).clone()`) — and only logs the failure: the copy
    /// carries the `resourceVersion` of the controller's cache, so any change to the object
    /// since then (a label, the spec, another controller's status) makes the API server refuse
    /// the status this reconcile computed, and it is lost. Silent for a merge or apply patch of
    /// the status, for a conflict handed up with `?` (the controller requeues with the object
    /// as it is now), for an object fetched afresh (`api.get(..)`) before the replace, and for
    /// a copy whose `resourceVersion` is cleared.
    ///
    /// It stays silent for a version the handler read itself and writes back (optimistic
    /// locking of its own read-modify-write), for versions named for one operation
    /// (`attempt_version`, `payment_generation`, a reservation or attempt id), and outside
    /// message handlers (an `If-Match` on a user's whole-resource `PUT` is meant to fail on any
    /// edit). It is a note: it never fails a run unless configured to.
    ///
    /// ### Why is this bad?
    ///
    /// Any edit bumps the whole object's version, including edits that have nothing to do with
    /// the operation the message answers, so a valid message is refused:
    ///
    /// ```text
    /// t0  checkout starts payment attempt A for order 42 (version 7); the PSP is told v7
    /// t1  the customer edits the delivery note: order 42 is now version 8
    /// t2  the PSP's "A succeeded" callback carries v7: 7 != 8, rejected as stale
    ///     <- the customer was charged, and the order never becomes paid
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let order = load_order(&db, cb.order_id).await?;
    /// if order.version != cb.order_version {
    ///     return Ok(StatusCode::OK); // "stale"
    /// }
    /// ```
    ///
    /// ### Use instead
    ///
    /// Compare the smallest accurate identity: the id of the payment attempt (or reservation,
    /// or a generation that only this lifecycle bumps) that the message answers, and the state
    /// it may move from:
    ///
    /// ```rust,ignore
    /// if order.payment_attempt_id.as_deref() != Some(&cb.attempt_id) || order.status != "awaiting_payment" {
    ///     return Ok(StatusCode::OK);
    /// }
    /// ```
    ///
    /// `#[staleguard::fenced(verify = order.payment_attempt_id == cb.attempt_id, ..)]` writes
    /// that check under the lock.
    ///
    /// ### Known problems
    ///
    /// Whether a version is bumped by every edit or only by one lifecycle is not visible in the
    /// code: a `version` column only the payment flow increments is reported too (hence a note).
    /// Handlers are recognised as `blind-callback-write` recognises them. A reconciler is
    /// recognised only where the crate hands it by name to `Controller::..run(..)`, and the
    /// replace only on a receiver typed or built as kube's `Api` in the reconciler itself.
    pub(crate) static RULE = {
        name: "whole-version-compare",
        level: Note,
        summary: "a callback rejected because the whole object's version changed, where an operation identity was meant",
        applies: applies,
        check: check,
    };
}

/// A test of a read's result, a write with a filter, or a call to another service (a
/// Kubernetes API server's `replace`).
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Read) || k.has(EffectKind::Write) || k.has(EffectKind::Remote)
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    replaced_from_cache(cx, out);
    if cx.message_handler().is_none() {
        return;
    }
    let events = cx.body.events.len() as u32;
    let mut message = handlers::messages_of(cx.krate, cx.id);
    let mut reported = false;
    for i in 0..events {
        if reported {
            break;
        }
        match &cx.body.events[i as usize].kind {
            EventKind::Cond(t) => {
                message.advance(i);
                let from_message = |d: &Name| message.holds(d);
                let msg_version = t
                    .deps
                    .iter()
                    .find(|d| from_message(d) && is_whole_version(d));
                let read_version = t
                    .deps
                    .iter()
                    .find(|d| !from_message(d) && is_whole_version(d) && read_before(cx, i, d));
                if let (Some(m), Some(r)) = (msg_version, read_version) {
                    out.push(report_test(cx, i, r, m));
                    reported = true;
                }
            }
            EventKind::Call(c) => {
                let Some(e) = cx.effs(i).find(|e| {
                    e.kind == EffectKind::Write
                        && !e.insert
                        && !e.in_memory
                        && e.where_cols.iter().any(|c| is_whole_version(c))
                        // A handler it dispatches to is judged on its own.
                        && e.via
                            .is_none_or(|h| handlers::message_handler(cx.krate, h).is_none())
                }) else {
                    continue;
                };
                message.advance(i);
                let carried = c
                    .all_args()
                    .flat_map(|a| &a.paths)
                    .find(|p| is_whole_version(p) && message.holds(p));
                let own_read = (0..i).any(|r| {
                    cx.effs(r).any(|x| {
                        x.kind == EffectKind::Read
                            && query::same_table_prefixed(x.table.as_deref(), e.table.as_deref())
                    })
                });
                if let Some(m) = carried
                    && !own_read
                {
                    let column = e
                        .where_cols
                        .iter()
                        .find(|c| is_whole_version(c))
                        .cloned()
                        .unwrap_or_default();
                    out.push(report_write(cx, i, &column, m, e.table.as_deref()));
                    reported = true;
                }
            }
            _ => {}
        }
    }
}

/// Does the local `place` starts from hold the result of a database read made before event
/// `i`?
fn read_before(cx: &RuleCx<'_>, i: u32, place: &str) -> bool {
    let local = query::first(place);
    (0..i).any(|r| {
        cx.effs(r)
            .any(|e| e.kind == EffectKind::Read && !e.in_memory)
            && query::derived(cx.body, r).contains(local)
    })
}

fn report_test(cx: &RuleCx<'_>, i: u32, read: &str, message: &str) -> Diagnostic {
    let mut d = cx.diag(
        &RULE,
        i,
        format!("the message is checked against the whole object's version (`{read}` against `{message}`)"),
    );
    d.primary_label = Some("any unrelated edit of the object makes this message stale".to_string());
    d.help = Some(help());
    d
}

fn report_write(
    cx: &RuleCx<'_>,
    i: u32,
    column: &str,
    message: &str,
    table: Option<&str>,
) -> Diagnostic {
    let table = table.unwrap_or("the record");
    let mut d = cx.diag(
        &RULE,
        i,
        format!("the write of `{table}` is filtered on the whole object's `{column}` that the message carries (`{message}`)"),
    );
    d.primary_label = Some("any unrelated edit of the object makes this write miss".to_string());
    d.help = Some(help());
    d
}

fn help() -> String {
    "compare the identity of the operation the message answers (the payment attempt or reservation id, a generation only this lifecycle bumps) and the state it may move from, not the whole object's version; `#[staleguard::fenced(verify = ..)]` checks it under the lock".to_string()
}

/// kube's `Api::replace` / `replace_status`: the object is sent whole, its
/// `metadata.resourceVersion` included, and the API server refuses it (409 Conflict) when the
/// object changed since that version, whatever changed.
const KUBE_REPLACE_STEPS: &[&str] = &["replace", "replace_status"];

/// A Kubernetes reconciler (a fn the crate hands to kube's `Controller::..run(reconcile, ..)`)
/// that writes the object it was handed back whole (`replace_status(&name, &pp,
/// serde_json::to_vec(&copy)?)`, the copy made from the reconciler's `Arc<K>`) and only logs the
/// failure. The copy carries the resourceVersion of the controller's cache: a spec edit, a label,
/// another controller's status write since then makes the API server refuse this status,
/// although nothing this reconcile decided is stale, and the status it computed is lost.
fn replaced_from_cache(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((object, _)) = cx.body.params.first() else {
        return;
    };
    let replaces = |c: &crate::ir::Call| {
        c.recv.len() == 1
            && c.steps.len() <= 3
            && c.steps
                .first()
                .is_some_and(|s| KUBE_REPLACE_STEPS.contains(&s.name.as_str()) && s.args.len() == 3)
    };
    let events = cx.body.events.len() as u32;
    let Some(w) = (0..events).find(|&w| {
        matches!(&cx.body.events[w as usize].kind, EventKind::Call(c) if replaces(c))
    }) else {
        return;
    };
    if !is_kube_api(cx, w) || !reconciler(cx) || clears_resource_version(cx.body) {
        return;
    }
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return;
    };
    // The conflict handed up (`?`) makes the controller requeue with a fresh object; only a
    // swallowed one loses the status.
    if call.steps.iter().any(|s| s.tried) || query::checked_by_call(cx.body, w) {
        return;
    }
    let copies = copies_of(cx.body, object);
    let data = &call.steps[0].args[2];
    let mut places: Vec<&Name> = data.paths.iter().collect();
    if let Some(k) = data.ev
        && let EventKind::Call(inner) = &cx.body.events[k as usize].kind
    {
        places.extend(inner.all_args().flat_map(|a| a.paths.iter()));
    }
    if !places
        .iter()
        .any(|p| copies.iter().any(|c| c.as_str() == query::first(p)))
    {
        return;
    }
    let mut d = cx.diag(
        &RULE,
        w,
        format!(
            "the reconciled object is written back whole with the `resourceVersion` the controller's cache handed `{object}`"
        ),
    );
    d.primary_label = Some(
        "any other change to the object since the cache saw it makes the API server refuse this write (409 Conflict)".to_string(),
    );
    d.notes.push(
        "the failure is only logged: a status this reconcile computed is lost because of an edit it has nothing to do with".to_string(),
    );
    d.help = Some(
        "write only what this reconcile decided, with no version precondition: `patch_status` with a merge or apply patch of the status (`Patch::Merge(json!({\"status\": ..}))`); compare `metadata.generation` with the status' `observed_generation` where the spec matters".to_string(),
    );
    out.push(d);
}

/// The locals holding the object or a copy of it (`let mut copy = (*obj).clone()`, `let mut
/// copy = obj.as_ref().clone()`), the object itself included. A value fetched with the object's
/// name (`api.get(&obj.name_any()).await`) is the object as it is now, no copy.
fn copies_of(body: &crate::ir::Body, object: &Name) -> Vec<Name> {
    let mut out = vec![object.clone()];
    for ev in body.events.iter() {
        if let EventKind::Bind(b) = &ev.kind
            && b.deps.iter().any(|d| out.iter().any(|o| o.as_str() == query::first(d)))
            && !b.calls.iter().any(|&k| {
                matches!(&body.events[k as usize].kind, EventKind::Call(c) if c.awaited())
            })
        {
            out.extend(b.names.iter().filter(|n| n.as_str() != "_").cloned());
        }
    }
    out
}

/// Does the body clear the copy's `resourceVersion` (`copy.metadata.resource_version = None`)?
/// Then the replace has no precondition.
fn clears_resource_version(body: &crate::ir::Body) -> bool {
    body.events.iter().any(|ev| {
        matches!(&ev.kind, EventKind::Assign(a) if a.target.ends_with("resource_version"))
    })
}

/// Is the receiver of the call at `w` a kube `Api<K>`: a local bound with that type or from
/// `Api::namespaced(..)` / `Api::all(..)` & co., or a parameter of that type, `Api` resolving
/// to kube?
fn is_kube_api(cx: &RuleCx<'_>, w: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let Some(recv) = call.recv.first() else {
        return false;
    };
    let kube = |head: &str| {
        head == "Api"
            && cx
                .krate
                .facts
                .resolve(cx.id.file, head)
                .starts_with("kube")
    };
    if cx
        .body
        .params
        .iter()
        .any(|(n, ty)| n == recv && ty.first().is_some_and(|t| kube(t)))
    {
        return true;
    }
    let Some(bind) = query::binding(cx.body, w, recv) else {
        return false;
    };
    bind.extra
        .as_ref()
        .and_then(|x| x.ty.as_ref())
        .and_then(|t| t.first())
        .is_some_and(|t| kube(t))
        || bind.calls.iter().any(|&k| {
            matches!(&cx.body.events[k as usize].kind, EventKind::Call(c)
                if c.func.len() == 2 && kube(&c.func[0]))
        })
}

/// Is this body a kube reconciler: handed by name to `Controller::new(..)..run(..)` somewhere
/// in the crate?
fn reconciler(cx: &RuleCx<'_>) -> bool {
    let short = cx.body.ident.as_str();
    cx.krate.facts.all_bodies().any(|(id, _)| {
        cx.krate.body(id).events.iter().any(|ev| {
            matches!(&ev.kind, EventKind::Call(c)
                if c.func.len() >= 2
                    && c.func[c.func.len() - 2] == "Controller"
                    && c.steps.iter().any(|s| {
                        s.name == "run"
                            && s.args.first().is_some_and(|a| {
                                a.paths.iter().any(|p| query::last(p) == short)
                            })
                    }))
        })
    })
}
