//! `blind-callback-write`: a webhook, callback or message handler that writes the state its
//! message speaks of without reading and checking the record's current state first.

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::facts::BodyId;
use crate::handlers::{self, Evidence};
use crate::ir::{EventKind, Region};
use crate::kb::names::{is_state_column, is_state_place, is_state_value};
use crate::query;
use crate::state_writes::{
    guarded_filter, holder_writes, in_postal_address, moved_state, only_transition, own_new_row,
};

declare_rule! {
    /// ### What it does
    ///
    /// Flags a message handler — a route whose path says it receives messages
    /// (`/webhooks/psp`, `/payment-callback`, `/ipn`, `/notify`, `/events`), a function named as
    /// one (`stripe_webhook`, `handle_payment_event`), a consumer registered with a queue
    /// (apalis `build_fn`), a function that takes messages from a subscription itself (`while
    /// let Some(msg) = sub.next().await` after an awaited `client.subscribe(..)`, SQS
    /// `receive_message()`, or `consumer.recv().await` on a consumer it is handed, known by its
    /// declared type: rdkafka's `StreamConsumer`, an async-nats `Subscriber`), a function taking a broker's message (lapin `Delivery`, rdkafka
    /// `BorrowedMessage`, an `async_nats::Message`) or a message type (`Json<PaymentWebhook>`,
    /// `Request<ShipmentNotification>`), or what such a handler dispatches to
    /// (`handle_pull_request_closed`) — that updates a record's state column (SQL, diesel,
    /// sea-orm, Redis, also through a helper) without having read and checked the record's
    /// current state: no read of the record whose result it tests before the write, and no
    /// expected state in the write's filter. Also one that upserts the record from the message
    /// (`INSERT .. ON CONFLICT (id) DO UPDATE SET status = excluded.status`, diesel's
    /// `.on_conflict(..).do_update().set(&row)`) with nothing in the conflict branch's filter:
    /// a delivery that arrives late overwrites a newer state.
    ///
    /// It stays silent when the handler (or every caller that hands it the message) looks at
    /// the record's current state before the write: reads it under a row lock (`FOR UPDATE`),
    /// reads it filtered on its state, tests a state or identity field of what it read
    /// (`order.status`, `row.attempt_id`; a test that the record exists is no check), claims
    /// it, or moves it by a compare-and-set whose rows it checks — whether such a read is
    /// under a lock is `check-before-lock`'s question. Also when the write's filter holds the
    /// expected state, a version, an owner or a token (for an upsert, its `DO UPDATE .. WHERE`
    /// compares a time or a version), when the handler inserts a new row (an inbox or event
    /// log for later processing), writes a row it created itself, sets the only
    /// value the crate ever sets that column to, or writes a work row it holds alone (see
    /// `unguarded-state-transition`), for a function named for events that takes a stored
    /// row of the crate (`event: ScheduledEventRow`: a worker of its own queue), and under
    /// `#[staleguard::fenced]`.
    ///
    /// ### Why is this bad?
    ///
    /// A message is a fact from the past: it was sent before the record last changed, and
    /// providers retry, reorder and duplicate deliveries. A handler that writes what the
    /// message says, by key alone, moves the record from whatever state it is in now:
    ///
    /// ```text
    /// t0  checkout asks the provider to charge order 42
    /// t1  the customer cancels order 42: status = cancelled, the goods go back on the shelf
    /// t2  the provider's "payment succeeded" callback arrives (it was sent at t0, retried)
    /// t3  UPDATE orders SET status = 'paid' WHERE id = 42
    ///     <- a cancelled order is paid, and will ship; nobody refunds it
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// async fn payment_webhook(State(db): State<PgPool>, Json(cb): Json<PaymentWebhook>) -> StatusCode {
    ///     sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
    ///         .bind(cb.order_id)
    ///         .execute(&db)
    ///         .await
    ///         .ok();
    ///     StatusCode::OK
    /// }
    /// ```
    ///
    /// ### Use instead
    ///
    /// Let the persisted state decide: move the record only from the state the message may
    /// move it from, and treat zero rows as a stale message (answer 200, so the provider stops
    /// retrying, and reconcile — refund — out of band):
    ///
    /// ```rust,ignore
    /// let moved = sqlx::query(
    ///     "UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'awaiting_payment' AND payment_attempt_id = $2",
    /// )
    /// .bind(cb.order_id)
    /// .bind(&cb.attempt_id)
    /// .execute(&db)
    /// .await?;
    /// if moved.rows_affected() == 0 {
    ///     return Ok(StatusCode::OK); // stale or duplicate: nothing to do
    /// }
    /// ```
    ///
    /// Or read the record (in a transaction, `SELECT .. FOR UPDATE`), check its state and the
    /// operation identity the message carries, then write. `#[staleguard::fenced(..)]` generates
    /// that lock → re-read → verify → write shape.
    ///
    /// ### Known problems
    ///
    /// A handler is recognised from its route, its registration, its parameter types or its
    /// name; a consumer loop that takes messages from an in-process channel is not, nor a route
    /// registered through a helper the router calls. A record changed in memory and saved by a
    /// method a derive or an attribute macro generates (`self.update(db)`, which the crate never
    /// defines, with a database handle as its argument) writes the fields the body assigned
    /// before the call; a save the crate writes itself is judged by the statement it runs. A
    /// boolean flag (`is_paid = true`) is not taken for a state write. An upsert counts when
    /// its conflict branch overwrites a state column with what the message says (diesel's
    /// `.on_conflict(..).do_update().set(&row)`, whose `Option` fields are skipped when `None`;
    /// SQL's `ON CONFLICT .. DO UPDATE SET status = excluded.status`); MySQL's `ON DUPLICATE
    /// KEY UPDATE` is not read, and a model's own save method rewrites the state the model
    /// held unless the handler assigned it. A diesel query built in
    /// a local and loaded later loses its table. A state that is final by contract (a merge
    /// that can never be undone) is still reported when it is written blindly. Which columns
    /// are the key is not known without the schema (see `unguarded-state-transition`).
    pub(crate) static RULE = {
        name: "blind-callback-write",
        level: Error,
        summary: "callback / webhook / message handler writes new state without checking the current state",
        applies: applies,
        check: check,
    };
}

