//! `token-deleted-before-effect`: an idempotency key / one-time token deleted or consumed before
//! the side effect it guards, or checked and deleted in separate steps around the effect.

use super::RuleCx;
use crate::apis::ONE_ROW_STEPS;
use crate::diagnostic::{Applicability, Diagnostic, Edit, Suggestion};
use crate::effects::{AssignedValue, Effect, EffectKind};
use crate::facts::BodyId;
use crate::ir::EventKind;
use crate::kb::names::{is_consumption_mark, is_token_name};
use crate::name::Name;
use crate::query;
use crate::redis_calls;
use crate::sql::SqlKind;

declare_rule! {
    /// ### What it does
    ///
    /// Flags the deletion (or consumption) of an idempotency key or one-time token that happens
    /// before the side effect it guards, and the non-atomic form: the token is checked (`GET`,
    /// `EXISTS`, `SELECT`) and deleted in separate steps around the effect. And the form a
    /// transaction does not save: the token checked by a plain read (no `FOR UPDATE`), then
    /// deleted with the deletion's result ignored (no rows-affected test, no `DELETE ..
    /// RETURNING` demanding a row), and the effect made in the same transaction, after it or
    /// between the check and it (both duplicates' transactions commit the effect and the
    /// mark). A sea-orm or diesel update that sets a consumption mark (`used_at:
    /// Set(Some(now))`) is such a consumption too.
    /// A token is named so (a token, code, ticket, voucher, reset or recovery table, key or
    /// column), or is a row found by such a column (`SELECT .. FROM grants WHERE
    /// authorization_code = $1`) and later marked used by its key (`SET exchanged_at = now()`,
    /// `used = true`): that mark is the token's consumption.
    /// And the token kept in a column of another row (`users.reset_token`), found by it and
    /// then cleared by the row's key (`SET reset_token = NULL WHERE id = $1`, a sea-orm model's
    /// `reset_token = Set(None)` saved): that update matches whether or not the token is still
    /// there, so testing its result does not help; reported when an effect follows or the
    /// clearing update stores something else (the new password) itself. And the token found
    /// by the caller (a framework that calls `load_grant`, then `issue(&grant)`): the body
    /// deletes it by a field of the value handed in (`grant.code`), or deletes the token's whole
    /// row handed in (`diesel::delete(&self)` in a method of the invitation's model), on a pool
    /// or client of its own or on a connection every caller hands in outside any transaction
    /// or lock, with its result ignored and an effect on either side. And a consuming helper: the
    /// body checks the token and deletes it in a second step with the result ignored, acts on
    /// nothing itself, and returns normally to a caller in the crate that then acts
    /// (`take_login_token(token).await?` before the session is created): two concurrent calls
    /// both find the token and both callers act. And a request handler (a route, or a fn taking
    /// a web framework's extractors: `Path<String>`, `State<..>`, `Json<..>`) that checks the
    /// token, consumes it that way and then answers with something made from what the token
    /// found (a session for the user the magic link named): the answer is what the token
    /// grants, and two requests with one link both get it. A deletion on the way to an error
    /// (an expired token removed, then `Err`) is no such consumption.
    ///
    /// Tokens kept in a namespaced cache or key-value client count: `kv.get(Bucket::AuthCode,
    /// code)` then `kv.delete(Bucket::AuthCode, code)`, where the namespace names what the
    /// entries are (an authorization or device code, a login or recovery code, a nonce, the
    /// state of a WebAuthn ceremony: `Cache::Webauthn`), or the key they are found by does
    /// (`kv.get(Cache::Pow, challenge)`). So do tokens kept in
    /// process memory, in a map or cache named for what it holds (`login_codes: DashMap<..>`,
    /// `magic_tokens: Mutex<HashMap<..>>`, `otp_codes: moka::future::Cache<..>`): a `get` is
    /// the check, and a `remove` / `invalidate` / `take` the consumption. So do tokens kept in
    /// a MongoDB collection: `find_one` is the check, `delete_one` the consumption (its
    /// `deleted_count` the rows affected), and `find_one_and_delete` takes the token in one
    /// step (before the effect, that is the reverse order).
    ///
    /// ### Why is this bad?
    ///
    /// Deleted first, a failed effect can no longer be retried with the same token; checked and
    /// deleted separately, two duplicates both pass the check:
    ///
    /// ```text
    /// t0  request A: GET idem:abc -> exists
    /// t1  request B: GET idem:abc -> exists        (a retry of the same submit)
    /// t2  request A: charge the card
    /// t3  request B: charge the card               <- charged twice
    /// t4  request A: DEL idem:abc; request B: DEL idem:abc
    /// ```
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let _: () = redis.del(format!("submit:{token}")).await?;
    /// gateway.charge(&order).await?;   // fails: the token is gone, the user cannot retry
    /// ```
    ///
    /// ### Use instead
    ///
    /// Claim the key atomically (`SET key owner NX PX ttl`, `INSERT .. ON CONFLICT DO NOTHING`
    /// with the result checked, or a Lua script), run the effect, then mark the record complete
    /// (or FAILED / UNKNOWN); a duplicate in flight sees "still processing". Or annotate the
    /// handler with `#[staleguard::idempotent(..)]`, which generates that state machine.
    ///
    /// For a Redis `GET` of the token and a later `DEL` of it, the finding suggests one
    /// `GETDEL` in place of the `GET` and the `DEL` removed (`--fix` applies it when the two are
    /// plain commands on the same connection and key, the `DEL` a statement of its own that
    /// runs whenever the body goes on past the `GET`, and the value only tested for presence).
    /// That ends the race between duplicates, but the token is then consumed before the
    /// effect, which this rule reports in turn: a failed effect can no longer be retried with
    /// it, so record the outcome (or put the token back on failure) as above.
    ///
    /// ### Known problems
    ///
    /// Tokens are recognised by key, table and column names (`idem:`, `*_token`, `reset_code`,
    /// `idempotency_keys`; not a token that is an asset or text, named with it:
    /// `erc20_token_transfers`, `token_outputs`, `cashu_escrow_token`, `token_deltas`) and
    /// the configuration's `knowledge.token-checks` /
    /// `knowledge.token-deletes`; a token stored under an unrelated name is not seen, nor one
    /// kept in a cache under a key built by a function (`cache.get(key_for(code))`). A token
    /// the caller found is judged only when its key is a field of a value handed in: with a
    /// bare id parameter nothing says the caller looked it up, and with a transaction or a
    /// connection handed in the caller may hold the row locked. A store method that finds a
    /// token and deletes it in a second step is judged by what its callers do with the answer,
    /// looking through up to two callers that only hand the answer on (a storage facade); a
    /// store behind a trait object implemented in another crate is not seen. A token deleted on
    /// a path that answers an error or nothing (`Ok(None)` after cleaning up an expired code)
    /// consumes nothing for the caller. An SQLite store (its struct's fields, its parameters
    /// name only SQLite) runs its transactions serializably, even in a package that has a
    /// PostgreSQL store too. An OAuth authorization or
    /// device code consumed before the tokens are issued is not reported as consumed too early:
    /// the protocol makes it single-use, and a failed exchange starts over with a new code. The
    /// state and PKCE verifier an OAuth client keeps for one login (`oauth_states`) are not
    /// taken for tokens at all: a failed exchange starts the login over, and the provider
    /// refuses a second exchange of its single-use code. A `DELETE`
    /// filtered on columns that hold a unique key the schema files declare for the table
    /// (`WHERE did = $1 AND purpose = $2` under `PRIMARY KEY (purpose, did)`) consumes that
    /// row whatever the columns are called. Under `#[staleguard::idempotent(key = ..)]` only deletions of
    /// that key are covered by the macro's claim; another one-time token deleted in the body is
    /// still checked. A call of a crate fn that runs its own effect (or is `#[idempotent]`)
    /// deletes nothing at the call site: its order is checked in the callee. A `DELETE` with no
    /// `WHERE` (a table wipe) or filtered on no key (an expiry purge) is housekeeping.
    pub(crate) static RULE = {
        name: "token-deleted-before-effect",
        level: Error,
        summary: "idempotency token deleted before the effect, or checked and deleted in separate steps",
        applies: applies,
        check: check,
    };
}

