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
    /// And a Kubernetes object written back whole with the `resourceVersion` it was read at:
    /// kube's `replace` / `replace_status` of a copy of an object the function was handed (a
    /// reconciler's `Arc<K>`, a watch event's object, a helper's parameter: `let mut copy =
    /// (*obj).clone()`), or a merge, apply or strategic patch made of the whole copy
    /// (`Patch::Merge(&copy)`), after the function awaited other work (created the objects the
    /// status records, called another service) or in a reconciler the crate hands to
    /// `Controller::..run(..)`. Any change to the object since it was read (a label, the spec,
    /// another controller's status) makes the API server refuse what the function computed,
    /// whether the conflict is logged or handed up: the next run redoes the work before it and
    /// meets the same precondition. Silent for a patch of the changed fields alone, for an
    /// object fetched afresh (`api.get(..)`) before the write, for a copy whose
    /// `resourceVersion` is cleared, and for an object written where it was handed in with
    /// nothing awaited before, outside a reconciler.
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
    /// recognised only where the crate hands it by name to `Controller::..run(..)`; the write
    /// only on a receiver typed or built as kube's `Api` in the function itself (a local, a
    /// parameter, a field of `self`); a copy passed through a helper that builds the request is
    /// not followed.
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
/// object changed since that version, whatever changed. A merge or strategic patch made of the
/// whole object (`Patch::Merge(&obj)`) carries that version too. (A server-side apply patch is
/// made of a desired object the operator builds, with no version of its own.)
const KUBE_REPLACE_STEPS: &[&str] = &["replace", "replace_status"];
const KUBE_PATCH_STEPS: &[&str] = &["patch", "patch_status"];

/// A Kubernetes object handed to this function (the reconciler's `Arc<K>`, a watch event's
/// object, a helper's parameter) and written back whole after the function awaited something
/// else, or by a reconciler the crate hands to `Controller::..run(..)`: `replace_status(&name,
/// &pp, serde_json::to_vec(&copy)?)`, `patch(&name, &pp, &Patch::Merge(&copy))`. The copy
/// carries the `resourceVersion` of when it was read: a label, a spec edit, another
/// controller's status since then makes the API server refuse what this function computed,
/// although nothing it decided is stale.
fn replaced_from_cache(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let events = cx.body.events.len() as u32;
    let Some((w, data)) = (0..events).find_map(|w| kube_write(cx, w).map(|d| (w, d))) else {
        return;
    };
    if clears_resource_version(cx.body) {
        return;
    }
    // The object: a parameter the write's data is a copy of. A status or a spec handed in is a
    // part of an object, not one (`patch_status(.., &Patch::Merge(&json!({"status": status})))`).
    let part = |ty: &crate::ir::TypeRef| {
        ty.iter().any(|t| {
            let t = t.rsplit("::").next().unwrap_or(t);
            matches!(t, "str" | "String" | "Value")
                || ["Status", "Spec", "Condition"]
                    .iter()
                    .any(|w| t.ends_with(w))
        })
    };
    let Some(object) = cx
        .body
        .params
        .iter()
        .filter(|(_, ty)| !part(ty))
        .map(|(n, _)| n)
        .find(|n| {
            n.as_str() != "self" && {
                let copies = copies_of(cx.body, n);
                data.iter()
                    .any(|p| copies.iter().any(|c| c.as_str() == query::first(p)))
            }
        })
    else {
        return;
    };
    // Time passed since the object was read: the function awaited something else first, or it
    // is a reconciler working from the controller's cache; a helper is judged by its callers
    // (one that awaited before calling it, or a reconciler).
    let waited = |body: &crate::ir::Body, before: u32| {
        (0..before)
            .any(|i| matches!(&body.events[i as usize].kind, EventKind::Call(c) if c.awaited()))
    };
    if !waited(cx.body, w)
        && !reconciler(cx.krate, cx.body)
        && !cx.krate.call_sites(cx.id).iter().any(|&(caller, site)| {
            let body = cx.krate.body(caller);
            waited(body, site) || reconciler(cx.krate, body)
        })
    {
        return;
    }
    let mut d = cx.diag(
        &RULE,
        w,
        format!(
            "the Kubernetes object `{object}` is written back whole, with the `resourceVersion` it was read at"
        ),
    );
    d.primary_label = Some(
        "any other change to the object since it was read makes the API server refuse this write (409 Conflict)".to_string(),
    );
    d.notes.push(
        "what this function computed is refused because of an edit it has nothing to do with (a label, the spec, another controller's status)".to_string(),
    );
    d.help = Some(
        "write only what this function decided, with no version precondition: a merge or apply patch of just those fields (`patch_status` with `Patch::Merge(json!({\"status\": ..}))`); where the spec matters, compare `metadata.generation` with the status' `observed_generation`".to_string(),
    );
    out.push(d);
}