/// A write that moves a state column to something other than the time: an update, or an
/// upsert whose conflict branch overwrites the state of the row that is there.
fn moved_by(e: &Effect) -> Option<&Assigned> {
    moved_state(e)
        .or_else(|| overwritten_state(e))
        .filter(|a| a.value != AssignedValue::Now)
}

/// The state column an upsert overwrites when the row exists: one its conflict branch sets
/// (diesel's `.on_conflict(..).do_update().set(&pr)`), or, in SQL, one the statement assigns
/// twice, in its `VALUES` and in its `ON CONFLICT .. DO UPDATE SET state = excluded.state`.
fn overwritten_state(e: &Effect) -> Option<&Assigned> {
    if e.kind != EffectKind::Write
        || !e.insert
        || !e.upsert
        || e.in_memory
        || e.table.is_none()
        || in_postal_address(e)
    {
        return None;
    }
    let overwrites = |a: &Assigned| {
        e.conflict_sets()
            || e.sql.is_some() && e.sets.iter().filter(|b| b.column == a.column).count() > 1
    };
    e.sets.iter().find(|a| {
        (is_state_column(&a.column)
            || matches!(&a.value, AssignedValue::Const(v) if is_state_value(v)))
            && overwrites(a)
    })
}

fn applies(cx: &RuleCx<'_>) -> bool {
    cx.kinds().has(EffectKind::Write) && cx.effects().any_order().any(|e| moved_by(e).is_some())
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    let Some(evidence) = cx.message_handler() else {
        return;
    };
    for w in 0..cx.body.events.len() as u32 {
        for e in cx.effs(w) {
            let Some(state) = moved_by(e) else {
                continue;
            };
            // A model the handler read, saved back whole through the crate's upsert, rewrites
            // the state it read: the message moved nothing by it, unless the handler set the
            // model's state itself without looking at it first.
            if e.insert && !sets_model_state_blind(cx, w, e, state) {
                continue;
            }
            if e.ident_guard
                || guarded_filter(e, &state.column)
                || only_transition(cx, e, state)
                || holder_writes(cx, e, state)
            {
                continue;
            }
            // A handler it dispatches to is judged on its own; a callee the call's name does
            // not single out (one of several `handler`s) is not taken for it.
            if let Some(h) = e.via
                && (!handlers::names(cx.krate, cx.id, w, h)
                    || handlers::message_handler(cx.krate, h).is_some()
                    || checks_before_writing(cx, h, e.table.as_deref(), 0))
            {
                continue;
            }
            if checked_before(cx, w, e) || own_new_row(cx, w, e) {
                continue;
            }
            if callers_checked(cx, evidence, e) {
                continue;
            }
            out.push(report(cx, w, e, state, evidence));
        }
    }
}