/// A deletion or consumption of a token: `DEL`, `GETDEL`, `DELETE`, or an `UPDATE` of the token
/// row (`SET used_at = now()`); a claim followed by a completion or a release is told apart
/// later by the write that follows it.
fn is_delete(e: &Effect) -> bool {
    !e.purge
        && e.token
        && e.kind == EffectKind::Write
        && (e.delete || e.sql == Some(SqlKind::Update) || e.clears_token() || orm_marks_used(e))
}

/// An ORM's update of a row (no SQL text: a sea-orm active model, a diesel changeset) that sets
/// a consumption mark (`used_at: Set(Some(now))`).
fn orm_marks_used(e: &Effect) -> bool {
    e.sql.is_none()
        && !e.insert
        && !e.upsert
        && e.sets
            .iter()
            .any(|a| is_consumption_mark(&a.column, a.value.constant()))
}

/// A token cleared from its row by the row's key (`UPDATE users SET reset_token = NULL WHERE id
/// = $1`): the update matches whether or not the token is still there, so its rows affected
/// say nothing about who consumed it.
fn cleared_by_key(del: &Effect) -> bool {
    del.clears_token() && !del.where_cols.iter().any(|c| is_token_name(c))
}

/// The consumption is the effect too: the clearing update also stores a value that is not a
/// token mark (`SET password_hash = $1, reset_token = NULL`).
fn carries_effect(del: &Effect) -> bool {
    del.clears_token()
        && del.sets.iter().any(|a| {
            !is_token_name(&a.column)
                && !matches!(a.value, AssignedValue::Const(_) | AssignedValue::Now)
        })
}

