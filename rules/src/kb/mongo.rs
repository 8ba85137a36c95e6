//! MongoDB: a collection's `find_one`, `update_one`, `find_one_and_update`, `delete_one`, ..
//! with their filter and update documents (`doc! { "_id": id, "status": "paid" }`, `doc! {
//! "$set": { "status": "shipped" } }`), read as the SQL statement they stand for.

use super::names::is_token_name;
use super::{Class, Classifier};
use crate::apis::{
    MONGO_COUNT_METHODS, MONGO_DELETE_METHODS, MONGO_INSERT_METHODS, MONGO_READ_METHODS,
    MONGO_UPDATE_METHODS,
};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::{Call, LOCAL_VALUE, Step};
use crate::kb::names::{is_operation_identity, is_own_key};
use crate::name::Name;
use crate::sql::is_plain_key;

pub(super) fn classify(
    cx: &Classifier<'_>,
    call: &Call,
    recv: &Class,
    _resolved: &str,
) -> Option<Effect> {
    if !call.func.is_empty() {
        return None;
    }
    let (at, step) = call
        .steps
        .iter()
        .enumerate()
        .find(|(_, s)| mongo_method(&s.name))?;
    let name = step.name.as_str();
    let filter = step.args.first();
    // A collection's method: on a database handle's value, or awaited with a document for its
    // filter (`users.find_one(doc! { "email": email }).await`); a map's `find_one` is neither.
    let filter_doc = filter.map(|a| doc_of(cx, a)).unwrap_or_default();
    let documented = !filter_doc.0.is_empty();
    if !(matches!(recv, Class::Db | Class::DbTx) || documented && call.awaited()) {
        return None;
    }
    let named = collection(cx, call, at);
    let table = named.as_deref().map(crate::kb::db::normalize_table);
    let where_cols: Vec<Name> = filter_doc
        .0
        .iter()
        .filter(|c| !c.starts_with('$'))
        .map(|c| field_column(c))
        .collect();
    let (kind, verb) = if MONGO_READ_METHODS.contains(&name) || MONGO_COUNT_METHODS.contains(&name)
    {
        (EffectKind::Read, "reads")
    } else if MONGO_INSERT_METHODS.contains(&name) {
        (EffectKind::Write, "inserts into")
    } else if MONGO_DELETE_METHODS.contains(&name) {
        (EffectKind::Write, "deletes from")
    } else {
        (EffectKind::Write, "updates")
    };
    let what = match named.as_deref() {
        Some(t) => format!("{verb} the collection `{t}` (`{name}`)"),
        None => format!("runs mongodb `{name}`"),
    };
    let mut e = Effect::new(kind, what).with_table(table.clone());
    e.set_document(true);
    e.counts = MONGO_COUNT_METHODS.contains(&name);
    e.insert = MONGO_INSERT_METHODS.contains(&name);
    e.delete = MONGO_DELETE_METHODS.contains(&name);
    e.upsert = call.steps.iter().any(|s| {
        s.name == "upsert"
            && s.args
                .first()
                .and_then(|a| a.value())
                .is_some_and(|v| v == "true")
    });
    if kind == EffectKind::Write && !e.insert {
        let own = |c: &Name| is_own_key(c, table.as_deref());
        e.conditional = where_cols.iter().any(|c| !is_plain_key(c) && !own(c));
        e.ident_guard = where_cols
            .iter()
            .any(|c| is_operation_identity(c) && !own(c));
        e.filtered = filter.is_some();
        if MONGO_UPDATE_METHODS.contains(&name) {
            e.sets = update_sets(cx, step).into();
        }
    }
    e.token = table.as_deref().is_some_and(is_token_name)
        || !e.insert && where_cols.iter().any(|c| is_token_name(c));
    e.where_cols = where_cols.into();
    Some(e)
}

/// The fields of the document an argument is, with their values: written in place (`doc! {
/// .. }`), or a local bound to one (`let update = doc! { .. };`).
fn doc_of(cx: &Classifier<'_>, arg: &crate::ir::Arg) -> (Vec<Name>, Vec<Option<Name>>) {
    if !arg.eq_cols().is_empty() {
        return (arg.eq_cols().to_vec(), arg.eq_values().to_vec());
    }
    match arg.paths.as_slice() {
        [local] => cx
            .lit_locals
            .get(local)
            .filter(|l| l.ty == crate::ir::DOC_LITERAL)
            .map(|l| (l.fields.clone(), l.values.clone()))
            .unwrap_or_default(),
        _ => Default::default(),
    }
}