/// For an upsert run by a method on a model (`session.upsert()`, `session.set_mfa(..)`): did the
/// body assign the model's state (`session.state = ..`) before the save without testing it
/// first? Otherwise the save writes back the state the model held. An upsert the body runs
/// itself (`.do_update().set(&pr)`, an `ON CONFLICT .. DO UPDATE`) writes what it is given.
fn sets_model_state_blind(cx: &RuleCx<'_>, w: u32, e: &Effect, state: &Assigned) -> bool {
    let EventKind::Call(call) = &cx.body.events[w as usize].kind else {
        return true;
    };
    let (Some(_), Some(model)) = (e.via, call.recv.first()) else {
        return true;
    };
    if !call.func.is_empty() {
        return true;
    }
    let field = format!("{model}.{}", state.column);
    let before = &cx.body.events[..w as usize];
    let assigned = before
        .iter()
        .any(|ev| matches!(&ev.kind, EventKind::Assign(a) if a.target == field.as_str()));
    let tested = before.iter().any(
        |ev| matches!(&ev.kind, EventKind::Cond(t) if t.deps.iter().any(|d| d == field.as_str())),
    );
    assigned && !tested
}

/// Is the written record's current state looked at before event `w` on its path: a read of it
/// under a row lock, filtered on its state, whose state is tested after the read, or made by a
/// helper that tests what it read; or a claim or compare-and-set of it (which holds the record,
/// or moved it from the state it expected)?
fn checked_before(cx: &RuleCx<'_>, w: u32, write: &Effect) -> bool {
    let same = |e: &Effect| {
        !e.in_memory && query::same_table_prefixed(e.table.as_deref(), write.table.as_deref())
    };
    let checked = |r: u32, e: &Effect| {
        let tested = |strict: bool| {
            query::tests_of(cx.body, r)
                .into_iter()
                .any(|c| c >= r && c < w && (!strict || c > r && tests_state(cx.body, c)))
        };
        match e.kind {
            EffectKind::Claim => true,
            // A compare-and-set whose rows are checked.
            EffectKind::Write => {
                !e.insert
                    && (e.conditional || e.where_cols.iter().any(|c| is_state_column(c)))
                    && tested(false)
            }
            EffectKind::Read => {
                e.locking
                    || e.where_cols.iter().any(|c| is_state_column(c))
                    || tested(true)
                    || e.via
                        .is_some_and(|h| tests_after_reading(cx, h, write.table.as_deref()))
            }
            _ => false,
        }
    };
    // The cheap question first: is there an effect on the record at all.
    (0..w).any(|r| cx.effs(r).any(|e| same(e) && checked(r, e)) && leads_to(cx, r, w))
}

