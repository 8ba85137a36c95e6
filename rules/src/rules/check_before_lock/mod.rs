//! `check-before-lock`: state read and tested before the lock / transaction / row lock, then
//! written under it without a re-read (TOCTOU). Six shapes, one file each: a read before the
//! lock or transaction (`under_lock.rs`), a plain `SELECT` inside the transaction then an
//! unguarded `UPDATE` of the same row (`in_transaction.rs`), the read-modify-write with no
//! lock at all (`without_lock.rs`), the lookup then insert with no unique key in the schema
//! (`check_then_insert.rs`), the key-value check then set (`check_then_set.rs`), and the count
//! checked against a limit then a row inserted or deleted (`count_then_write.rs`). This file
//! holds the declaration, the writes each shape
//! judges, and what the shapes share: does a check look at the read, and does it decide the
//! write.

pub(super) mod check_then_insert;
mod check_then_set;
mod count_then_write;
mod in_transaction;
mod lock_ended;
mod under_lock;
mod without_lock;

use super::RuleCx;
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::facts::BodyId;
use crate::ir::{EventKind, Region};
use crate::name::Name;
use crate::query;

declare_rule! {
    /// ### What it does
    ///
    /// Flags a write done under a lock, a transaction or a row lock when the state that decided
    /// the write was read and tested *before* the lock was taken and is not read again under it.
    /// Also flags a plain `SELECT` inside a transaction, a test of a value it read, then an
    /// `UPDATE` of the same row that neither locks the row (`FOR UPDATE`) nor guards itself
    /// (`WHERE status = ..` with the rows affected checked, in a test or by a fallible helper
    /// handed the result: `ensure_affected_rows(&res, 1)?`). A test that only asks whether rows
    /// were found (`found.is_some()`, `ids.is_empty()`) is not such a test, unless the lookup
    /// selects by a state column (then what it finds is the state) or the row had to exist
    /// (`fetch_one`: the `Option` is a nullable column's). A write to a row the transaction
    /// itself inserted is not reported: no other transaction sees it before the commit. And the
    /// shape before any lock was added: one row read with no lock and no transaction, a value of
    /// it tested (not only whether the row is there), and the row written back by key with a
    /// value computed from the read (a lost update), or the row's state moved by its key alone
    /// after a test of that state (`if payment.status != "settled" { return }`, then `UPDATE
    /// payments SET status = 'refunded' WHERE id = $1`: a dispute written in between is
    /// overwritten) — also when the model read is saved back whole through the
    /// crate's own upsert (`share.save(db)` running `INSERT .. ON CONFLICT (id) DO UPDATE`) after
    /// the tested field was changed, or when the tested field is a counter another statement of
    /// the crate moves by increments (`SET downloads = downloads + 1`, diesel's
    /// `downloads.eq(downloads + 1)`): the save writes the old count over them. So is a quantity
    /// tested against a bound and then moved by its own value with no bound in the write's
    /// filter (`if balance < amount { return }`, then `SET balance = balance - $1 WHERE id =
    /// $2`, a MongoDB `$inc`): the change is atomic, the test is stale, and two withdrawals
    /// both take what only one could. So is an upsert whose conflict branch stores what was
    /// read (`INSERT .. ON CONFLICT (org_id) DO UPDATE SET used = excluded.used`, the value read
    /// plus one), with or without a transaction around the two. MongoDB collections count as tables here (`find_one`,
    /// `update_one` with its filter and `$set` documents). A sea-orm active model made from the row writes only the
    /// fields set on it, and a value fetched afresh with the row's key (an awaited lookup, a
    /// provider's answer) is not one computed from the read. And the
    /// check-then-insert: a lookup of a table by some columns, a test of what it found, then an
    /// insert of a row with those columns, with no lock over the two, when the project's schema
    /// files (`.sql` migrations, `schema.sql`) declare that table with no unique key within
    /// those columns: two requests both find nothing and both insert (a lookup that orders what
    /// it finds, `ORDER BY sent_at DESC LIMIT 1`, reads the newest of several rows the table
    /// holds by design, and is no such test). And the check-then-set of
    /// a key-value entry (a cooldown, a rate limit, an "already sent" marker: Redis `GET` then
    /// `SET` without `NX`, a namespaced cache's `get` then `put`): the entry is tested (the
    /// flow stops, or the set sits in a branch the test opens), and the same entry — both calls
    /// pass the same key value — is set in a second step while the work it gates runs on the
    /// same path; also a row of a table kept as such an entry (looked up by a key the function
    /// made, found absent, then upserted by that key: the upsert overwrites where an insert
    /// would refuse). A cache filled on a miss with what a lookup after the miss returned is not
    /// reported, in a key-value store or in memory (`map.insert(k, v)`, an LRU's `put(k, v)`). And the limit check: the rows of a table counted (`SELECT count(*)`, `.count(db)`,
    /// a total of a column over them, `SELECT SUM(amount)`, a Redis `LLEN` / `SCARD` / `ZCARD`
    /// of a collection that `LPUSH` / `SADD` / `ZADD` then add to, or a list read whose length
    /// is compared), the count compared with a bound (`taken >=
    /// seats`, `owners.len() <= 1`), then a row inserted into or deleted from that table with
    /// nothing held over the two: two requests both pass and the cap is crossed, or the last
    /// owner goes. So is a count kept in a table of counts (a name ending in `_count`,
    /// `_counter`, `_usage` or `_quota`: `SELECT dataset_count FROM org_usage_counts ..`, kept
    /// by a trigger or by the crate) compared with a bound, then a row of any table inserted or
    /// deleted. A count over a time window (`WHERE created_at > ..`) is a rate limit and is not
    /// reported. And the row lock that ends before the write: `SELECT .. FOR UPDATE [SKIP
    /// LOCKED]` run on the pool with no transaction (the lock lasts the one statement), or in a
    /// transaction committed or rolled back on the way to the `UPDATE` that acts on the row it
    /// found (also when the rows went through a collection first: grouped, then one picked):
    /// two workers both find the row and both claim it. A body handed its connection or
    /// transaction by the caller, a locking read made by a helper (it may hand its transaction
    /// back, or claim the row itself), a read or write inside a closure (it may be a
    /// transaction's), a statement that claims what it locks (`WITH .. UPDATE .. RETURNING`),
    /// and a write whose own filter re-checks the row are not reported in this form.
    ///
    /// The check must decide the write: it stops the flow, the write sits in its branch, or the
    /// written value comes from the read. A write whose own filter tests again the column the
    /// check looked at (`.. WHERE id = $1 AND state = 'open'`) takes the decision again when it
    /// writes, and is not stale. One stale read is reported once, at its first write.
    /// A second look at the state under an exclusive lock still held at the write (look, take
    /// the connect lock, look again, then take the slot's own lock to store) is the re-read; so
    /// is a lookup under the lock that hands out the entry as it is now (`if let Some(s) =
    /// sessions.get_mut(&id)`) when the first look only asked whether the entry was there.
    /// Taking an in-memory entry out by its key (`map.remove(&k)`) after asking only whether it
    /// was there (`contains_key`, `is_some()`, `if let Some(..)`) is not reported when nothing
    /// acts after the removal on its path: removing it twice changes nothing.
    ///
    /// ### Why is this bad?
    ///
    /// The lock only serialises what happens *inside* it. A message that read the state before
    /// the lock decides with facts that may already be stale:
    ///
    /// ```text
    /// t0  payment callback reads order 42: status = pending
    /// t1  cancel request locks order 42, sets status = cancelled, unlocks
    /// t2  payment callback takes the lock (legally, it is free now)
    /// t3  payment callback writes status = paid      <- a cancelled order is now paid
    /// ```
    ///
    /// Under `READ COMMITTED` the same happens inside one transaction when the row is read
    /// without `FOR UPDATE`: two transactions both see `open` and both act. Not so in a
    /// `SERIALIZABLE` transaction, or in any SQLite one: SQLite runs every transaction
    /// serializably, and of two that read a row and then write, the second to write gets
    /// `SQLITE_BUSY`. A check and a write inside one such transaction are not reported; a
    /// package is taken to run on SQLite when SQLite is the only SQL database its `use` paths and
    /// its fns' parameter and result types name (`SqlitePool`, `sqlx::Sqlite`,
    /// `rusqlite::Connection`, through `type` aliases), and so is one function when its own
    /// parameter and result types and its struct's fields name only SQLite (the SQLite store of
    /// a package that has a PostgreSQL one too).
    ///
    /// ### Example
    ///
    /// ```rust,ignore
    /// let order = sqlx::query_as::<_, Order>("SELECT * FROM orders WHERE id = $1")
    ///     .bind(id).fetch_one(&pool).await?;
    /// if order.status != "pending" { return Ok(()); }
    /// let mut tx = pool.begin().await?;
    /// sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
    ///     .bind(id).execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// ```
    ///
    /// ### Use instead
    ///
    /// Take the lock, re-read, verify, then write — or let the write carry the check:
    ///
    /// ```rust,ignore
    /// let mut tx = pool.begin().await?;
    /// let order = sqlx::query_as::<_, Order>("SELECT * FROM orders WHERE id = $1 FOR UPDATE")
    ///     .bind(id).fetch_one(&mut *tx).await?;
    /// if order.status != "pending" { return Ok(()); }
    /// sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1")
    ///     .bind(id).execute(&mut *tx).await?;
    /// tx.commit().await?;
    ///
    /// // or: a conditional update whose result is checked
    /// let done = sqlx::query("UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'")
    ///     .bind(id).execute(&pool).await?;
    /// if done.rows_affected() == 0 { return Ok(Stale); }
    /// ```
    ///
    /// Or generate that shape: `#[staleguard::fenced(..)]` on the handler takes the lock,
    /// re-reads the state under it, verifies the operation identity and only then runs the body.
    ///
    /// ### Known problems
    ///
    /// The analysis is syntactic: it matches the read and the write by table (SQL text, diesel
    /// and sea-orm entity names) or by place, not by row. A re-read hidden behind a function the
    /// crate does not define is not seen; a read of a different row of the same table counts as
    /// a re-read. Test code (`#[test]`, `#[tokio::test]`, `#[cfg(test)]`, methods of test doubles:
    /// `Mock*`, `Fake*`, `Stub*` types) is not analysed. The
    /// no-lock form needs a test of a read value and either a written value that comes from the
    /// read or a state column moved that the test looked at by name (`payment.status`, or a
    /// local bound from it): a status flip decided by a state read under another name (`let s:
    /// String = query_scalar("SELECT status ..")`) is not reported, nor one to the only value the
    /// crate ever moves that column to; batch passes over many rows (`.all()`, `fetch_all`,
    /// `load`) are left out of it. A filter is taken for the key when its columns are named like
    /// one (`id`, `order_id`) or are exactly a unique key a schema file declares (`txid TEXT
    /// PRIMARY KEY`); otherwise it is taken to test more than the key. A method of the crate
    /// called on the write guard (`holder.write().await.advance_from(stage)`) counts as the
    /// re-read when it tests the same getter or field the caller checked (`self.stage`); the
    /// analysis does not prove that its test is the same condition. The check-then-insert is
    /// reported only for tables a `.sql` file declares (`CREATE TABLE`, `CREATE UNIQUE INDEX`,
    /// `ALTER TABLE .. ADD UNIQUE`; `down` migrations are left out; a table only altered there
    /// counts as not declared): keys declared in Rust migration code (sea-orm, refinery's Rust
    /// migrations) or dropped by a later migration are not seen, and a partial unique index
    /// counts as a full key. Whether the insert runs where the lookup found nothing or where it
    /// found a row (`is_none()` against `is_some()`) is not told apart; a test against a limit
    /// (`count >= 10`) is not taken for an existence test. The limit check matches the count and
    /// the write by table (a kept count by the counts table's name alone: which of its columns
    /// was read, and of which table it counts, is not known): a count of a table joined to the
    /// written one (owners listed through `users JOIN owners`) is not matched, and a check made
    /// after the write (delete, then count what remains, then roll back) is not this shape. An exclusive lock (a mutex, a write
    /// guard) on a named place, taken in the body and held from before the read to the write, or
    /// held by every caller of the body in the crate (up to three calls up), counts as
    /// serialising the check, although a process-local lock does not exclude other processes; a
    /// guard handed out by a crate fn (`let _g = get_lock().await`, a pooled connection) does
    /// not count. A body that runs once as the program starts (every call of it made by `main`,
    /// a few calls up, from no loop, closure or spawned task) is not reported: nothing else of
    /// the process runs beside it, although a second instance starting at the same moment, or
    /// a process started by hand, does.
    pub(crate) static RULE = {
        name: "check-before-lock",
        level: Error,
        summary: "state read and tested before the lock or transaction, not re-read after it",
        applies: applies,
        check: check,
    };
}

