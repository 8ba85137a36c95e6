//! The check-then-insert: a lookup of a table by some columns, a test of what it found, and an
//! insert of a row with those columns, with no lock over the two and no unique key in the
//! schema to refuse the second of two concurrent inserts.

use super::{Reported, RuleCx, deciding_check, without_lock};
use crate::diagnostic::Diagnostic;
use crate::effects::{Effect, EffectKind};
use crate::ir::EventKind;
use crate::query;

/// The insert at `w`, when a lookup before it decided it and the schema lets the duplicate in.
pub(super) fn judge(cx: &RuleCx<'_>, w: u32, reported: &mut Reported) -> Option<Diagnostic> {
    let pair = lookup_then_insert(cx, w, &|r| reported.contains(r))?;
    let (r, c, read, insert, table) =
        (pair.read_at, pair.check, pair.read, pair.insert, pair.table);
    if cx
        .krate
        .facts
        .duplicates_allowed(table, &key_columns(read, insert))
        != Some(true)
    {
        return None;
    }
    reported.first(r);
    let cols = read.where_cols.join(", ");
    let mut d = cx.diag(
        &super::RULE,
        w,
        format!("a row of `{table}` is looked up by `{cols}`, then inserted with no lock and no unique key on those columns"),
    );
    d.primary_label = Some("inserted here".into());
    d.labels.push(cx.label(r, "looked up here"));
    d.labels.push(cx.label(c, "checked here"));
    d.notes.push(format!(
        "two concurrent requests both find no row and both insert one: the schema declares no unique key within ({cols}) of `{table}`"
    ));
    d.help = Some(format!(
        "add a unique constraint on ({cols}) and insert with `ON CONFLICT DO NOTHING`, checking the rows affected (or handle the unique violation), or take a lock over the lookup and the insert"
    ));
    d.notes.extend(cx.chain_notes(read));
    d.notes.extend(cx.chain_notes(insert));
    Some(d)
}

/// A lookup of a table by some columns, a test of what it found that decides an insert of a
/// row with those columns, and nothing over the two: no lock, no serializable transaction, no
/// look at the insert's outcome. Whether the schema refuses the second of two racing inserts is
/// the caller's question (`check-before-lock` when it lets it in, `duplicate-as-failure` when
/// the refusal is answered as a failure).
pub(crate) struct LookupInsert<'a> {
    pub read_at: u32,
    /// The test that decides the insert.
    pub check: u32,
    pub read: &'a Effect,
    pub insert: &'a Effect,
    pub table: &'a str,
}

/// The lookup and its test that decide the insert at `w` (see [`LookupInsert`]); `skip` leaves
/// out reads already reported.
pub(crate) fn lookup_then_insert<'a>(
    cx: &RuleCx<'a>,
    w: u32,
    skip: &dyn Fn(u32) -> bool,
) -> Option<LookupInsert<'a>> {
    if cx.detached(w) {
        return None;
    }
    let insert = cx
        .effs(w)
        .find(|e| e.kind == EffectKind::Write && e.insert && !e.upsert && !e.in_memory)?;
    let table = insert.table.as_deref()?;
    // A lock held over the insert serialises the lookups too; an insert whose outcome is looked
    // at (a unique violation matched, rows affected) handles the duplicate.
    if !cx.state(w).locks.is_empty() || !query::tests_of(cx.body, w).is_empty() {
        return None;
    }
    for r in (0..w).rev() {
        if cx.detached(r) || skip(r) {
            continue;
        }
        let Some(read) = cx.effs(r).find(|e| looks_up(e, table)) else {
            continue;
        };
        // Both in one crate fn this body calls: reported there, once, not at every caller.
        if read.via.is_some() && read.via == insert.via {
            return None;
        }
        // A batch read (`fetch_all`, `load`) walks rows; it does not ask whether one exists.
        // Nor does a read that orders what it finds (`.. ORDER BY sent_at DESC LIMIT 3`): it
        // picks the newest of several rows with those columns, which the table holds by design.
        if !inserts_key(insert, read)
            || read.ordered()
            || without_lock::many_rows(cx, r)
            || !cx.state(r).locks.is_empty()
            || cx.serializable_together(r, w)
        {
            return None;
        }
        let c = deciding_check(cx, r, w)?;
        // `if n >= 10 { return }`: a limit on how many rows there are, not whether one exists
        // (a race there is real, but not a duplicate of one key).
        if let EventKind::Cond(t) = &cx.body.events[c as usize].kind
            && t.values
                .iter()
                .any(|v| !matches!(v.as_str(), "0" | "false" | "None" | "Some" | "true" | "1"))
        {
            return None;
        }
        return Some(LookupInsert {
            read_at: r,
            check: c,
            read,
            insert,
            table,
        });
    }
    None
}

/// A lookup of `table` by some columns, not under a row lock (`FOR UPDATE` locks nothing when
/// no row is found, but a locking read is mostly part of another shape).
fn looks_up(e: &Effect, table: &str) -> bool {
    e.kind == EffectKind::Read
        && !e.in_memory
        && !e.locking
        && !e.where_cols.is_empty()
        && e.table.as_deref() == Some(table)
}

/// The columns two racing inserts agree on: those the lookup filtered on, and the others the
/// insert writes except the row's own identity (`id`, `uuid`: generated per row). A unique key
/// within them refuses the second insert (`PRIMARY KEY (execution_id, version)` with the
/// version computed from the row read).
fn key_columns(read: &Effect, insert: &Effect) -> Vec<crate::name::Name> {
    let mut cols = read.where_cols.to_vec();
    for a in insert.sets.iter() {
        if !matches!(a.column.as_str(), "id" | "uuid" | "pk") && !cols.contains(&a.column) {
            cols.push(a.column.clone());
        }
    }
    cols
}

/// Does the insert write the columns the lookup filtered on (when its columns are known)?
fn inserts_key(insert: &Effect, read: &Effect) -> bool {
    insert.sets.is_empty()
        || read
            .where_cols
            .iter()
            .all(|c| insert.sets.iter().any(|a| a.column == *c))
}