/// Can event `w` run after event `r` on the same path: is `r` in no branch, loop or spawned
/// closure that ends before `w` (another arm of the `match` that `w` is in, a loop that may
/// run no time)?
fn leads_to(cx: &RuleCx<'_>, r: u32, w: u32) -> bool {
    let mut depth = 0u32;
    for i in r + 1..w {
        match &cx.body.events[i as usize].kind {
            EventKind::Enter(_) => depth += 1,
            EventKind::Leave if depth > 0 => depth -= 1,
            EventKind::Leave => {
                let closes = cx.enter_of()[i as usize];
                if closes.is_some_and(|e| match &cx.body.events[e as usize].kind {
                    EventKind::Enter(Region::Branch { .. } | Region::Loop) => true,
                    EventKind::Enter(Region::Closure { .. }) => cx.detached(e + 1),
                    _ => false,
                }) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// Does test event `c` look at a record's state: a state or identity field of what was read
/// (`order.status`, `status`, `row.attempt_id`), or a state value (`Status::Paid`)? A test that
/// the record exists (`.ok_or(NotFound)?`, `let Some(order) = .. else`) is not a check of its
/// state.
fn tests_state(body: &crate::ir::Body, c: u32) -> bool {
    let EventKind::Cond(t) = &body.events[c as usize].kind else {
        // `?` on a chain with a row check: the read's own filter decides.
        return false;
    };
    t.deps.iter().any(|d| is_state_place(d))
        || t.values.iter().any(|v| is_state_value(v))
        || t.pats.iter().flatten().any(|p| is_state_value(p))
}

/// Does helper `h` read the record and test its state (`load_pending(id)?` that returns an
/// error unless the record is pending)?
fn tests_after_reading(cx: &RuleCx<'_>, h: BodyId, table: Option<&str>) -> bool {
    let view = cx.krate.effects_of(h);
    let body = cx.krate.body(h);
    (0..body.events.len() as u32).any(|r| {
        view.at(r).any(|e| {
            e.kind == EffectKind::Read
                && !e.in_memory
                && query::same_table_prefixed(e.table.as_deref(), table)
        }) && query::tests_of(body, r)
            .into_iter()
            .any(|c| c > r && tests_state(body, c))
    })
}

/// Does helper `h` read the record and test it before it writes it (`mark_paid` that locks
/// the row, checks its state, then updates it), itself or through the helpers it calls?
fn checks_before_writing(cx: &RuleCx<'_>, h: BodyId, table: Option<&str>, depth: u32) -> bool {
    if depth > 4 {
        return false;
    }
    let sub = RuleCx::new(cx.krate, h);
    let row = |e: &Effect| query::same_table_prefixed(e.table.as_deref(), table);
    for w in 0..sub.body.events.len() as u32 {
        if let Some(write) = sub
            .effs(w)
            .find(|e| e.kind == EffectKind::Write && !e.insert && row(e))
        {
            return checked_before(&sub, w, write)
                || write
                    .via
                    .is_some_and(|next| checks_before_writing(cx, next, table, depth + 1));
        }
    }
    false
}

/// Did every caller that hands this body its message check the record before the call — the
/// message handlers that dispatch to it, or, for a handler by its own evidence, the crate's
/// callers of it (a worker that claimed the row, then hands it on)?
fn callers_checked(cx: &RuleCx<'_>, evidence: &Evidence, write: &Effect) -> bool {
    let dispatched = matches!(evidence, Evidence::Dispatched(_));
    let mut handlers = cx
        .krate
        .call_sites(cx.id)
        .iter()
        .filter(|&&(caller, site)| !dispatched || handlers::dispatches(cx.krate, caller, site))
        .peekable();
    handlers.peek().is_some()
        && handlers
            .all(|&(caller, site)| checked_before(&RuleCx::new(cx.krate, caller), site, write))
}

fn report(
    cx: &RuleCx<'_>,
    w: u32,
    e: &Effect,
    state: &Assigned,
    evidence: &Evidence,
) -> Diagnostic {
    let table = e.table.as_deref().unwrap_or("the record");
    let column = &state.column;
    let value = match &state.value {
        AssignedValue::Const(v) => format!(" to `{v}`"),
        _ => String::new(),
    };
    let upsert = e.insert && e.upsert;
    let verb = if upsert { "overwrites" } else { "sets" };
    let how = if upsert { " by an upsert" } else { "" };
    let message = match e.via {
        Some(helper) => format!(
            "message handler {verb} `{column}` of `{table}`{value}{how} through `{}` without checking the current state",
            cx.krate.body(helper).name()
        ),
        None => format!(
            "message handler {verb} `{column}` of `{table}`{value}{how} without checking the current state"
        ),
    };
    let mut d = cx.diag(&RULE, w, message);
    d.primary_label = Some(if upsert {
        "upserted from the message alone: on conflict the row's state is overwritten, whatever it is now".to_string()
    } else {
        "written from the message alone: no read of the record checked before, no expected state in the filter".to_string()
    });
    d.notes.push(format!(
        "`{}` handles a message from outside: {}",
        cx.body.name(),
        evidence.describe(cx.krate)
    ));
    d.notes.extend(cx.chain_notes(e));
    d.help = Some(if upsert {
        "overwrite only with a newer message (`ON CONFLICT (id) DO UPDATE SET .. WHERE t.updated_at < excluded.updated_at`, diesel's `.do_update().set(..).filter(..)`), or read the record, check its state, then write; `#[staleguard::fenced(..)]` generates the lock → re-read → verify → write shape".to_string()
    } else {
        format!(
            "move the record only from the state this message may move it from (`.. AND {column} = <expected>`, with the operation id the message carries) and treat 0 rows affected as a stale message, or read the record, check its state, then write; `#[staleguard::fenced(..)]` generates the lock → re-read → verify → write shape"
        )
    });
    d
}