fn mongo_method(name: &str) -> bool {
    MONGO_READ_METHODS.contains(&name)
        || MONGO_COUNT_METHODS.contains(&name)
        || MONGO_INSERT_METHODS.contains(&name)
        || MONGO_DELETE_METHODS.contains(&name)
        || MONGO_UPDATE_METHODS.contains(&name)
}

/// A document field as a column: `_id` is the key, a nested field (`profile.status`) its
/// last part, a field compared by an operator (`balance.$gte`) the field.
fn field_column(field: &str) -> Name {
    match field
        .rsplit('.')
        .find(|p| !p.starts_with('$'))
        .unwrap_or(field)
    {
        "_id" => Name::new("id"),
        last => Name::new(last),
    }
}

/// What the update document sets: `$set` fields with their values, `$inc` fields moved by their
/// own value; `$unset` clears (a `NULL`), `$currentDate` stamps the time. A replacement document
/// (no operator) sets its fields.
fn update_sets(cx: &Classifier<'_>, step: &Step) -> Vec<Assigned> {
    let Some(update) = step.args.get(1) else {
        return Vec::new();
    };
    let (fields, values) = doc_of(cx, update);
    fields
        .iter()
        .zip(values)
        .filter_map(|(field, value)| {
            let (op, rest) = match field.split_once('.') {
                Some((op, rest)) if op.starts_with('$') => (op, rest),
                _ if field.starts_with('$') => return None,
                _ => ("$set", field.as_str()),
            };
            let value = match op {
                "$set" | "$setOnInsert" => match value.as_deref() {
                    None => AssignedValue::Unknown,
                    // `null` is SQL's `NULL`: a column cleared.
                    Some(crate::ir::NULL_VALUE) => AssignedValue::Const(Name::new("null")),
                    Some(v) => match v.strip_prefix(LOCAL_VALUE) {
                        Some(local) => cx.param_value(local),
                        None => AssignedValue::Const(Name::new(v)),
                    },
                },
                "$inc" | "$mul" => AssignedValue::Relative,
                "$unset" => AssignedValue::Const(Name::new("null")),
                "$currentDate" => AssignedValue::Now,
                _ => return None,
            };
            Some(Assigned {
                column: field_column(rest),
                value,
            })
        })
        .collect()
}

/// The collection (as named) the call at step `at` runs on: the name given to `collection("orders")`, a
/// method that hands the collection out (`self.orders().update_one(..)`), or the place it is
/// kept in (`self.orders`, `users_collection`).
fn collection(cx: &Classifier<'_>, call: &Call, at: usize) -> Option<Name> {
    let before = &call.steps[..at];
    if let Some(s) = before.iter().rev().find(|s| s.name == "collection") {
        let arg = s.args.first()?;
        if let Some(name) = arg.strs().first() {
            return Some(name.clone());
        }
        return arg.value().and_then(|v| const_collection(cx, v));
    }
    let place = match before.last() {
        Some(s) if s.args.is_empty() && !matches!(s.name.as_str(), "clone" | "as_ref") => {
            s.name.clone()
        }
        _ => call.recv.last()?.clone(),
    };
    let word = place
        .strip_suffix("_collection")
        .or_else(|| place.strip_suffix("_coll"))
        .or_else(|| place.strip_suffix("_col"))
        .unwrap_or(&place);
    if matches!(word, "collection" | "coll" | "col" | "c" | "self") {
        // `self.collection`: the document type it holds (`Collection<Session>`).
        let ty = cx.self_place_type(&call.recv)?;
        let inner = ty.get(1)?;
        return Some(Name::new(inner.rsplit("::").next().unwrap_or(inner)));
    }
    Some(Name::new(word))
}

/// The collection a constant names (`collection::<User>(USERS)`): the constant's own name
/// (`users`), or, for a name that only says it is one (`COLLECTION_NAME`), the module it is
/// imported from (`use crate::models::user::COLLECTION_NAME` names `user`). Its text is not
/// looked up: several modules may each declare a `COLLECTION_NAME`.
fn const_collection(cx: &Classifier<'_>, value: &str) -> Option<Name> {
    let path = cx.facts.resolve_parts(cx.file, &[Name::new(value)]);
    let mut segments = path.as_str().rsplit("::");
    let last = segments.next()?;
    let generic = last
        .split('_')
        .all(|w| matches!(w, "COLLECTION" | "NAME" | "TABLE" | "COLL"));
    if !generic {
        return Some(Name::from(last.to_ascii_lowercase()));
    }
    segments
        .next()
        .filter(|m| !matches!(*m, "crate" | "self" | "super"))
        .map(Name::new)
}
