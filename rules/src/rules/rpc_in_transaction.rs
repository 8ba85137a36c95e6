//! `rpc-in-transaction`: a remote call (directly or through a helper) while a database
//! transaction is open, or inside a transaction closure.

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::EffectKind;
use crate::ir::EventKind;
use crate::query::{self, TX_PARAM};

declare_rule! {
    /// ### What it does
    ///
    /// Flags a remote call — an HTTP request, a gRPC call, an AWS SDK call, a message publish, or
    /// a call to a crate function that makes one — made between a transaction's begin and its
    /// commit or rollback, or inside a transaction closure (`conn.transaction(|c| ..)`,
    /// sea-orm `db.transaction(|txn| Box::pin(async move { .. }))`), also one handed to a crate
    /// helper that begins a transaction and calls the closure before committing (`in_tx(pool,
    /// |tx| ..)`). A transaction handed over by value (`ledger.post(tx, ..)`) ends there for
    /// the caller: the callee owns it, and commits or drops it. A call that only reads at the
    /// remote (an HTTP `GET` or `HEAD`, also one built in an earlier statement and sent later:
    /// `let req = http.get(url); sign(req).send().await`; an AWS `get_*` / `list_*` /
    /// `describe_*` operation, or any client's fluent operation so named and sent with
    /// `.send()`; a gRPC `get_*` / `list_*` method) is not reported: it commits nothing
    /// there. Nor is a transaction whose type says it only reads (redb's `ReadTransaction`, a
    /// `JournalReaderTransaction` snapshot): it has nothing to roll back. Nor is one this
    /// function begins that only reads: every call made on it is a plain `SELECT` (no `FOR
    /// UPDATE`), made here or in a crate helper that only reads with it (and may make the
    /// remote call itself: a mail filled from rows, then sent), and nothing writes to a
    /// database while it is open (a transaction handed to a helper whose work is not known may
    /// write, and is still reported).
    ///
    /// ### Why is this bad?
    ///
    /// The remote side commits on its own schedule; the local transaction can still roll back.
    /// And the transaction holds its row locks and a pooled connection for as long as the
    /// remote call takes:
    ///
    /// ```text
    /// t0  BEGIN; UPDATE orders SET status = 'charging' WHERE id = 42
    /// t1  POST /charges                  (payment provider charges the card)
    /// t2  the response times out after 30 s; the handler returns an error
    /// t3  ROLLBACK                       <- the order is "pending" again, the card is charged
    /// t4  the customer retries           <- charged twice
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE orders SET status = 'charging' WHERE id = $1").bind(id).execute(&mut *tx).await?;
    /// let receipt = http.post(PSP_URL).json(&charge).send().await?;
    /// tx.commit().await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Persist the intent (`PROCESSING`, with the operation id) and commit, make the remote call
    /// outside the transaction, then record the outcome in a second short transaction. Treat a
    /// timeout as UNKNOWN, to be reconciled, never as FAILED. An outbox table drained by a worker
    /// gives the same shape durably. `#[staleguard::idempotent(..)]` generates the
    /// claim → call → complete sequence around a handler.
    ///
    /// ### Known problems
    ///
    /// A remote call is recognised from the client's type, the `.await`ed builder shape and the
    /// crate's own functions; a client behind a trait object implemented outside the crate is
    /// recognised only by its name (`gateway`, `client`, ..) or through the configuration's
    /// `knowledge.remote-calls`. A transaction is a database's: a `Transaction` type from a
    /// database crate, one written bare, an associated `Transaction` type, or the crate's own
    /// type named for a database transaction or holding one in its fields; a Bitcoin or other
    /// domain transaction (`bitcoin::Transaction`, also a field typed `Transaction` in a file
    /// that imports it from such a library, a wallet's transaction record, a path through a
    /// module of the crate named like the library when the crate declares no such type) is
    /// not, so a crate that wraps its database transaction in a type with neither the name nor
    /// a field that says so is not seen. A transaction handed in that the remote call itself
    /// sends (`http.post(..).json(tx)`, a ledger's transaction broadcast) is taken for a
    /// domain transaction: a database transaction is never sent to another service.
    pub(crate) static RULE = {
        name: "rpc-in-transaction",
        level: Error,
        summary: "remote call while a database transaction is open",
        applies: applies,
        check: check,
    };
}