/// Every shape needs a write and a read before it, and something to be stale against: a lock,
/// a transaction, a claim, a temporary guard, or a persisted read (the no-lock form).
fn applies(cx: &RuleCx<'_>) -> bool {
    let k = cx.kinds();
    k.has(EffectKind::Write)
        && k.has(EffectKind::Read)
        && (k.has(EffectKind::Lock)
            || k.has(EffectKind::TxBegin)
            || k.has(EffectKind::TxClosure)
            || k.has(EffectKind::Claim)
            || cx.effects().body.tx_param.is_some()
            || cx.effects().any_order().any(|e| {
                e.kind == EffectKind::Read && !e.in_memory
                    || e.kind == EffectKind::Write && e.temporary()
            }))
}

/// A write under check.
struct Write<'a> {
    at: u32,
    effect: &'a Effect,
}

/// The reads already reported: one finding per stale read (later writes from the same read
/// are the same bug).
#[derive(Default)]
struct Reported(Vec<u32>);

impl Reported {
    fn contains(&self, read: u32) -> bool {
        self.0.contains(&read)
    }

    /// Marks `read` reported; `false` when it already was.
    fn first(&mut self, read: u32) -> bool {
        let first = !self.contains(read);
        if first {
            self.0.push(read);
        }
        first
    }
}