/// The places the data of a kube write at `w` is built from, when `w` is one: a `replace` /
/// `replace_status` (its third argument, or the arguments of the call that makes it:
/// `serde_json::to_vec(&copy)`), or a `patch` / `patch_status` with a merge or strategic patch
/// of a place (`&Patch::Merge(&copy)`, not a `json!` literal), on a kube `Api`.
fn kube_write<'a>(cx: &RuleCx<'a>, w: u32) -> Option<Vec<&'a Name>> {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return None;
    };
    let step = call.steps.first()?;
    if call.recv.is_empty() || call.steps.len() > 3 || step.args.len() != 3 {
        return None;
    }
    let replace = KUBE_REPLACE_STEPS.contains(&step.name.as_str());
    if !replace && !KUBE_PATCH_STEPS.contains(&step.name.as_str()) {
        return None;
    }
    let data = &step.args[2];
    let mut places: Vec<&Name> = Vec::new();
    if replace {
        places.extend(data.paths.iter());
        if let Some(k) = data.ev
            && let EventKind::Call(inner) = &cx.body.events[k as usize].kind
        {
            places.extend(inner.all_args().flat_map(|a| a.paths.iter()));
        }
    } else if data.calls().iter().any(|c| {
        let mut segs = c.rsplit("::");
        segs.next().is_some_and(is_whole_patch) && segs.next() == Some("Patch")
    }) {
        // `&Patch::Merge(&copy)`: the patch is built in the argument itself.
        places.extend(data.paths.iter());
    } else {
        // `let patch = Patch::Merge(&copy);` first.
        let local = data.paths.first()?;
        let bind = query::binding(cx.body, w, query::first(local))?;
        let built = bind
            .calls
            .iter()
            .find_map(|&k| match &cx.body.events[k as usize].kind {
                EventKind::Call(c)
                    if c.func.len() >= 2
                        && c.func[c.func.len() - 2] == "Patch"
                        && is_whole_patch(c.func_last()) =>
                {
                    Some(&**c)
                }
                _ => None,
            })?;
        places.extend(built.all_args().flat_map(|a| a.paths.iter()));
    }
    (!places.is_empty() && is_kube_api(cx, w)).then_some(places)
}

/// A kube patch made of a whole object: `Patch::Merge(..)`, `Patch::Strategic(..)`.
fn is_whole_patch(variant: &str) -> bool {
    matches!(variant, "Merge" | "Strategic")
}

/// The locals holding the object or a copy of it (`let mut copy = (*obj).clone()`, `let mut
/// copy = obj.as_ref().clone()`), the object itself included. A value fetched with the object's
/// name (`api.get(&obj.name_any()).await`) is the object as it is now, and one a function builds
/// from it (`build_ingress(&domains)`) a new object: no copies.
fn copies_of(body: &crate::ir::Body, object: &Name) -> Vec<Name> {
    // Steps that hand the value on unchanged, and serialisations of it (the request body).
    const COPY_STEPS: &[&str] = &[
        "clone",
        "as_ref",
        "to_owned",
        "deref",
        "cloned",
        "unwrap",
        "expect",
        "unwrap_or_default",
        "context",
        "with_context",
        "map_err",
    ];
    const SERIALISE: &[&str] = &[
        "to_vec",
        "to_vec_pretty",
        "to_value",
        "to_string",
        "from_value",
    ];
    let mut out = vec![object.clone()];
    for ev in body.events.iter() {
        let EventKind::Bind(b) = &ev.kind else {
            continue;
        };
        // A new object built around the copy's metadata (`Plan { metadata:
        // target.metadata.clone(), status: Some(s), .. }`) carries its version too; one whose
        // metadata is built afresh (`ObjectMeta { name: Some(msg.name), .. }`), like any other
        // struct built from the copy's fields, does not.
        let keeps_metadata = b
            .lit()
            .is_some_and(|l| l.fields.iter().any(|f| f == "metadata"))
            && b.deps.iter().any(|d| {
                d.ends_with(".metadata") && out.iter().any(|o| o.as_str() == query::first(d))
            });
        if b.deps
            .iter()
            .any(|d| out.iter().any(|o| o.as_str() == query::first(d)))
            && (keeps_metadata
                || b.lit().is_none()
                    && b.calls.iter().all(|&k| {
                        matches!(&body.events[k as usize].kind, EventKind::Call(c)
                        if (c.func.is_empty()
                            || SERIALISE.contains(&c.func_last())
                            || COPY_STEPS.contains(&c.func_last()))
                            && c.steps.iter().all(|s| {
                                COPY_STEPS.contains(&s.name.as_str())
                                    || SERIALISE.contains(&s.name.as_str())
                            }))
                    }))
        {
            out.extend(b.names.iter().filter(|n| n.as_str() != "_").cloned());
        } else {
            // Shadowed by a value that is no copy (`.map_err(|e| ..)` binding another `e`).
            out.retain(|o| !b.names.contains(o) || o == object);
        }
    }
    out
}

/// Does the body clear the copy's `resourceVersion` (`copy.metadata.resource_version = None`)?
/// Then the replace has no precondition.
fn clears_resource_version(body: &crate::ir::Body) -> bool {
    body.events.iter().any(
        |ev| matches!(&ev.kind, EventKind::Assign(a) if a.target.ends_with("resource_version")),
    )
}

/// Is the receiver of the call at `w` a kube `Api<K>`: a local bound with that type or from
/// `Api::namespaced(..)` / `Api::all(..)` & co., or a parameter of that type, `Api` resolving
/// to kube?
fn is_kube_api(cx: &RuleCx<'_>, w: u32) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return false;
    };
    let kube =
        |head: &str| head == "Api" && cx.krate.facts.resolve(cx.id.file, head).starts_with("kube");
    let recv = match &call.recv[..] {
        [r] => r,
        // `self.api`: the field's declared type.
        [s, field] if s == "self" => {
            return cx
                .body
                .self_ty
                .as_deref()
                .and_then(|t| cx.krate.facts.field_type(t, field))
                .and_then(|t| t.first())
                .is_some_and(|t| kube(t));
        }
        _ => return false,
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
fn reconciler(krate: &crate::rules::CrateView<'_>, body: &crate::ir::Body) -> bool {
    let short = body.ident.as_str();
    krate.facts.all_bodies().any(|(id, _)| {
        krate.body(id).events.iter().any(|ev| {
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