/// A side effect the token guards at event `i`: a remote call, or a write that is not to the
/// token itself (a completion mark or the claim's release). With `rolled_back_with: Some(d)`, a
/// database write in the same transaction as the deletion at `d` rolls back with it, so it is
/// not an effect that outlives a failure; with `None` it counts (two duplicates both make it).
fn effect_at<'a>(
    cx: &'a RuleCx<'_>,
    i: u32,
    token: &Effect,
    rolled_back_with: Option<u32>,
) -> Option<&'a Effect> {
    if cx.detached(i) {
        return None;
    }
    let same_tx = |a: u32, b: u32| {
        let ta = &cx.state(a).txs;
        let tb = &cx.state(b).txs;
        ta.last().is_some_and(|t| tb.contains(t))
    };
    cx.effs(i).find(|e| match e.kind {
        EffectKind::Remote => true,
        // Deleting other tokens (a cleanup cascade) is not an effect a token guards.
        EffectKind::Write if e.token && e.delete => false,
        EffectKind::Write => {
            let mark = e.token && query::same_state(e.table.as_deref(), token.table.as_deref());
            !(mark || rolled_back_with.is_some_and(|t| same_tx(t, i)))
        }
        _ => false,
    })
}

/// A token deleted or consumed, a token row found that may be marked used later, or a row
/// marked used.
fn applies(cx: &RuleCx<'_>) -> bool {
    cx.kinds().has(EffectKind::Write)
        && cx.effects().any_order().any(|e| {
            is_delete(e)
                || e.token && e.kind == EffectKind::Read
                || e.kind == EffectKind::Write
                    && e.sets
                        .iter()
                        .any(|a| is_consumption_mark(&a.column, a.value.constant()))
        })
}

/// The write at `d` marks used a token row this body found by its token: an update of the
/// table an earlier token read looked the row up in (`SELECT .. FROM grants WHERE
/// authorization_code = $1`), keyed by what that read returned, that sets a consumption mark
/// (`exchanged_at`, `used_at`, `redeemed = true`). The table's name need not say token: the
/// column it was found by does, or the read itself picked a row not yet marked (`WHERE code =
/// $1 AND redeemed_at IS NULL`: a row used once, whatever it is called). That write, taken as
/// the token's consumption.
fn marks_found_token_used(cx: &RuleCx<'_>, d: u32) -> Option<Effect> {
    let w = cx.effs(d).find(|e| {
        e.kind == EffectKind::Write
            && !e.token
            && !e.in_memory
            && e.sql == Some(crate::sql::SqlKind::Update)
            && e.table.is_some()
            && e.sets
                .iter()
                .any(|a| is_consumption_mark(&a.column, a.value.constant()))
    })?;
    let found = (0..d).any(|r| {
        !cx.detached(r)
            && cx.effs(r).any(|e| {
                e.kind == EffectKind::Read
                    && !e.in_memory
                    && e.table == w.table
                    && (e.token || picks_unmarked(e, w))
            })
            && query::depends_on(cx.body, d, r)
    });
    found.then(|| {
        let mut e = w.clone();
        e.token = true;
        e
    })
}

/// Is `read` a check of the token `del` consumes: a read of its table that finds a token, or
/// picks rows not yet marked as `del` marks them?
fn checks_token(read: &Effect, del: &Effect) -> bool {
    read.kind == EffectKind::Read
        && (read.token || picks_unmarked(read, del))
        && query::same_state(read.table.as_deref(), del.table.as_deref())
}