/// What a shape made of a write.
enum Verdict {
    /// A stale read decides the write.
    Stale(Box<Diagnostic>),
    /// The stale read that decides the write was reported at an earlier write.
    Reported,
    /// Nothing of this shape.
    Clean,
}

fn check(cx: &RuleCx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.body.fenced {
        return;
    }
    let mut reported = Reported::default();
    let mut stale_writes: Vec<u32> = Vec::new();
    let found = out.len();
    for w in 0..cx.body.events.len() as u32 {
        let Some(write) = candidate(cx, w) else {
            continue;
        };
        let verdict = match lock_ended::judge(cx, &write, &mut reported) {
            Verdict::Clean => under_lock::judge(cx, &write, &mut reported),
            decided => decided,
        };
        let verdict = match verdict {
            Verdict::Clean => {
                let st = cx.state(w);
                if st.txs.is_empty() && st.locks.is_empty() && !write.effect.temporary() {
                    without_lock::judge(cx, &write, &mut reported)
                } else {
                    in_transaction::judge(cx, &write, &mut reported)
                }
            }
            decided => decided,
        };
        if let Verdict::Stale(d) = verdict {
            stale_writes.push(w);
            out.push(*d);
        }
    }
    for w in 0..cx.body.events.len() as u32 {
        // A write already reported as stale is one finding, whichever shape sees it too.
        if let Some(d) = check_then_insert::judge(cx, w, &mut reported)
            .or_else(|| count_then_write::judge(cx, w, &mut reported))
            .or_else(|| {
                (!stale_writes.contains(&w))
                    .then(|| check_then_set::judge(cx, w, &mut reported))
                    .flatten()
            })
        {
            out.push(d);
        }
    }
    // Every caller holds an exclusive lock over the call, or the body runs once as the program
    // starts: runs of this body never overlap, nor race the rest of the process.
    if !out[found..].is_empty() && (cx.callers_hold_lock() || cx.runs_once_at_startup()) {
        out.truncate(found);
    }
}

