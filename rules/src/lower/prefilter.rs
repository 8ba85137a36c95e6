//! Lowering's pre-filter: a body that no rule can fire on keeps only what summaries and
//! receiver resolution use (its calls, with only the constants among their arguments, and its
//! `let`s), which is most of a large crate's bodies and most of the memory a run keeps.

use crate::apis;

/// A body with no `.await`, no SQL and no trigger step (see [`crate::apis`]), and no call of a
/// function the project's knowledge names: sync library code. No rule can fire inside it; only
/// its calls matter (classified by their steps, for summaries).
pub(super) fn is_inert(events: &[crate::ir::Event], k: &crate::Knowledge) -> bool {
    events.iter().all(|e| match &e.kind {
        crate::ir::EventKind::Call(c) => c.steps.iter().all(|s| {
            !s.awaited
                && !apis::is_trigger_step(s.name.trim_end_matches('!'))
                && !k.lists_ident(&s.name)
                && s.args.iter().all(|a| a.sql().is_none())
        }),
        crate::ir::EventKind::Bind(b) => b.sql().is_none(),
        _ => true,
    })
}

/// Keeps only what summaries and receiver resolution use: calls (without argument details, but
/// with the constants they pass, which a callee's summary takes) and `let` bindings, with event indices remapped; the tests of the receiver's own state
/// (`if self.stage != from`), which tell a caller that the method re-checks under its guard;
/// and the registrations of message handlers (see [`registrations`]), with their arguments.
/// A constant that names a state (`State::Failed`, `'paid'`, `JOB_STATE_FAILED`).
fn state_like(v: &str) -> bool {
    crate::kb::names::is_state_value(v) || crate::kb::names::is_failure_value(v)
}

pub(super) fn keep_call_graph(events: Vec<crate::ir::Event>) -> Vec<crate::ir::Event> {
    use crate::ir::EventKind;
    let keep_args = registrations(&events);
    let mut map = vec![u32::MAX; events.len()];
    let mut out = Vec::new();
    for (i, e) in events.into_iter().enumerate() {
        match e.kind {
            EventKind::Call(mut c) => {
                for s in c.steps.iter_mut() {
                    if keep_args[i] {
                        for a in s.args.iter_mut() {
                            a.ev = a.ev.and_then(|v| map.get(v as usize).copied());
                        }
                    } else if s
                        .args
                        .iter()
                        .any(|a| a.value().is_some_and(|v| state_like(v)))
                    {
                        // A state handed down (`Self::update_state(id, State::Failed)`) is
                        // what a summary's set takes from this call: the arguments keep their
                        // places and their state-like constants, nothing else (other constants,
                        // `.expect("..")` messages above all, would cost memory for nothing).
                        for a in s.args.iter_mut() {
                            a.ev = None;
                            a.extra = a.value().filter(|v| state_like(v)).cloned().map(|value| {
                                Box::new(crate::ir::ArgExtra {
                                    value: Some(value),
                                    ..Default::default()
                                })
                            });
                        }
                    } else {
                        s.args = Default::default();
                    }
                }
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: EventKind::Call(c),
                });
            }
            EventKind::Bind(mut b) => {
                b.calls = b
                    .calls
                    .iter()
                    .filter_map(|&c| map.get(c as usize).copied().filter(|&m| m != u32::MAX))
                    .collect();
                // Only the declared type still matters (receiver classes).
                b.extra = b.extra.and_then(|x| {
                    x.ty.map(|ty| {
                        Box::new(crate::ir::BindExtra {
                            ty: Some(ty),
                            ..Default::default()
                        })
                    })
                });
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: EventKind::Bind(b),
                });
            }
            EventKind::Cond(mut t)
                if t.deps.iter().any(|d| d == "self" || d.starts_with("self.")) =>
            {
                t.calls = t
                    .calls
                    .iter()
                    .filter_map(|&c| map.get(c as usize).copied().filter(|&m| m != u32::MAX))
                    .collect();
                map[i] = out.len() as u32;
                out.push(crate::ir::Event {
                    sp: e.sp,
                    kind: EventKind::Cond(t),
                });
            }
            _ => {}
        }
    }
    out.shrink_to_fit();
    out
}