/// Does the read pick rows by the consumption mark that `mark` sets (`.. AND redeemed_at IS
/// NULL`, then `SET redeemed_at = now()`)? Then the row is used once, and the read is its check.
fn picks_unmarked(read: &Effect, mark: &Effect) -> bool {
    read.where_cols.iter().any(|c| {
        mark.sets
            .iter()
            .any(|a| a.column == *c && is_consumption_mark(c, a.value.constant()))
    })
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    let n = cx.body.events.len() as u32;
    let key_places = idempotent_key_places(cx);
    let claims: Vec<u32> = (0..n).filter(|&i| cx.has(i, EffectKind::Claim)).collect();
    for d in 0..n {
        if cx.detached(d) {
            continue;
        }
        let marked;
        let del = match cx
            .effs(d)
            .find(|e| is_delete(e) && !callee_owns(cx, e) && !login_state(e))
        {
            Some(del) => del,
            None => match marks_found_token_used(cx, d) {
                Some(e) if !callee_owns(cx, &e) => {
                    marked = e;
                    &marked
                }
                _ => continue,
            },
        };
        if covered_by_attribute(cx, d, key_places.as_ref()) {
            continue;
        }
        if claims.iter().any(|&c| c < d) {
            continue;
        }
        // The token is put back (or marked) later on the deletion's path, by this body: a failed
        // effect stays retryable. A write of the token's table on another path (the branch that
        // found the token not yet usable saves it back) puts nothing back, nor does a callee that
        // writes the table somewhere inside (a dispatcher one of whose arms issues new tokens).
        let end = cx.reach_end(d);
        let elsewhere = cx.alternatives_of(d);
        let restored = del.table.is_some()
            && (d + 1..end).any(|w| {
                !elsewhere.iter().any(|&(a, b)| (a..=b).contains(&w))
                    && cx.effs(w).any(|e| {
                        e.kind == EffectKind::Write
                            && e.via.is_none()
                            && !e.delete
                            && e.table.is_some()
                            && e.table == del.table
                    })
            });
        if restored {
            continue;
        }
        // Deleted before the effect it guards: the deletion is the claim (its result is tested or
        // used, or the token was checked before), and an effect follows on the same path.
        if guards(cx, d, del)
            && !single_use_grant(del)
            && let Some((e, eff)) = (d + 1..end)
                .filter(|e| !elsewhere.iter().any(|&(a, b)| (a..=b).contains(e)))
                .find_map(|e| effect_at(cx, e, del, Some(d)).map(|x| (e, x)))
        {
            let mut diag = cx.diag(
                &RULE,
                d,
                "token deleted before the effect it guards".to_string(),
            );
            diag.primary_label = Some(format!("{} before the effect", del.what));
            diag.labels
                .push(cx.label(e, format!("the effect runs here ({})", eff.what)));
            diag.help = Some(help());
            diag.notes.push(
                "if the effect fails the token is gone and the request cannot be retried"
                    .to_string(),
            );
            diag.notes.extend(cx.chain_notes(eff));
            out.push(diag);
            continue;
        }
        // Checked and deleted in separate steps around the effect.
        let checked = (0..d)
            .rev()
            .find(|&c| !cx.detached(c) && cx.effs(c).any(|e| checks_token(e, del)));
        // The effect on a path that goes on to the deletion (not in a branch that returns
        // first: `if accept { return accept(..) } decline(..)`).
        if let Some(c) = checked
            && let Some((e, eff)) = (c + 1..d)
                .filter(|&e| cx.reach_end(e) > d)
                .find_map(|e| effect_at(cx, e, del, Some(d)).map(|x| (e, x)))
        {
            let mut diag = cx.diag(
                &RULE,
                d,
                "token checked and deleted in separate steps around the effect".to_string(),
            );
            diag.primary_label = Some("deleted here, after the effect".to_string());
            diag.labels.push(cx.label(c, "token checked here"));
            diag.labels
                .push(cx.label(e, format!("the effect runs here ({})", eff.what)));
            diag.help = Some(help());
            diag.notes.push(
                "two duplicates can both pass the check before either deletes the token"
                    .to_string(),
            );
            diag.notes.extend(cx.chain_notes(eff));
            diag.suggestions.extend(getdel(cx, c, d));
            out.push(diag);
            continue;
        }
        // A check by a plain read whose result is tested (no row lock, no serializable
        // transaction over the check and the deletion): duplicates can both pass it.
        let plain_check = checked.filter(|&c| {
            !query::tests_of(cx.body, c).is_empty()
                && !cx.effs(c).any(|e| e.locking)
                && !cx.serializable_together(c, d)
        });
        // Checked, then consumed by a deletion whose result nobody looks at, and the effect
        // follows in the deletion's own transaction: both duplicates pass the check, the second
        // deletion removes nothing, and neither notices.
        // (The effect may also come between the check and the deletion, in the deletion's own
        // transaction: both duplicates' transactions commit it.)
        if let Some(c) = plain_check
            && (!result_checked(cx, d) || cleared_by_key(del))
            && let Some((e, eff)) = carries_effect(del).then_some((d, del)).or_else(|| {
                (c + 1..end)
                    .filter(|&e| e != d)
                    .find_map(|e| effect_at(cx, e, del, None).map(|x| (e, x)))
            })
        {
            let by_key = cleared_by_key(del);
            let mut diag = cx.diag(
                &RULE,
                d,
                if by_key {
                    "token checked, then cleared by the row's key, whether or not it is still there"
                } else {
                    "token checked, then deleted without testing that the deletion removed it"
                }
                .to_string(),
            );
            diag.primary_label = Some(if by_key {
                format!("{}; its filter does not hold the token", del.what)
            } else {
                format!("{}; its result is not tested", del.what)
            });
            diag.labels.push(cx.label(c, "token checked here"));
            if e == d {
                diag.notes.push(format!(
                    "the clearing update is the effect too ({})",
                    eff.what
                ));
            } else {
                diag.labels
                    .push(cx.label(e, format!("the effect runs here ({})", eff.what)));
            }
            diag.help = Some(if by_key {
                "clear the token only where it is still the one presented (`.. WHERE id = $1 AND reset_token = $2`) and stop when no row matched, or lock the row (`FOR UPDATE`) when reading it".to_string()
            } else {
                "make the deletion the check: test its rows affected (or `DELETE .. RETURNING` one row) and stop when it removed nothing, or lock the token row (`FOR UPDATE`) when reading it".to_string()
            });
            diag.notes.push(if by_key {
                "two requests with the same token both pass the check, and both updates match the row".to_string()
            } else {
                "two duplicates can both pass the check; the second deletion removes nothing and the effect runs twice".to_string()
            });
            diag.notes.extend(cx.chain_notes(eff));
            out.push(diag);
            continue;
        }
        // Found by the caller (the token's key is a field of a value handed in, or the deletion
        // takes the token's whole row handed in: what the caller loaded), consumed here by a
        // deletion nobody tests, on a connection this body takes itself or one its callers
        // hand in holding no transaction or lock (so nothing the caller read under covers
        // it), with an effect on either side: two requests that both passed the caller's check
        // both make the effect, and the second deletion removes nothing.
        if checked.is_none()
            && del.delete
            && !result_checked(cx, d)
            && by_own_key(del)
            && let Some(param) = key_parameter(cx, d).or_else(|| handed_row(cx, d, del))
            && (cx.own_connection() || cx.called_outside_transactions())
            && let Some((e, eff)) = (0..end)
                .filter(|&e| e != d)
                .find_map(|e| effect_at(cx, e, del, None).map(|x| (e, x)))
        {
            let mut diag = cx.diag(
                &RULE,
                d,
                "token found by the caller, then deleted here without testing that the deletion removed it".to_string(),
            );
            diag.primary_label = Some(format!("{}; its result is not tested", del.what));
            diag.labels
                .push(cx.label(e, format!("the effect runs here ({})", eff.what)));
            diag.notes.push(format!(
                "the token comes in as `{param}`: whoever checked it did so before this deletion, with no lock that reaches it"
            ));
            diag.notes.push(
                "two requests that both passed that check both make the effect; the second deletion removes nothing".to_string(),
            );
            diag.help = Some("make the deletion the check: test its rows affected (or `DELETE .. RETURNING` one row) and stop before the effect when it removed nothing".to_string());
            diag.notes.extend(cx.chain_notes(eff));
            out.push(diag);
            continue;
        }
        // Checked and deleted here in two steps, with nothing acting after it in this body: a
        // consuming helper (`check_prevent_reuse(challenge).await?`) whose callers act on its
        // `Ok`. Two concurrent calls both find the token, both delete it, and both return `Ok`.
        if let Some(c) = plain_check
            && del.delete
            && !result_checked(cx, d)
            && !(d + 1..end).any(|e| effect_at(cx, e, del, None).is_some())
            && !in_failing_branch(cx, d)
            && let Some(acting) = caller_acts(cx, del)
        {
            let mut diag = cx.diag(
                &RULE,
                d,
                "token checked, then deleted in a second step; the caller acts on the answer"
                    .to_string(),
            );
            diag.primary_label = Some(format!("{}; its result is not tested", del.what));
            diag.labels.push(cx.label(c, "token checked here"));
            let at = cx.krate.body(acting.caller);
            let through = acting
                .through
                .iter()
                .map(|&b| format!("`{}`", cx.krate.body(b).name()))
                .collect::<Vec<_>>()
                .join(", ");
            diag.notes.push(format!(
                "`{}` calls this{} at {} and then acts ({} at line {})",
                at.name(),
                if through.is_empty() {
                    String::new()
                } else {
                    format!(" through {through}")
                },
                cx.krate.site(acting.caller, acting.site),
                acting.effect.1,
                at.events[acting.effect.0 as usize].sp.line,
            ));
            diag.notes.push(
                "two concurrent calls both find the token and both delete it, and both callers act"
                    .to_string(),
            );
            diag.help = Some(help());
            out.push(diag);
            continue;
        }
        // Checked and consumed in two steps by a request handler (a route, or a fn taking a web
        // framework's extractors) that then answers: the answer is what the token grants (a
        // session, a password set), so two requests with one link both get it.
        if let Some(c) = plain_check
            && (!result_checked(cx, d) || cleared_by_key(del))
            && !(d + 1..end).any(|e| effect_at(cx, e, del, None).is_some())
            && !in_failing_branch(cx, d)
            && answers_requests(cx)
            && uses_found_after(cx, c, d, end)
        {
            let by_key = cleared_by_key(del);
            let mut diag = cx.diag(
                &RULE,
                d,
                "token checked, then consumed in a second step; the handler answers with what it grants".to_string(),
            );
            diag.primary_label = Some(if by_key {
                format!("{}; its filter does not hold the token", del.what)
            } else {
                format!("{}; its result is not tested", del.what)
            });
            diag.labels.push(cx.label(c, "token checked here"));
            diag.notes.push(
                "two requests with the same token both pass the check and both get the answer; the second consumption changes nothing".to_string(),
            );
            diag.help = Some(help());
            out.push(diag);
        }
    }
}