/// The write at `w`, when it is one a stale read could decide: not detached, not a token's
/// deletion (another rule's business), not an insert (it creates a row, it does not update the
/// one read), not an in-memory write through a helper (judged where it happens), not a
/// conditional write whose result is checked, and not through a helper that reads the state
/// itself (a crate fn that reads and writes, a method on the guard that re-reads under it).
fn candidate<'a>(cx: &RuleCx<'a>, w: u32) -> Option<Write<'a>> {
    if cx.detached(w) {
        return None;
    }
    let write = cx.eff(w, EffectKind::Write)?;
    // A model read here and saved back through the crate's upsert is an update of that row; so
    // may be any upsert that overwrites columns (judged against the read it writes back).
    let insert = write.insert
        && !upsert_writing_back(write)
        && !crate::state_writes::saves_back(cx, w, write);
    if write.token && write.delete || insert || write.in_memory && write.via.is_some() {
        return None;
    }
    if write.conditional
        && (result_checked(cx.body, w)
            || write
                .via
                .is_some_and(|h| checked_in_helper(cx, h, write, 3)))
    {
        return None;
    }
    if write.via.is_some()
        && cx
            .effs(w)
            .any(|e| e.kind == EffectKind::Read && e.via == write.via)
    {
        return None;
    }
    // `holder.write().await.commit_stage(key)` re-checking the stage under the write guard.
    if write.via.is_none()
        && cx
            .callees(w)
            .iter()
            .any(|c| cx.krate.summary(*c).is_some_and(|s| s.reads_state()))
    {
        return None;
    }
    Some(Write {
        at: w,
        effect: write,
    })
}

/// Is the result of the write at `w` looked at: tested, or handed to a fallible check
/// (`ensure_affected_rows(&res, 1)?`)?
fn result_checked(body: &crate::ir::Body, w: u32) -> bool {
    !query::tests_of(body, w).is_empty() || query::checked_by_call(body, w)
}

/// Does crate fn `h` (or a helper it calls, `depth` calls down) make the conditional write
/// `write` came from and test its result itself (`if rows_affected != n { rollback }`)? A write
/// that re-checks the state in its own filter and looks at what it changed is not stale.
fn checked_in_helper(cx: &RuleCx<'_>, h: BodyId, write: &Effect, depth: u8) -> bool {
    let Some(summary) = cx.krate.summary(h) else {
        return false;
    };
    summary.effects.iter().any(|x| {
        x.effect.kind == EffectKind::Write
            && x.effect.conditional
            && x.effect.table == write.table
            && match x.callee {
                Some(c) => depth > 0 && checked_in_helper(cx, c, write, depth - 1),
                None => result_checked(cx.krate.body(h), x.at),
            }
    })
}

/// Does a test of the read at `r` only skip a write of the very value it compared with (`if
/// current == wanted { return }` before storing `wanted`), with the other tests that decide the
/// write at `w` only asking whether the row is there (`if let Some(row) = ..`)? Racing writers
/// then all store the wanted value. A limit (`if balance < amount`) is no such test.
pub(super) fn only_skips_unchanged(cx: &RuleCx<'_>, r: u32, w: u32) -> bool {
    let unchanged = |t: u32| {
        matches!(&cx.body.events[t as usize].kind, EventKind::Cond(test)
            if matches!(test.comparison, crate::ir::Comparison::Equal | crate::ir::Comparison::NotEqual))
            && in_transaction::sets_compared_value(cx, t, r, w)
    };
    let deciding: Vec<u32> = query::tests_of(cx.body, r)
        .into_iter()
        .filter(|&t| t > r && t < w && tests_read(cx, t, r) && decides(cx, t, r, w))
        .collect();
    deciding.iter().any(|&t| unchanged(t))
        && deciding
            .iter()
            .all(|&t| unchanged(t) || presence_test(cx, t, r))
}