/// A remote call, and a transaction it could be inside.
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Remote)
        && (k.has(EffectKind::TxBegin)
            || k.has(EffectKind::TxClosure)
            || cx.effects().body.tx_param.is_some())
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    for i in 0..cx.body.events.len() as u32 {
        let st = &cx.state(i);
        let Some(tx) = st.txs.last() else { continue };
        // A call that only reads at the remote (`GET`, S3 `get_object`) commits nothing there
        // that a rollback could contradict.
        let Some(remote) = cx
            .effs(i)
            .find(|e| e.kind == EffectKind::Remote && !e.read_only())
        else {
            continue;
        };
        // The "transaction" handed in is what the remote call itself sends
        // (`client.broadcast_tx(tx)`): a ledger's transaction being broadcast, not a database
        // transaction left open. (A crate helper handed the transaction does its database work
        // in it.)
        if tx.event == TX_PARAM
            && remote.via.is_none()
            && let (Some(param), EventKind::Call(call)) = (
                cx.effects().body.tx_param.as_ref(),
                &cx.body.events[i as usize].kind,
            )
            && call
                .all_args()
                .flat_map(|a| &a.paths)
                .any(|p| query::first(p) == param.as_str())
        {
            continue;
        }
        // A transaction this body began that only reads, before the call and after it (a
        // snapshot for a copy, a listing): a rollback takes nothing back that the remote call
        // could contradict.
        if tx.event != TX_PARAM && only_reads(cx, tx) {
            continue;
        }
        let message = match remote.via {
            Some(c) => format!(
                "`{}` makes a remote call while a database transaction is open",
                cx.krate.body(c).name()
            ),
            None => "remote call while a database transaction is open".to_string(),
        };
        let mut d = cx.diag(&RULE, i, message);
        d.primary_label = Some(match remote.via {
            Some(_) => "called inside the transaction".to_string(),
            None => format!("{} inside the transaction", remote.what),
        });
        if tx.event == TX_PARAM {
            d.labels.push(cx.tx_param_label());
        }
        let closure = tx.event != TX_PARAM && cx.has(tx.event, EffectKind::TxClosure);
        if tx.event != TX_PARAM {
            d.labels.push(cx.label(
                tx.event,
                if closure {
                    "transaction closure begins here"
                } else {
                    "transaction begun here"
                },
            ));
        }
        d.help = Some(
            "commit first (persist the intent as PROCESSING), make the remote call outside the transaction, then record the outcome; `#[staleguard::idempotent(..)]` generates this shape"
                .to_string(),
        );
        d.notes.extend(cx.chain_notes(remote));
        out.push(d);
    }
}

/// Does the transaction `tx` only read, as far as can be seen: every call run on it is a plain
/// read (no `FOR UPDATE`), made here or by a crate helper it is handed to whose summary only
/// reads, and nothing else writes to a database while it is open? A call on it that is
/// neither (an unresolved helper, a statement not understood) may write.
fn only_reads(cx: &RuleCx<'_>, tx: &crate::query::Open) -> bool {
    let Some(name) = tx.name.as_deref() else {
        return false;
    };
    let mut read = false;
    for j in tx.first_event() + 1..cx.body.events.len() as u32 {
        if !cx.state(j).txs.contains(tx) {
            continue;
        }
        if cx
            .effs(j)
            .any(|e| matches!(e.kind, EffectKind::Write | EffectKind::Claim) && !e.in_memory)
        {
            return false;
        }
        let EventKind::Call(call) = &cx.body.events[j as usize].kind else {
            continue;
        };
        let on_tx = call.recv.first().is_some_and(|r| r == name)
            || call
                .all_args()
                .flat_map(|a| &a.paths)
                .any(|p| query::first(p) == name);
        // `txn.deref_mut()`, `tx.as_mut()`: the transaction handed on, to the call it is an
        // argument of.
        let handed_on = call.recv.first().is_some_and(|r| r == name)
            && call
                .steps
                .iter()
                .all(|s| crate::apis::REBORROW_STEPS.contains(&s.name.as_str()));
        if !on_tx || handed_on {
            continue;
        }
        // A helper handed the transaction that reads with it and makes a remote call (a mail
        // filled from rows, then sent) still only reads the database.
        let direct_read = cx
            .effs(j)
            .all(|e| e.kind == EffectKind::Read && !e.locking || e.kind == EffectKind::Remote)
            && cx.effs(j).any(|e| e.kind == EffectKind::Read);
        let ends = cx
            .effs(j)
            .any(|e| matches!(e.kind, EffectKind::TxCommit | EffectKind::TxRollback));
        if !direct_read && !ends {
            return false;
        }
        read |= direct_read;
    }
    read
}