/// Is what the check found used after the consumption at `d` (`user.generate_jwt(..)` on the
/// user the link was found on)? Then the answer is made from it; a handler that only deletes
/// one of its own tokens and says `Ok(())` grants nothing.
fn uses_found_after(cx: &RuleCx<'_>, c: u32, d: u32, end: u32) -> bool {
    let found = query::derived_before(cx.body, c, end);
    (d + 1..end).any(|i| match &cx.body.events[i as usize].kind {
        EventKind::Call(call) => call
            .recv
            .first()
            .into_iter()
            .chain(call.all_args().flat_map(|a| a.paths.iter()))
            .any(|p| found.contains(query::first(p))),
        _ => false,
    })
}

/// Does this body answer requests: a route attribute puts it at a path, or it takes a web
/// framework's extractors (`Path<String>`, `State<AppContext>`, `Json<Body>`, actix's
/// `HttpRequest`), written bare (a prelude's) or through the framework's path, and not a type of
/// the crate's own of that name?
fn answers_requests(cx: &RuleCx<'_>) -> bool {
    const EXTRACTORS: &[&str] = &[
        "Path",
        "Query",
        "Json",
        "Form",
        "State",
        "Extension",
        "TypedHeader",
        "HttpRequest",
        "Multipart",
        "CookieJar",
        "ConnectInfo",
    ];
    const WEB_CRATES: &[&str] = &[
        "axum",
        "actix_web",
        "rocket",
        "poem",
        "salvo",
        "loco_rs",
        "warp",
        "tide",
    ];
    let facts = &cx.krate.facts;
    cx.body.routed
        || cx.body.params.iter().any(|(_, ty)| {
            ty.first().is_some_and(|head| {
                let head = head.trim_start_matches('&').trim_start_matches("mut ");
                let name = head.rsplit("::").next().unwrap_or(head);
                let full = facts.resolve(cx.id.file, head);
                EXTRACTORS.contains(&name)
                    && !facts.structs.contains_key(name)
                    && (!full.contains("::")
                        || WEB_CRATES.contains(&full.split("::").next().unwrap_or("")))
            })
        })
}