/// The first test of the read at `r`, before the write at `w`, that looks at the value read and
/// decides the write.
fn deciding_check(cx: &RuleCx<'_>, r: u32, w: u32) -> Option<u32> {
    let deciding: Vec<u32> = query::tests_of(cx.body, r)
        .into_iter()
        .filter(|&c| c > r && c < w && tests_read(cx, c, r) && decides(cx, c, r, w))
        .collect();
    let first = *deciding.first()?;
    // The write re-tests in its filter what the check looked at; the rest only asked whether
    // the row is there.
    if deciding.iter().any(|&c| write_rechecks(cx, c, w))
        && deciding
            .iter()
            .all(|&c| write_rechecks(cx, c, w) || presence_test(cx, c, r))
    {
        return None;
    }
    let presence = |c: &u32| presence_test(cx, *c, r);
    // Only columns fixed at the row's creation tested (`if key.ns != ns`), or a set-once marker
    // the write sets, besides presence: no concurrent writer makes the answer matter.
    let settled = |c: &u32| fixed_test(cx, *c, r) || marks_once(cx, *c, r, w);
    if deciding.iter().any(settled) && deciding.iter().all(|c| settled(c) || presence(c)) {
        return None;
    }
    let validated = || {
        let derived = query::derived(cx.body, r);
        (r + 1..w).any(|c| validates(cx, c, &derived))
    };
    if (removal_ends_path(cx, w) || sets_constants(cx, w) && !validated())
        && deciding.iter().all(presence)
    {
        return None;
    }
    // Only presence tests that stop the flow (`let Some(..) = find(..).await? else { return }`),
    // none opening a branch the write sits in (`if let Some(d) = row.draft { replace it }` acts
    // on what was there), and a write of values that take nothing from the read.
    if stored_without_read(cx, w, r)
        && !validated()
        && deciding
            .iter()
            .all(|c| presence(c) && !write_in_branch_of(cx, *c, w))
    {
        return None;
    }
    Some(first)
}

/// The first test of the read at `r`, before the write at `w`, that looks at a value read and
/// decides the write, beyond whether the row is there (`balance < amount`, `state == Open`).
pub(super) fn value_check(cx: &RuleCx<'_>, r: u32, w: u32) -> Option<u32> {
    query::tests_of(cx.body, r).into_iter().find(|&c| {
        c > r && c < w && tests_read(cx, c, r) && decides(cx, c, r, w) && !presence_test(cx, c, r)
    })
}

/// Is the test at `c` a set-once marker's (`if user.verified_at.is_some() { return }`), and
/// the write at `w` the marker set to a constant or the time (`SET verified_at = now()`,
/// nothing but that column and times), with nothing else done in between? Racing requests all
/// set the same marker: the test only skips a write that was already made. (A marker set to a
/// value of each request's own, `SET party = $1`, is a claim: the second overwrites the first.)
pub(super) fn marks_once(cx: &RuleCx<'_>, c: u32, r: u32, w: u32) -> bool {
    let events = &cx.body.events;
    let EventKind::Cond(t) = &events[c as usize].kind else {
        return false;
    };
    let mut calls = t.calls.iter();
    let (Some(k), None) = (calls.next(), calls.next()) else {
        return false;
    };
    let EventKind::Call(call) = &events[*k as usize].kind else {
        return false;
    };
    let ([root, field], [step]) = (call.recv.as_slice(), call.steps.as_slice()) else {
        return false;
    };
    if !matches!(
        step.name.as_str(),
        "is_some" | "is_none" | "is_null" | "is_not_null"
    ) || !query::derived(cx.body, r).contains(root.as_str())
    {
        return false;
    }
    let sets_marker = cx.effs(w).any(|e| {
        e.kind == EffectKind::Write
            && !e.insert
            && !e.delete
            && e.sets.iter().any(|a| {
                a.column == *field
                    && match &a.value {
                        crate::effects::AssignedValue::Const(v) => v != "null",
                        v => *v == crate::effects::AssignedValue::Now,
                    }
            })
            && e.sets
                .iter()
                .all(|a| a.column == *field || crate::kb::names::is_time_column(&a.column))
    });
    sets_marker && !(c + 1..w).any(|i| acts(cx, i))
}

/// Does event `i` act on the world (a write, a remote call, a claim, a schedule or a spawn),
/// on the body's own path (not detached)?
pub(super) fn acts(cx: &RuleCx<'_>, i: u32) -> bool {
    !cx.detached(i) && cx.effs(i).any(acting)
}