/// The call events that register a message handler — a route step at a path that receives
/// messages (`.route("/webhooks/psp", post(h))`), a consumer registration (`build_fn(h)`) —
/// and the calls their arguments lowered to (`post(h)`, `web::post().to(h)`): what
/// [`crate::handlers::registrations`] reads.
fn registrations(events: &[crate::ir::Event]) -> Vec<bool> {
    use crate::ir::EventKind;
    let mut keep = vec![false; events.len()];
    for i in (0..events.len()).rev() {
        let EventKind::Call(c) = &events[i].kind else {
            continue;
        };
        let registers = c.steps.iter().any(|s| {
            apis::CONSUMER_REGISTRATION_STEPS.contains(&s.name.as_str())
                || apis::ROUTE_STEPS.contains(&s.name.as_str())
                    && s.args.first().is_some_and(|a| {
                        a.strs()
                            .iter()
                            .any(|p| p.starts_with('/') && crate::kb::names::is_message_route(p))
                    })
        });
        if registers || keep[i] {
            keep[i] = true;
            for a in c.all_args() {
                if let Some(ev) = a.ev.filter(|&v| (v as usize) < i) {
                    keep[ev as usize] = true;
                }
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use crate::apis::TRIGGERS;
    use crate::ir::EventKind;
    use crate::parse::LineIndex;

    /// The events of the only body of `text`, as lowered.
    fn lowered(text: &str) -> Vec<crate::ir::Event> {
        let lines = LineIndex::new(text);
        let ir = super::super::parse_and_lower(text, &lines, &crate::Knowledge::default())
            .expect("parses");
        ir.bodies
            .into_iter()
            .next()
            .expect("one body")
            .events
            .into_vec()
    }

    fn kept_whole(events: &[crate::ir::Event]) -> bool {
        let tested = events.iter().any(|e| matches!(e.kind, EventKind::Cond(_)));
        let with_args = events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Call(c) if c.all_args().next().is_some()));
        tested && with_args
    }

    /// Every step the knowledge base classifies by its name keeps a sync body (no `.await`, no
    /// SQL) whole: its tests and its calls' arguments, as a method and as a function.
    #[test]
    fn every_trigger_keeps_a_sync_body_whole() {
        for (list, steps) in TRIGGERS {
            for step in *steps {
                for call in [format!("x.{step}(y)"), format!("m::{step}(y)")] {
                    let text = format!("fn f(x: X, y: u8) {{ if y > 1 {{ {call}; }} }}");
                    assert!(kept_whole(&lowered(&text)), "{list}: `{call}` was dropped");
                }
            }
        }
    }

    #[test]
    fn a_body_with_no_trigger_keeps_only_its_calls() {
        let events = lowered("fn f(x: X, y: u8) { if y > 1 { x.frobnicate(y); } }");
        assert!(!kept_whole(&events), "{events:?}");
        assert!(
            events
                .iter()
                .any(|e| matches!(&e.kind, EventKind::Call(c) if c.head() == "frobnicate"))
        );
        let awaited = lowered("async fn f(x: X, y: u8) { if y > 1 { x.frobnicate(y).await; } }");
        assert!(kept_whole(&awaited), "an `.await` keeps a body whole");
    }

    #[test]
    fn a_configured_function_keeps_a_body_whole() {
        let text = "fn f(x: X, y: u8) { if y > 1 { x.charge(y); } }";
        let lines = LineIndex::new(text);
        let mut k = crate::Knowledge::default();
        k.remote_calls.push("Gateway::charge".into());
        let ir = super::super::parse_and_lower(text, &lines, &k).expect("parses");
        assert!(kept_whole(&ir.bodies[0].events));
    }
}