/// Is event `i` inside a branch that ends in a failure (an expired token deleted, then `return
/// Err(..)`) or answers nothing (`return Ok(None)`): the caller gets no grant to act on.
fn in_failing_branch(cx: &RuleCx<'_>, i: u32) -> bool {
    let mut depth = 0u32;
    for j in (0..i).rev() {
        match &cx.body.events[j as usize].kind {
            EventKind::Leave => depth += 1,
            EventKind::Enter(r) => {
                if depth == 0 {
                    if matches!(
                        r,
                        crate::ir::Region::Branch { fails: true, .. }
                            | crate::ir::Region::Branch { nothing: true, .. }
                    ) {
                        return true;
                    }
                } else {
                    depth -= 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// A caller of this body in the crate that, after the call, makes an effect the token guards
/// on the same path: the caller, the call's event, and the effect (its event and description).
/// A caller that only hands the answer on (`self.codes.consume_code(code).await`, a storage
/// facade delegating to one of its stores: no call after it) is looked through, up to two
/// such steps: its own callers act on the answer.
fn caller_acts(cx: &RuleCx<'_>, del: &Effect) -> Option<ActingCaller> {
    let mut seen = vec![cx.id];
    acting_caller(cx, cx.id, del, 0, &mut seen)
}

/// A caller that acts on a consuming helper's answer: the caller, its call's event, the effect
/// (its event and description), and the callers in between that only hand the answer on
/// (innermost first).
struct ActingCaller {
    caller: BodyId,
    site: u32,
    effect: (u32, String),
    through: Vec<BodyId>,
}

fn acting_caller(
    cx: &RuleCx<'_>,
    id: BodyId,
    del: &Effect,
    depth: u32,
    seen: &mut Vec<BodyId>,
) -> Option<ActingCaller> {
    for &(caller, site) in cx.krate.call_sites(id) {
        let ccx = RuleCx::new(cx.krate, caller);
        let end = ccx.reach_end(site);
        if let Some(effect) = (site + 1..end)
            .find_map(|e| effect_at(&ccx, e, del, None).map(|x| (e, x.what.to_string())))
        {
            return Some(ActingCaller {
                caller,
                site,
                effect,
                through: Vec::new(),
            });
        }
        // It hands the answer on: no call after it, and its value not thrown away (`let _ =`).
        let discarded = ccx.body.events.iter().any(|e| {
            matches!(&e.kind, EventKind::Bind(b) if b.names.is_empty() && b.calls.contains(&site))
        });
        let hands_on = !discarded
            && !(site + 1..end)
                .any(|i| matches!(ccx.body.events[i as usize].kind, EventKind::Call(_)));
        if hands_on && depth < 2 && !seen.contains(&caller) {
            seen.push(caller);
            if let Some(mut found) = acting_caller(cx, caller, del, depth + 1, seen) {
                found.through.insert(0, caller);
                return Some(found);
            }
        }
    }
    None
}

/// A deletion of one token by the token's own key (its id, its code, or a key the ORM finds
/// it by), not of every token of a user (`WHERE user_id = $1`, a sweep after a password
/// change).
fn by_own_key(del: &Effect) -> bool {
    del.where_cols.iter().all(|c| {
        matches!(c.as_str(), "id" | "uuid" | "pk" | "key" | "token" | "code")
            || is_token_name(c)
            || crate::kb::names::is_own_key(c, del.table.as_deref())
    })
}

/// The places the deletion at `d` binds or finds by (its receiver too), not the executor a
/// statement runs on (`.execute(db)`).
fn deletion_places<'b>(cx: &'b RuleCx<'_>, d: u32) -> impl Iterator<Item = &'b Name> {
    let call = match &cx.body.events[d as usize].kind {
        EventKind::Call(c) => Some(&**c),
        _ => None,
    };
    call.into_iter().flat_map(|c| {
        c.steps
            .iter()
            .filter(|s| !crate::apis::EXEC_STEPS.contains(&s.name.as_str()))
            .flat_map(|s| s.args.iter())
            .flat_map(|a| a.paths.iter())
            .chain(c.recv.first())
    })
}

/// The field of a parameter the deletion at `d` takes the token's key from
/// (`authorization.code`): a value the caller found and handed in. A bare id parameter says
/// nothing of who looked the token up.
fn key_parameter(cx: &RuleCx<'_>, d: u32) -> Option<Name> {
    let params = &cx.body.params;
    deletion_places(cx, d)
        .find(|p| {
            let root = query::first(p);
            root != "self" && p.contains('.') && params.iter().any(|(n, _)| n.as_str() == root)
        })
        .cloned()
}

/// The parameter (or `self`) the deletion at `d` takes whole when it is a row of the token's
/// table (`diesel::delete(&self)` in a method of the token's model, `invite.delete(db)`): the
/// row a caller found and handed in.
fn handed_row(cx: &RuleCx<'_>, d: u32, del: &Effect) -> Option<Name> {
    let table = del.table.as_deref()?;
    let row_of = |ty: &str| {
        let ty = ty.rsplit("::").next().unwrap_or(ty);
        let mapped = crate::kb::db::row_table(cx.krate.facts, ty);
        query::same_table_prefixed(Some(&mapped), Some(table))
    };
    deletion_places(cx, d)
        .find(|p| {
            if p.as_str() == "self" {
                return cx.body.self_ty.as_deref().is_some_and(row_of);
            }
            cx.body
                .params
                .iter()
                .any(|(n, ty)| n == *p && ty.last().is_some_and(|t| row_of(t)))
        })
        .cloned()
}

/// The fix of a Redis `GET` of the token and a later `DEL` of it: the `GET` becomes a
/// `GETDEL` (`get_del`) and the `DEL` statement goes. Offered when both are plain commands on
/// the same connection and key and the `DEL` is a statement whose value nothing uses.
/// Machine-applicable when nothing can tell the difference but a duplicate: the `DEL` runs
/// whenever the body goes on past the `GET` (not in a branch of its own), nothing between
/// them touches the key or rebinds it, and the `GET`'s value is only tested for presence (a
/// comparison, `owner != Some(me)`, would let a caller that fails it delete the token).
fn getdel(cx: &RuleCx<'_>, c: u32, d: u32) -> Option<Suggestion> {
    let get = redis_calls::command_at(cx, c)?;
    let del = redis_calls::command_at(cx, d)?;
    if get.name != "GET"
        || del.name != "DEL"
        || !get.args.is_empty()
        || !del.args.is_empty()
        || !get.same_target(&del)
    {
        return None;
    }
    let removed = cx.fix_anchors().discards.iter().find(|x| x.call == d)?;
    let certain = query::same_block(cx.body, c, d)
        && get.untouched_between(cx, c, d)
        && presence_only(cx, c, d);
    Some(Suggestion {
        message: "read and delete the token in one step with `GETDEL`, and drop the later `DEL` (a failed effect then no longer leaves the token for a retry)".to_string(),
        applicability: if certain {
            Applicability::MachineApplicable
        } else {
            Applicability::MaybeIncorrect
        },
        edits: vec![
            get.rename(cx, "get_del", "GETDEL"),
            Edit {
                span: cx.span(removed.sp),
                replacement: String::new(),
            },
        ],
    })
}

/// Is the value read at `c` only tested for presence before `d` (`is_none()`, `let Some(..)
/// = .. else`), never compared with another value or mixed into one?
fn presence_only(cx: &RuleCx<'_>, c: u32, d: u32) -> bool {
    let derived = query::derived(cx.body, c);
    let ours = |p: &Name| derived.contains(query::first(p));
    let presence = |v: &Name| matches!(v.as_str(), "Some" | "None");
    cx.body.events[c as usize + 1..d as usize]
        .iter()
        .all(|ev| match &ev.kind {
            EventKind::Cond(t) if t.deps.iter().any(ours) => {
                t.deps.iter().all(ours)
                    && t.values.iter().all(presence)
                    && t.pats.iter().flatten().all(presence)
            }
            EventKind::Bind(b) if b.deps.iter().any(ours) => b.deps.iter().all(ours),
            _ => true,
        })
}

/// An OAuth authorization or device code: the protocol makes it single-use whatever happens
/// next (RFC 6749 4.1.2: a code used twice must be refused), and a failed exchange restarts the
/// flow with a new code, so consuming it before the tokens are issued loses nothing a retry
/// could use. Checked and consumed in separate steps, it is still reported.
fn single_use_grant(del: &Effect) -> bool {
    del.table.as_deref().is_some_and(|t| {
        let w: Vec<String> = crate::kb::names::words(t).collect();
        w.windows(2).any(|p| {
            matches!(
                p[0].as_str(),
                "auth" | "oauth" | "oauth2" | "oidc" | "authorization" | "authorisation" | "device"
            ) && p[1].trim_end_matches('s') == "code"
        })
    })
}

/// The state of one OAuth login kept by its client (`oauth_states`: the CSRF `state`, the PKCE
/// verifier): it only ties the provider's redirect to the login that asked for it. Consumed
/// before the code exchange, a failed exchange starts the login over with a new state; used by
/// two callbacks at once, the provider refuses the second exchange of its single-use code.
fn login_state(del: &Effect) -> bool {
    del.table.as_deref().is_some_and(|t| {
        let w: Vec<String> = crate::kb::names::words(t).collect();
        w.iter().any(|x| x == "pkce")
            || w.iter()
                .any(|x| matches!(x.as_str(), "oauth" | "oauth2" | "oidc" | "openid" | "sso"))
                && w.iter()
                    .any(|x| matches!(x.trim_end_matches('s'), "state" | "verifier"))
    })
}

/// A deletion that reaches this body through a call of a crate fn that runs its own effect
/// (a remote call or a write other than to tokens) or is itself `#[idempotent]`: the callee
/// orders its deletion against its effect, and that order is checked in the callee. Calling (or
/// retrying) such a fn deletes nothing before anything here.
fn callee_owns(cx: &RuleCx<'_>, del: &Effect) -> bool {
    let Some(c) = del.via else {
        return false;
    };
    if cx.krate.body(c).idempotent {
        return true;
    }
    cx.krate.summary(c).is_some_and(|s| {
        s.effects.iter().any(|e| match e.effect.kind {
            EffectKind::Remote => true,
            // A write of the token's own table is its consumption, not the callee's own effect
            // (a row found by its code and marked used: see `marks_found_token_used`).
            EffectKind::Write => !(e.effect.token || e.effect.table == del.table),
            _ => false,
        })
    })
}

/// Under `#[staleguard::idempotent(key = ..)]`: the attribute's key and the locals derived from
/// it. `None` when the body has no such attribute; an empty set when the key is not a place.
fn idempotent_key_places(cx: &RuleCx<'_>) -> Option<Vec<Name>> {
    if !cx.body.idempotent {
        return None;
    }
    let Some(key) = cx.body.idempotent_key.as_deref() else {
        return Some(Vec::new());
    };
    let mut places = vec![Name::new(key)];
    for ev in &cx.body.events {
        if let EventKind::Bind(b) = &ev.kind
            && b.deps
                .iter()
                .any(|d| places.iter().any(|p| query::same_state(Some(d), Some(p))))
        {
            places.extend(b.names.iter().filter(|n| n.as_str() != "_").cloned());
        }
    }
    Some(places)
}

/// The attribute's claim covers the token it is keyed on (the macro claims it atomically before
/// the body and records the outcome), not another one-time token the body deletes. Without a
/// place for the key (a header extractor, an expression), every deletion in the body is taken as
/// covered.
fn covered_by_attribute(cx: &RuleCx<'_>, d: u32, key_places: Option<&Vec<Name>>) -> bool {
    let Some(places) = key_places else {
        return false;
    };
    if cx.body.idempotent_key.is_none() {
        return true;
    }
    let EventKind::Call(c) = &cx.body.events[d as usize].kind else {
        return true;
    };
    c.all_args()
        .flat_map(|a| a.paths.iter())
        .any(|p| places.iter().any(|k| query::same_state(Some(p), Some(k))))
}

/// Does the deletion at `d` stand guard over what follows? Its result is tested, returned rows
/// are used, the token was checked before, or configuration says it is a token delete. A bare
/// `DELETE FROM sessions ..` on logout guards nothing.
fn guards(cx: &RuleCx<'_>, d: u32, del: &Effect) -> bool {
    let elsewhere = cx.alternatives_of(d);
    del.configured
        || result_checked(cx, d)
        || (0..d)
            .filter(|c| !elsewhere.iter().any(|&(a, b)| (a..=b).contains(c)))
            .any(|c| cx.effs(c).any(|e| checks_token(e, del)))
}

/// Is the result of the deletion at `d` looked at: tested, one row demanded of it (`DELETE ..
/// RETURNING` with `fetch_one`), or its value used by a later call?
fn result_checked(cx: &RuleCx<'_>, d: u32) -> bool {
    if !query::tests_of(cx.body, d).is_empty() {
        return true;
    }
    if let EventKind::Call(c) = &cx.body.events[d as usize].kind {
        if c.steps
            .iter()
            .any(|s| ONE_ROW_STEPS.contains(&s.name.as_str()))
        {
            return true;
        }
        // `.execute(..)` yields a count: only a test of it looks at the deletion (a value
        // built around the call, a try-block's result, carries nothing of the token).
        if c.steps.last().is_some_and(|s| s.name == "execute") {
            return false;
        }
    }
    let derived = query::derived(cx.body, d);
    cx.body.events[d as usize + 1..]
        .iter()
        .any(|e| match &e.kind {
            EventKind::Call(c) => c
                .all_args()
                .any(|a| a.paths.iter().any(|p| derived.contains(query::first(p)))),
            _ => false,
        })
}

fn help() -> String {
    "claim the token atomically (`SET .. NX`, `INSERT .. ON CONFLICT DO NOTHING` with the result checked, or a Lua script), run the effect, then mark it complete; `#[staleguard::idempotent(..)]` generates this shape".to_string()
}