/// An effect that does something (a write, a remote call, a claim, a schedule, a spawn), not
/// a read or a lock.
pub(super) fn acting(e: &Effect) -> bool {
    matches!(
        e.kind,
        EffectKind::Write
            | EffectKind::Remote
            | EffectKind::Claim
            | EffectKind::Schedule
            | EffectKind::Spawn
    )
}

/// Does the test at `c` look only at columns of the row read at `r` that the crate gives when
/// the row is created and never updates (an owner, a namespace, a `local` flag), each as a
/// plain field of the value read (`key.ns`)? A state column, or one counting rounds (a version,
/// a generation), is never taken for fixed.
pub(super) fn fixed_test(cx: &RuleCx<'_>, c: u32, r: u32) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let Some(table) = cx.eff(r, EffectKind::Read).and_then(|e| e.table.as_deref()) else {
        return false;
    };
    let derived = query::derived(cx.body, r);
    let mut fields = t
        .deps
        .iter()
        .filter(|d| derived.contains(query::first(d)))
        .peekable();
    fields.peek().is_some()
        && t.calls.iter().all(|&k| k != r)
        && fields.all(|d| {
            let mut parts = d.split('.');
            let (_, field, rest) = (parts.next(), parts.next(), parts.next());
            field.is_some_and(|f| {
                rest.is_none()
                    && !crate::kb::names::is_state_column(f)
                    && !crate::kb::names::is_round_column(f)
                    && cx.krate.fixed_column(table, f)
            })
        })
}

/// Is event `c` a validation of the value read (`link.check(&user)?`, `ensure_confirmed(&res)?`):
/// a crate fn or method handed it (or called on it), not awaited (its answer comes from the
/// value, not from I/O), returning a `Result` whose error stops the flow (`?`). Every crate fn
/// or method of that name must be such a check when the call is not resolved.
pub(super) fn validates(cx: &RuleCx<'_>, c: u32, derived: &crate::fxhash::FxHashSet<Name>) -> bool {
    let EventKind::Call(call) = &cx.body.events[c as usize].kind else {
        return false;
    };
    let Some(first) = call.steps.first() else {
        return false;
    };
    let method = call.func.is_empty();
    let handed = if method {
        call.recv.first().is_some_and(|x| derived.contains(x))
    } else {
        first
            .args
            .iter()
            .any(|a| a.paths.iter().any(|p| derived.contains(query::first(p))))
    };
    if call.awaited() || !first.tried || !handed {
        return false;
    }
    // A crate fn: its `Err` is a verdict on the value (a library's decode error is not).
    let checks_input = |m: &BodyId| {
        let body = cx.krate.body(*m);
        (!method || body.self_ty.is_some()) && body.ret.iter().any(|t| t.contains("Result"))
    };
    let resolved = cx.callees(c);
    if !resolved.is_empty() {
        return resolved.iter().all(checks_input);
    }
    let defs = if method {
        cx.krate.facts.methods_named.get(first.name.as_str())
    } else {
        cx.krate.facts.free_fns.get(call.func_last())
    };
    defs.is_some_and(|defs| !defs.is_empty() && defs.iter().all(checks_input))
}

/// Is the write at `w` inside a branch the test at `c` opens (`if let Some(d) = draft { ..
/// write .. }`), rather than after a guard that returns (`let Some(d) = draft else { return }`)?
fn write_in_branch_of(cx: &RuleCx<'_>, c: u32, w: u32) -> bool {
    let events = &cx.body.events;
    let Some(open) = (c + 1..w).find(|&i| !matches!(events[i as usize].kind, EventKind::Cond(_)))
    else {
        return false;
    };
    if !matches!(
        events[open as usize].kind,
        EventKind::Enter(Region::Branch { .. })
    ) {
        return false;
    }
    let mut depth = 0i32;
    for ev in &events[open as usize..w as usize] {
        match ev.kind {
            EventKind::Enter(_) => depth += 1,
            EventKind::Leave => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            return false;
        }
    }
    depth > 0
}

/// Does the write at `w` store rows without taking anything from the read at `r` (no value
/// computed from it, not the row itself saved back, not its key)? When it takes nothing
/// (`UPDATE orgs SET name = $1 WHERE id = $2` bound to the request's values after
/// `get_org(id).await?`), a test of the read's presence only decided that the row existed:
/// racing writers each store their own request, as in some serial order. A sea-orm active
/// model made from the row (`row.into_active_model()`) writes only the fields set on it, by
/// the row's key: it takes nothing more when none of those fields comes from the read, nor is
/// one the read was filtered on. (An in-memory entry is left out: its lookup is often the test
/// itself.)
fn stored_without_read(cx: &RuleCx<'_>, w: u32, r: u32) -> bool {
    if !cx
        .effs(w)
        .any(|e| e.kind == EffectKind::Write && !e.in_memory && !e.insert)
        || without_lock::writes_from(cx, w, r)
    {
        return false;
    }
    if without_lock::active_model_update(cx, w).is_some() {
        // Unless the read found the row by a column the write changes
        // (`.filter(used_at.is_null())` then `used_at = Set(now)`): that filter was the check.
        let filtered: Vec<&Name> = cx
            .effs(r)
            .filter(|e| e.kind == EffectKind::Read)
            .flat_map(|e| e.where_cols.iter())
            .collect();
        return !cx.effs(w).any(|e| {
            e.kind == EffectKind::Write && e.sets.iter().any(|a| filtered.contains(&&a.column))
        });
    }
    let derived = query::derived(cx.body, r);
    !matches!(&cx.body.events[w as usize].kind, EventKind::Call(c)
        if c.recv.first().is_some_and(|x| derived.contains(x.as_str())))
}

/// Is the write at `w` an update or delete of stored rows that writes only constants and the
/// current time (`SET deleted_at = now()`, `SET paid = true`), nothing taken from a read? After
/// a test of presence alone, racing writers then write the same thing: no stale value decides
/// it (whether the row may move from its current state is `unguarded-state-transition`'s
/// question).
fn sets_constants(cx: &RuleCx<'_>, w: u32) -> bool {
    cx.effs(w).any(|e| {
        e.kind == EffectKind::Write
            && !e.insert
            && !e.in_memory
            && (e.delete
                || !e.sets.is_empty()
                    && e.sets.iter().all(|a| {
                        matches!(
                            a.value,
                            crate::effects::AssignedValue::Const(_)
                                | crate::effects::AssignedValue::Now
                        )
                    }))
    })
}

/// Does the write at `w` test again, in its own filter, a column the check at `c` looked at
/// (`if pos.position_state == Open { close(pos.id) }` where `close` runs `UPDATE .. WHERE id = $1
/// AND position_state = 'Open'`)? Then a stale answer makes the write change nothing: the
/// decision is taken again by the write itself, whatever is done with its rows affected.
pub(super) fn write_rechecks(cx: &RuleCx<'_>, c: u32, w: u32) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return false;
    };
    cx.effs(w).any(|e| {
        e.kind == EffectKind::Write
            && e.conditional
            && !e.insert
            && t.deps.iter().any(|d| {
                d.contains('.')
                    && e.where_cols
                        .iter()
                        .any(|col| col.as_str() == query::last(d))
            })
    })
}

/// `if !map.read().contains_key(&k) { return } .. map.write().remove(&k)`: the write takes an
/// in-memory entry out by its key, the read only asked whether it was there, and nothing acts
/// after the removal on its path (no other write, remote call, schedule, claim or spawn). Had
/// another task removed the entry in between, removing it again changes nothing; no stale
/// decision is acted on. (A row deleted from a database is left to the rule: what follows a
/// consumed row is often the effect it paid for, returned to the caller.)
fn removal_ends_path(cx: &RuleCx<'_>, w: u32) -> bool {
    let removes = cx
        .effs(w)
        .any(|e| e.kind == EffectKind::Write && e.in_memory)
        && matches!(&cx.body.events[w as usize].kind, EventKind::Call(call)
            if call.steps.iter().any(|s| crate::apis::GUARDED_REMOVALS.contains(&s.name.as_str())));
    removes && !(w + 1..cx.reach_end(w)).any(|e| acts(cx, e))
}

/// Does the test at `c` only ask whether something is there (`is_some()`, `contains_key(..)`,
/// `if let Some(..)`, `is_empty()`), not what its value is?
pub(super) fn presence_test(cx: &RuleCx<'_>, c: u32, r: u32) -> bool {
    const PRESENCE: &[&str] = &["Some", "None", "Ok", "Err", "_"];
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        // A `?` or `let else` on the lookup itself.
        return true;
    };
    let only_presence = !t.str_lits
        && t.values.iter().all(|v| PRESENCE.contains(&v.as_str()))
        && t.pats
            .iter()
            .flatten()
            .all(|v| PRESENCE.contains(&v.as_str()));
    // The lookup is the test (`if map.contains_key(&k)`, `map.get(&k).is_none()`, not
    // `get(&k).is_some_and(|u| u.done)`), or an `Option` is matched or compared with `None`; a
    // flag of the value read is not presence.
    let lookup_is_test = t.calls.contains(&r)
        && matches!(&cx.body.events[r as usize].kind, EventKind::Call(call)
            if !call.all_args().any(|a| a.closure));
    // The lookup answers only whether it is there (`let known = map.contains_key(&k)`), and
    // that answer is tested.
    let answers_presence = matches!(&cx.body.events[r as usize].kind, EventKind::Call(call)
        if call.steps.last().is_some_and(|s| crate::apis::PRESENCE_ANSWERS.contains(&s.name.as_str())));
    // `found.is_none()`, `rows.is_empty()`, `found == None`: a presence test when the read's
    // answer is whether rows were found.
    // (`found != Some(x)` compares a value: `Some` asks only as a method or a pattern.)
    let asks_variant = || {
        t.values.iter().any(|v| {
            v == "None" || v == "Some" && matches!(t.comparison, crate::ir::Comparison::Other)
        }) && finds_rows(cx, r)
    };
    let asks = lookup_is_test
        || answers_presence
        || t.pats.iter().flatten().any(|v| v == "Some" || v == "None")
        || asks_variant();
    only_presence && asks
}

/// Does the read at `r` answer with whether rows were found, so that a `None` or an empty answer
/// means "no row"? Not when the row must exist (`fetch_one`, `query_one`, diesel's `first` or
/// `get_result` without `.optional()`: an `Option` is then a nullable column's), when a column is
/// taken out of the row (`query_opt(..).and_then(|r| r.get(0))`), or when the lookup filters on
/// a state column (`WHERE status = 'queued'`): which rows it finds is the state tested.
fn finds_rows(cx: &RuleCx<'_>, r: u32) -> bool {
    if let EventKind::Call(call) = &cx.body.events[r as usize].kind {
        let has = |names: &[&str]| call.steps.iter().any(|s| names.contains(&s.name.as_str()));
        if has(&["fetch_one", "query_one", "first", "get_result"]) && !has(&["optional"])
            || has(&["and_then"])
        {
            return false;
        }
    }
    !cx.effs(r).any(|e| {
        e.kind == EffectKind::Read
            && e.where_cols
                .iter()
                .any(|c| crate::kb::names::is_state_column(c))
    })
}

/// Does the condition at `c` look at the value read at `r` itself? Not when the read value only
/// goes into an awaited call whose answer is what the condition tests
/// (`match authorize(.., session_id, ..).await`, `if let Ok(dns) = discover(&config).await`):
/// that answer is fresh, not the state read before.
pub(super) fn tests_read(cx: &RuleCx<'_>, c: u32, r: u32) -> bool {
    let EventKind::Cond(t) = &cx.body.events[c as usize].kind else {
        return true;
    };
    let (deps, calls) = (&t.deps, &t.calls);
    if calls.contains(&r) {
        return true;
    }
    let derived = query::derived(cx.body, r);
    let asked: Vec<&str> = calls
        .iter()
        .filter_map(|&k| match &cx.body.events[k as usize].kind {
            EventKind::Call(call) if call.awaited() => Some(call),
            _ => None,
        })
        .flat_map(|call| {
            call.all_args()
                .flat_map(|a| a.paths.iter().map(|p| query::first(p)))
        })
        .collect();
    deps.iter().any(|d| {
        let root = query::first(d);
        derived.contains(root) && !asked.contains(&root)
    }) || deps.is_empty()
}

/// Does the check at `c` (on the read at `r`) decide the write at `w`? The write's value comes
/// from the read; or the check stops the flow (an assertion, `?`, `let else`, a branch that
/// returns or breaks between them); or the write sits in a branch opened by the check, or uses
/// a local assigned in one. A `match` whose arms all fall through to the same write (logging the
/// error, say) does not make the write depend on what was read.
pub(super) fn decides(cx: &RuleCx<'_>, c: u32, r: u32, w: u32) -> bool {
    if query::depends_on(cx.body, w, r) {
        return true;
    }
    let events = &cx.body.events;
    // The event after the test (past the sub-tests of the same condition) opens its branch;
    // anything else is an assertion or a `?` that stops the flow.
    let after = events[c as usize + 1..]
        .iter()
        .find(|e| !matches!(e.kind, EventKind::Cond(_)));
    if !matches!(
        after.map(|e| &e.kind),
        Some(EventKind::Enter(Region::Branch { .. }))
    ) {
        return true;
    }
    let mut depth = 0i32;
    let mut assigned: Vec<&str> = Vec::new();
    for ev in &events[c as usize + 1..w as usize] {
        match &ev.kind {
            EventKind::Enter(Region::Branch { diverges: true, .. }) | EventKind::Exit => {
                return true;
            }
            EventKind::Enter(_) => depth += 1,
            EventKind::Leave => depth = (depth - 1).max(0),
            EventKind::Assign(a) if depth > 0 => assigned.push(query::first(&a.target)),
            _ => {}
        }
    }
    if depth > 0 {
        return true;
    }
    let uses = |p: &Name| assigned.contains(&query::first(p));
    match &events[w as usize].kind {
        EventKind::Assign(a) => a.deps.iter().any(uses),
        EventKind::Call(call) => {
            call.all_args().any(|a| a.paths.iter().any(uses)) || call.recv.first().is_some_and(uses)
        }
        _ => false,
    }
}

/// An upsert that overwrites columns of the row that is there (`INSERT .. ON CONFLICT (id) DO
/// UPDATE SET count = $2`): on a row read earlier it is a write-back, judged like an `UPDATE`
/// when what it writes comes from that read.
fn upsert_writing_back(e: &crate::effects::Effect) -> bool {
    e.insert && e.upsert && !e.sets.is_empty() && !e.in_memory && !e.kv
}
