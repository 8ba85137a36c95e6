//! Databases: transactions (begin / commit / rollback / closures) and reads and writes through
//! sqlx, tokio-postgres, deadpool / bb8 connections (by SQL text), diesel and sea-orm builders.

use super::names::{
    is_expiry_column, is_operation_identity, is_own_key, is_owner_column, is_token_name, is_work,
};
use super::{Class, Classifier};
use crate::apis::{
    ACTIVE_MODEL_STEPS, DIESEL_FILTER_STEPS, DIESEL_READ_STEPS, DIESEL_ROW_LOCKS, DIESEL_SET_STEPS,
    DIESEL_STATEMENT_STEPS, DIESEL_WRITE_FNS, EXEC_STEPS, QUERY_FNS, RESULT_ADAPTER_STEPS,
    SEA_ORM_EXEC_STEPS, SEA_ORM_FILTER_STEPS, SEA_ORM_FIND_FNS, SEA_ORM_READ_RUNS,
    SEA_ORM_ROW_LOCKS, SEA_ORM_SET_STEPS, SEA_ORM_WRITE_FNS, TX_BEGIN_STEPS, TX_BUILDER_STEPS,
    TX_CLOSURE_STEPS, TX_END_STEPS,
};
use crate::effects::{Assigned, AssignedValue, Effect, EffectKind};
use crate::ir::Call;
use crate::ir::{DIESEL_TABLE_FIELD, LOCAL_VALUE, NULL_VALUE, RELATIVE_VALUE};
use crate::name::Name;
use crate::sql::{Advisory, SqlInfo, SqlKind, is_plain_key};

fn db_recv(recv: &Class) -> bool {
    matches!(recv, Class::Db | Class::DbTx)
}

pub(super) fn classify(
    cx: &Classifier<'_>,
    call: &Call,
    recv: &Class,
    _resolved: &str,
) -> Option<Effect> {
    let head = call.head();
    let recv_local = Name::join(&call.recv, ".");

    // Transaction control.
    if call.func.is_empty() {
        let built = call
            .steps
            .iter()
            .any(|s| TX_BUILDER_STEPS.contains(&s.name.as_str()));
        if let Some(s) = call
            .steps
            .iter()
            .find(|s| TX_CLOSURE_STEPS.contains(&s.name.as_str()))
            && s.args.iter().any(|a| a.closure)
            && (s.name != "run" || built)
            && !matches!(recv, Class::Redis | Class::Http | Class::Channel)
        {
            return Some(Effect::new(
                EffectKind::TxClosure,
                "runs a transaction closure",
            ));
        }
        let begin = call.steps.iter().any(|s| {
            TX_BEGIN_STEPS.contains(&s.name.as_str())
                || (s.name == "transaction" && s.args.is_empty())
                || (s.name == "start" && built)
        });
        if begin
            && (db_recv(recv)
                || call.awaited()
                || matches!(recv, Class::Unknown(_) | Class::User(_)))
            && !matches!(
                recv,
                Class::Redis | Class::Http | Class::Channel | Class::Mutex
            )
        {
            // `pool.begin()` / `client.transaction()`: only with DB evidence or an await.
            if db_recv(recv) || call.awaited() {
                return Some(Effect::new(EffectKind::TxBegin, "begins a transaction"));
            }
        }
        if call.steps.len() <= 3
            && TX_END_STEPS.contains(&head)
            && call.steps[0].args.is_empty()
            && (*recv == Class::DbTx || !call.recv.is_empty())
            && *recv != Class::Broker
        {
            let mut e = Effect::new(
                if head == "commit" {
                    EffectKind::TxCommit
                } else {
                    EffectKind::TxRollback
                },
                if head == "commit" {
                    "commits"
                } else {
                    "rolls back"
                },
            );
            e.tx_on = Some(Box::new(recv_local));
            return Some(e);
        }
    }

    // SQL text.
    if let Some(sql) = cx.call_sql(call).filter(|s| s.kind != SqlKind::Other) {
        let executes = call
            .steps
            .iter()
            .any(|s| EXEC_STEPS.contains(&s.name.as_str()))
            || call.func_last().ends_with('!')
            || QUERY_FNS.contains(&call.func_last())
            // A crate helper handed the SQL text and awaited (`db.query_one(SQL_FIND, &[&id])`,
            // `DB::pg_execute("UPDATE ..", params)`): it runs that statement.
            || call.steps.len() <= 3 && call.awaited() && !cx.resolve(call, recv).is_empty()
            // A client's method handed the SQL text first and awaited, whatever it is called
            // (hiqlite's `client.query_as_one(sql, params!(id))`, mysql_async's
            // `conn.exec_first(sql, ..)`): it runs that statement.
            || sql_first_awaited(cx, call, recv);
        if executes {
            // A statement that only takes the lock; one that also reads or writes a table
            // (`.. WHERE pg_try_advisory_lock(id)`) keeps its own effect.
            if let Some(advisory) = sql.advisory.filter(|a| !a.unlock)
                && sql.tables.is_empty()
            {
                return Some(advisory_lock(advisory));
            }
            return Some(sql_eff(&sql, call, cx));
        }
    }

    // diesel: `diesel::update(..).set(..).filter(..).execute(conn)` & friends.
    let flast = call.func_last();
    if !call.func.is_empty()
        && DIESEL_WRITE_FNS.contains(&flast)
        && (call.func.len() == 1 || call.func[0] == "diesel")
        && call
            .steps
            .iter()
            .skip(1)
            .any(|s| DIESEL_STATEMENT_STEPS.contains(&s.name.as_str()))
    {
        // A statement built here and handed to another query (a CTE that adds its own
        // conditions and locks: `attach_with_condition(.., diesel::update(t).set(..))`) is run
        // there, under conditions not seen here.
        if !call
            .steps
            .iter()
            .any(|s| s.name.starts_with("execute") || s.name.starts_with("get_result"))
            && handed_on(cx, call)
        {
            return None;
        }
        // `let target = t::table.filter(t::id.eq(id)); diesel::delete(target)`: the query a
        // local was bound to names the table and the filter.
        let target = call.steps[0].args.first();
        let place = target.and_then(|a| a.paths.first());
        let bound = place
            .filter(|_| target.is_some_and(|a| a.ev.is_none()))
            .and_then(|p| bound_query(cx, p));
        let table = match bound.as_deref().and_then(|qs| qs.last()) {
            Some(q) => Some(diesel_table(cx, &Name::join(&q.recv, "."))),
            None => place.map(|p| model_table(cx, p).unwrap_or_else(|| diesel_table(cx, p))),
        };
        let mut where_cols = diesel_filter_cols(call);
        for q in bound.iter().flatten() {
            where_cols.extend(diesel_filter_cols(q));
        }
        for a in &call.steps[0].args {
            where_cols.extend(a.eq_cols().iter().cloned());
            // `update(orders.find(id))`: the key; `update(orders.filter(..))` built in place.
            if let Some(crate::ir::EventKind::Call(q)) =
                a.ev.and_then(|k| cx.body.events.get(k as usize))
                    .map(|e| &e.kind)
            {
                if q.steps.iter().any(|s| s.name == "find") {
                    where_cols.push(Name::new("id"));
                }
                where_cols.extend(diesel_filter_cols(q));
            }
        }
        let kind_word = match flast {
            "update" => "runs a diesel `update`",
            "delete" => "runs a diesel `delete`",
            _ => "runs a diesel insert",
        };
        // `.on_conflict_do_nothing()`, `.on_conflict(..).do_nothing()`, `insert_or_ignore_into`:
        // a claim, whose conflict is "nothing inserted".
        let do_nothing = flast == "insert_or_ignore_into"
            || flast == "insert_into"
                && call
                    .steps
                    .iter()
                    .any(|s| matches!(s.name.as_str(), "on_conflict_do_nothing" | "do_nothing"));
        let kind = if do_nothing {
            EffectKind::Claim
        } else {
            EffectKind::Write
        };
        let mut e = Effect::new(kind, kind_word).with_table(table.clone());
        let own = |c: &Name| is_own_key(c, table.as_deref());
        e.conditional = where_cols.iter().any(|c| !is_plain_key(c) && !own(c))
            && !keyed_exactly(cx, table.as_deref(), &where_cols);
        e.ident_guard = where_cols
            .iter()
            .any(|c| is_operation_identity(c) && !own(c));
        e.delete = flast == "delete";
        let token_table = table.as_deref().is_some_and(is_token_name);
        e.purge = e.delete && keyless_filter(cx, table.as_deref(), &where_cols, token_table);
        e.where_cols = where_cols.into();
        e.insert = flast.contains("insert") || flast.contains("replace");
        e.upsert = flast.contains("replace")
            || call
                .steps
                .iter()
                .any(|s| s.name.starts_with("on_conflict") || s.name == "on_duplicate_key_update");
        e.token = table.as_deref().is_some_and(is_token_name);
        // `update(orders::table)` with no filter is the whole table; `update(orders.find(id))`,
        // `update(&order)` pick rows.
        e.filtered = !e.where_cols.is_empty()
            || call.steps[0]
                .args
                .first()
                .is_some_and(|a| a.ev.is_some() || a.mut_borrow || !a.eq_cols().is_empty())
            || call.steps[0].args.first().is_some_and(|a| {
                a.paths
                    .first()
                    .is_some_and(|p| !p.ends_with("table") && !p.contains("::"))
            });
        e.sets = call
            .steps
            .iter()
            .filter(|s| DIESEL_SET_STEPS.contains(&s.name.as_str()))
            .flat_map(|s| &s.args)
            .flat_map(|a| a.eq_cols().iter().zip(a.eq_values()))
            .map(|(col, value)| Assigned {
                column: col.clone(),
                value: match value.as_deref().map(|v| v.strip_prefix(LOCAL_VALUE)) {
                    None => AssignedValue::Unknown,
                    _ if value.as_deref() == Some(RELATIVE_VALUE) => AssignedValue::Relative,
                    Some(Some(local)) => cx.param_value(local),
                    Some(None) => AssignedValue::Const(value.clone().unwrap_or_default()),
                },
            })
            .collect();
        if e.sets.is_empty() {
            e.sets = changeset_sets(cx, call).into();
        }
        // `.filter(started_at.is_null()).set(started_at.eq(Utc::now()))`: stamped where it was
        // `NULL`, and compared with nothing else.
        let nulls: Vec<&Name> = call
            .steps
            .iter()
            .filter(|s| DIESEL_FILTER_STEPS.contains(&s.name.as_str()))
            .flat_map(|s| &s.args)
            .flat_map(|a| a.eq_cols().iter().zip(a.eq_values()))
            .filter(|(_, v)| v.as_deref() == Some(NULL_VALUE))
            .map(|(c, _)| c)
            .collect();
        if let Some(k) = e.sets.iter().position(|a| {
            a.value.is_now()
                && nulls.contains(&&a.column)
                && e.where_cols.iter().filter(|c| **c == a.column).count() == 1
        }) {
            let mut sets = e.sets.to_vec();
            sets[..=k].rotate_right(1);
            e.sets = sets.into();
            e.set_null_claim(true);
        }
        // `insert_into(t).values(&x).on_conflict(..).do_update().set(&x)`: the `set` is what
        // the conflict writes over the row that is there.
        e.set_conflict_sets(
            e.upsert && !e.sets.is_empty() && call.steps.iter().any(|s| s.name == "do_update"),
        );
        return Some(e);
    }
    // diesel reads: `orders::table.find(id).first::<Order>(conn)`, `.load(conn)`, `.for_update()`.
    // The load may be followed by result adapters (`.get_result(conn).ok()`, `.optional()`).
    // diesel-async: the awaited step is the load, whatever error adapters follow it
    // (`.first(conn).await.attach(..)?`).
    let load = call.steps.iter().find(|s| s.awaited).or_else(|| {
        call.steps
            .iter()
            .rposition(|s| !RESULT_ADAPTER_STEPS.contains(&s.name.as_str()))
            .map(|i| &call.steps[i])
    });
    // `let query = i_dsl::invoice.filter(..).for_update(); .. query.first(conn)`: the local
    // names the query it was bound to, whose table, filter and lock are the load's.
    let loads = call.func.is_empty()
        && !call.recv.is_empty()
        && load.is_some_and(|s| DIESEL_READ_STEPS.contains(&s.name.as_str()) && s.args.len() == 1)
        && !matches!(recv, Class::Collection | Class::Channel)
        && (call.recv.len() == 1
            || call.recv.last().is_some_and(|p| p == "table")
            || call.recv.len() == 2 && dsl_module(cx, &call.recv[0]).is_some());
    let bound = match call.recv.as_slice() {
        [local] if loads => bound_query(cx, local),
        _ => None,
    };
    if loads && (call.steps.len() >= 2 || bound.is_some()) {
        let bound: &[&Call] = bound.as_deref().unwrap_or_default();
        let recv = bound.last().map_or(&call.recv, |q| &q.recv);
        let mut e = Effect::new(EffectKind::Read, "loads rows with diesel")
            .with_table(Some(diesel_table(cx, &Name::join(recv, "."))));
        e.token = e.table.as_deref().is_some_and(is_token_name);
        let mut where_cols = diesel_filter_cols(call);
        for q in bound {
            where_cols.extend(diesel_filter_cols(q));
        }
        e.where_cols = where_cols.into();
        e.locking = call
            .steps
            .iter()
            .chain(bound.iter().flat_map(|q| q.steps.iter()))
            .any(|s| DIESEL_ROW_LOCKS.contains(&s.name.as_str()));
        e.counts = counts_rows(call) || bound.iter().any(|q| counts_rows(q));
        e.set_ordered(orders_rows(call) || bound.iter().any(|q| orders_rows(q)));
        return Some(e);
    }

    // sea-orm, the select bound to a local first (`let mut query = order::Entity::find();`, maybe
    // narrowed after: `query = query.filter(..)`), then run (`query.all(db).await`).
    if let ([local], Some(run)) = (call.recv.as_slice(), call.steps.first())
        && call.func.is_empty()
        && SEA_ORM_READ_RUNS.contains(&run.name.as_str())
        && run.args.len() == 1
        && let Some((root, narrowed)) = bound_select(cx, local)
    {
        let flast = root.func_last();
        let mut calls = vec![root, call];
        calls.extend(narrowed);
        return Some(sea_orm_find(sea_orm_entity(cx, &root.func), flast, &calls));
    }
    // sea-orm: `Entity::find_by_id(id).one(db)`, `Entity::update_many()..exec(db)`, `model.update(db)`.
    if call.func.len() >= 2 {
        let entity = sea_orm_entity(cx, &call.func);
        let runs = |names: &[&str]| {
            call.steps
                .iter()
                .skip(1)
                .any(|s| names.contains(&s.name.as_str()))
        };
        if SEA_ORM_FIND_FNS.contains(&flast) && runs(SEA_ORM_READ_RUNS) {
            return Some(sea_orm_find(entity, flast, &[call]));
        }
        if SEA_ORM_WRITE_FNS.contains(&flast) && runs(SEA_ORM_EXEC_STEPS) {
            let mut where_cols = filter_cols(call, SEA_ORM_FILTER_STEPS);
            if flast == "delete_by_id" {
                where_cols.push("id".into());
            }
            // `Entity::insert(model).on_conflict(OnConflict::column(..).do_nothing())`: a claim.
            let do_nothing = flast.starts_with("insert")
                && call.steps.iter().flat_map(|s| &s.args).any(|a| {
                    a.ev.is_some_and(|ev| {
                        matches!(&cx.body.events.get(ev as usize).map(|e| &e.kind),
                            Some(crate::ir::EventKind::Call(c)) if c.has_step("do_nothing"))
                    })
                });
            let kind = if do_nothing {
                EffectKind::Claim
            } else {
                EffectKind::Write
            };
            let mut e = Effect::new(kind, format!("writes `{entity}` with sea-orm"))
                .with_table(Some(entity.clone()));
            e.insert = flast.starts_with("insert");
            // `Entity::insert(m).on_conflict(OnConflict::column(..).update_column(..))`.
            e.upsert = e.insert && runs(&["on_conflict"]);
            let own = |c: &Name| is_own_key(c, Some(entity.as_str()));
            e.conditional = where_cols.iter().any(|c| !is_plain_key(c) && !own(c))
                && !keyed_exactly(cx, Some(entity.as_str()), &where_cols);
            e.ident_guard = where_cols
                .iter()
                .any(|c| is_operation_identity(c) && !own(c));
            e.delete = flast.starts_with("delete");
            // A token row is picked by its token (`token_id`, `code`): that is its key.
            let token_table = is_token_name(&entity);
            e.purge =
                e.delete && keyless_filter(cx, Some(entity.as_str()), &where_cols, token_table);
            e.filtered = !where_cols.is_empty();
            e.where_cols = where_cols.into();
            e.token = is_token_name(&entity);
            e.sets = call
                .steps
                .iter()
                .filter(|s| SEA_ORM_SET_STEPS.contains(&s.name.as_str()))
                .filter_map(|s| {
                    let column = s.args.first()?.value()?;
                    Some(Assigned {
                        column: column_name(column),
                        value: s
                            .args
                            .get(1)
                            .and_then(|a| a.value())
                            .map_or(AssignedValue::Unknown, |v| AssignedValue::Const(v.clone())),
                    })
                })
                .collect();
            // `Entity::insert(model)`: what the model was given.
            if e.insert
                && e.sets.is_empty()
                && let Some(model) = call.steps[0].args.first().and_then(|a| a.paths.first())
                && let Some(sets) = cx.model_sets.get(model)
            {
                e.sets = sets.clone().into();
            }
            return Some(e);
        }
    }
    // sea-orm active models: `order.update(db).await`, `.insert(db)`, `.save(db)`, `.delete(db)`.
    // (`.await.map_err(..)?` and the other result adapters may follow.)
    if call.func.is_empty()
        && ACTIVE_MODEL_STEPS.contains(&head)
        && call
            .steps
            .iter()
            .skip(1)
            .all(|s| RESULT_ADAPTER_STEPS.contains(&s.name.as_str()))
        && call.steps[0].args.len() == 1
        // A method of the crate's own (a row type's `insert(conn)`) is followed, not guessed.
        && cx.resolve(call, recv).is_empty()
        && call.steps[0].awaited
        && (!matches!(
            recv,
            Class::Collection
                | Class::Channel
                | Class::Redis
                | Class::Http
                | Class::User(_)
                | Class::Trait(_)
        ) || own_active_model(cx, call, recv)
            || saved_model(cx, call, recv))
    {
        // The model's table: from its module (`order::ActiveModel`), or the row it was made
        // from (`row.into_active_model()`, a model read and saved back whole); in a method of
        // `impl users::ActiveModel`, the module the impl sits in (`models/users.rs`).
        let table = call.recv.first().and_then(|r| {
            cx.local_modules
                .get(r)
                .map(|m| normalize_table(m))
                .or_else(|| cx.read_tables.get(r).cloned())
                .or_else(|| {
                    own_active_model(cx, call, recv)
                        .then(|| file_module(cx.facts.paths[cx.file as usize]))
                        .flatten()
                        .map(|m| normalize_table(&m))
                })
                .or_else(|| match recv {
                    // A crate row type saved through a generated method: its diesel table, or
                    // the type's own name.
                    Class::User(ty) => Some(row_table(cx.facts, ty)),
                    _ => None,
                })
        });
        // A bare `ActiveModel` (built in place, or bound to a local) in the file that declares
        // its entity module: that model's table.
        let table = table.or_else(|| {
            cx.facts
                .file_model_table(cx.file)
                .map(|t| normalize_table(t))
        });
        let mut e = Effect::new(
            EffectKind::Write,
            format!("runs `{head}` on an active model"),
        )
        .with_table(table);
        e.insert = head == "insert";
        e.delete = head == "delete";
        // A model of a token table deleted (`invite.delete(db)`): the token consumed.
        e.token = e.table.as_deref().is_some_and(is_token_name);
        e.sets = call
            .recv
            .first()
            .and_then(|r| cx.model_sets.get(r))
            .cloned()
            .unwrap_or_default()
            .into();
        return Some(e);
    }
    None
}

/// The table a sea-orm entity path names (`order::Entity::find`, an aliased `PrtEntity`, a bare
/// `Entity` of the file's own entity module).
fn sea_orm_entity(cx: &Classifier<'_>, func: &[Name]) -> Name {
    let head = &func[func.len() - 2];
    // `use entities::password_reset_tokens::Entity as PrtEntity;`: the alias names the
    // entity module's `Entity`, and that module is the table.
    let aliased = (func.len() == 2)
        .then(|| cx.facts.resolve(cx.file, head))
        .filter(|full| full.as_str() != head.as_str())
        .and_then(|full| {
            full.as_str()
                .strip_suffix("::Entity")
                .and_then(|m| m.rsplit("::").next())
                .filter(|m| !m.is_empty())
                .map(table_of)
        });
    let entity = aliased.unwrap_or_else(|| table_of(head));
    if entity == "entity" && func.len() >= 3 {
        table_of(&func[func.len() - 3])
    } else if entity == "entity" && func.len() == 2 {
        // A bare `Entity` of the file's own entity module: that model's table.
        cx.facts
            .file_model_table(cx.file)
            .map_or(entity, |t| normalize_table(t))
    } else {
        entity
    }
}

/// A sea-orm select run (`Entity::find_by_id(id).lock_exclusive().one(db)`), from the calls that
/// built it: its filter columns, lock, count and order.
fn sea_orm_find(entity: Name, find: &str, calls: &[&Call]) -> Effect {
    let e_token_read = is_token_name(&entity);
    let mut e = Effect::new(EffectKind::Read, format!("reads `{entity}` with sea-orm"))
        .with_table(Some(entity));
    // The columns its `.filter(Column::X.eq(..))` steps compare; `find_by_id`: the key.
    let mut where_cols: Vec<Name> = calls
        .iter()
        .flat_map(|c| filter_cols(c, SEA_ORM_FILTER_STEPS))
        .collect();
    if find == "find_by_id" {
        where_cols.push("id".into());
    }
    // Found by a token column (`Column::ResetToken.eq(token)`): a token read.
    e.token = e_token_read || where_cols.iter().any(|c| is_token_name(c));
    e.where_cols = where_cols.into();
    e.locking = calls
        .iter()
        .flat_map(|c| c.steps.iter())
        .any(|s| SEA_ORM_ROW_LOCKS.contains(&s.name.as_str()));
    e.counts = calls.iter().any(|c| counts_rows(c));
    e.set_ordered(calls.iter().any(|c| orders_rows(c)));
    e
}

/// The sea-orm select a plain local was last bound to (`let query = order::Entity::find()..`),
/// and the calls made on the local from that binding on (`query = query.filter(..)`, the run).
fn bound_select<'b>(cx: &Classifier<'b>, local: &str) -> Option<(&'b Call, Vec<&'b Call>)> {
    let events = &cx.body.events;
    let (at, root) = last_binding(events, local, events.len(), |q| {
        q.func.len() >= 2 && SEA_ORM_FIND_FNS.contains(&q.func_last())
    })?;
    Some((root, calls_on(events, local, at).collect()))
}

/// The last binding of `local` before event `before` to a call that `fits` (`let query =
/// t::table.filter(..)`): the binding's index and the call.
fn last_binding<'b>(
    events: &'b [crate::ir::Event],
    local: &str,
    before: usize,
    fits: impl Fn(&Call) -> bool,
) -> Option<(usize, &'b Call)> {
    events[..before]
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| {
            let crate::ir::EventKind::Bind(b) = &e.kind else {
                return None;
            };
            if b.names.len() != 1 || b.names[0] != *local {
                return None;
            }
            match &events.get(*b.calls.last()? as usize)?.kind {
                crate::ir::EventKind::Call(q) if fits(q) => Some((i, &**q)),
                _ => None,
            }
        })
}

/// The calls made on `local` itself from event `from` on (`query = query.filter(..)`, the run
/// `query.first(conn)`).
fn calls_on<'b, 'l>(
    events: &'b [crate::ir::Event],
    local: &'l str,
    from: usize,
) -> impl Iterator<Item = &'b Call> + use<'b, 'l> {
    events[from..].iter().filter_map(move |e| match &e.kind {
        crate::ir::EventKind::Call(q)
            if q.func.is_empty() && q.recv.len() == 1 && q.recv[0] == *local =>
        {
            Some(&**q)
        }
        _ => None,
    })
}

/// `self.update(db)` in a method of `impl users::ActiveModel` (sea-orm's generated model type,
/// which the crate extends with its own methods): the model saves itself.
fn own_active_model(cx: &Classifier<'_>, call: &Call, recv: &Class) -> bool {
    matches!(recv, Class::User(t) if t == "ActiveModel")
        && call.recv.len() == 1
        && call.recv[0] == "self"
        && cx.body.self_ty.as_deref() == Some("ActiveModel")
}

/// `.count()` among the steps of an ORM read (diesel's `.count().get_result(conn)`, sea-orm's
/// `.count(db)`), or `count_star()` / `count(..)` selected: the read counts rows.
/// diesel's `.order(..)` / `.then_order_by(..)`, sea-orm's `.order_by_desc(..)` and the like.
fn orders_rows(call: &Call) -> bool {
    call.steps.iter().any(|s| {
        matches!(s.name.as_str(), "order" | "then_order_by") || s.name.starts_with("order_by")
    })
}

fn counts_rows(call: &Call) -> bool {
    call.steps.iter().any(|s| {
        s.name == "count"
            || s.name == "select"
                && s.args.iter().flat_map(|a| a.paths.iter()).any(|p| {
                    p.rsplit(['.', ':'])
                        .next()
                        .is_some_and(|l| matches!(l, "count_star" | "count" | "sum"))
                })
    })
}

/// `self.status = new_status; self.update(db).await` (or the same on a row the body read or
/// was handed) where the crate defines no such method: a derive or an attribute macro
/// generates the save (sqlx-crud, a crate's own `#[db]` macro). The receiver is a crate type
/// whose fields the body assigned (all of them fields of the type, when the crate declares it)
/// and the one argument a database handle (a pool, a connection, or a crate struct that holds
/// one): the save writes the row with those fields.
fn saved_model(cx: &Classifier<'_>, call: &Call, recv: &Class) -> bool {
    let (Class::User(ty), [root]) = (recv, call.recv.as_slice()) else {
        return false;
    };
    if !matches!(call.head(), "update" | "save") {
        return false;
    }
    // A row that exists: `self`, one the body read, or one handed in. A value the body built
    // (`Rule::default()`, a literal) is saved as a new row.
    if *root != "self"
        && !cx.read_tables.contains_key(root)
        && !cx.body.params.iter().any(|(p, _)| p == root)
    {
        return false;
    }
    let Some(sets) = cx.model_sets.get(root).filter(|s| !s.is_empty()) else {
        return false;
    };
    let own_fields = cx.facts.structs.get(ty.as_str()).is_none_or(|fields| {
        sets.iter()
            .all(|a| fields.iter().any(|(f, _)| *f == a.column))
    });
    let handle = call.steps[0]
        .args
        .first()
        .and_then(|a| a.paths.first())
        .is_some_and(|p| {
            let parts: Vec<Name> = p.split('.').map(Name::new).collect();
            cx.place_class(&parts).is_some_and(|c| db_handle(cx, &c, 2))
        });
    own_fields && handle
}

/// A pool, a connection, or a crate struct that holds one in a field (`Database { pool: Db }`,
/// `struct Db(bb8::Pool<..>)`), `depth` structs deep.
fn db_handle(cx: &Classifier<'_>, class: &Class, depth: u8) -> bool {
    match class {
        Class::Db | Class::DbTx => true,
        Class::User(holder) if depth > 0 => {
            cx.facts.structs.get(holder.as_str()).is_some_and(|fields| {
                fields.iter().any(|(_, t)| {
                    let inner = super::types::class_of(t, cx.facts, cx.file, cx.memo);
                    !matches!(&inner, Class::User(n) if n == holder)
                        && db_handle(cx, &inner, depth - 1)
                })
            })
        }
        _ => false,
    }
}

/// The module a file is (`src/models/users.rs` is `users`; a `mod.rs` is its folder's).
fn file_module(path: &str) -> Option<Name> {
    let mut parts = path.rsplit(['/', '\\']);
    let file = parts.next()?.strip_suffix(".rs")?;
    let m = if file == "mod" { parts.next()? } else { file };
    (!matches!(m, "lib" | "main")).then(|| Name::new(m))
}

/// A column named by a path (`Column::Status`, `orders::status`): its last segment in
/// snake_case.
pub fn column_name(path: &str) -> Name {
    let last = path.rsplit(':').next().unwrap_or(path);
    let mut s = String::with_capacity(last.len() + 4);
    for (i, c) in last.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_lowercase());
    }
    Name::from(s)
}

/// The table a diesel statement names: through a `use .. ::invoice::dsl as i_dsl` alias
/// (`i_dsl::invoice`, `i_dsl.invoice`, `update(i_dsl::invoice)`), the table of that `dsl`
/// module; otherwise [`table_of`].
fn diesel_table(cx: &Classifier<'_>, path: &str) -> Name {
    let head = path
        .split(['.', ':'])
        .find(|s| !s.is_empty())
        .unwrap_or(path);
    match dsl_module(cx, head) {
        Some(table) => table,
        None => table_of(path),
    }
}

/// What a diesel `.set(&form)` writes when it is handed a value, not column assignments: the
/// fields a struct literal gave the local (`let form = PostForm { removed: Some(true), ..
/// Default::default() }`) but those left `None`, or else the fields of the crate struct the
/// local is typed as (an `AsChangeset` model: `let pr: PullRequest = ..`) that it always writes:
/// not its key columns, and not its `Option` fields, which diesel skips when they are `None`.
fn changeset_sets(cx: &Classifier<'_>, call: &Call) -> Vec<Assigned> {
    let Some(local) = call
        .steps
        .iter()
        .filter(|s| DIESEL_SET_STEPS.contains(&s.name.as_str()))
        .find_map(|s| match s.args.as_slice() {
            [a] if a.ev.is_none() && a.paths.len() == 1 && !a.paths[0].contains(['.', ':']) => {
                Some(&a.paths[0])
            }
            _ => None,
        })
    else {
        return Vec::new();
    };
    // A field left `None` in a changeset is not written: diesel skips it (`Some(None)`, which
    // clears the column, reads the same and is dropped too).
    if let Some(sets) = cx.model_sets.get(local).filter(|s| !s.is_empty()) {
        return sets
            .iter()
            .filter(|a| !matches!(&a.value, AssignedValue::Const(v) if v == "None" || v == "null"))
            .cloned()
            .collect();
    }
    let Some(Class::User(ty)) = cx.place_class(std::slice::from_ref(local)) else {
        return Vec::new();
    };
    cx.facts
        .structs
        .get(ty.as_str())
        .copied()
        .unwrap_or_default()
        .iter()
        // An `Option` field is written only when it is `Some`, which the value decides.
        .filter(|(field, ty)| {
            !field.starts_with('#')
                && !is_plain_key(field)
                && ty
                    .first()
                    .is_none_or(|t| t.rsplit("::").next() != Some("Option"))
        })
        .map(|(field, _)| Assigned {
            column: field.clone(),
            value: AssignedValue::Unknown,
        })
        .collect()
}

/// Is the SQL text the first argument of a method step that is awaited (at once, or after the
/// statement's builder steps), on a receiver that is no HTTP, gRPC, AWS, broker, Redis or
/// channel client?
fn sql_first_awaited(cx: &Classifier<'_>, call: &Call, recv: &Class) -> bool {
    if matches!(
        recv,
        Class::Http | Class::Grpc | Class::Aws | Class::Broker | Class::Redis | Class::Channel
    ) || call.recv.is_empty()
    {
        return false;
    }
    let Some(i) = call.steps.iter().position(|s| {
        s.args.first().is_some_and(|a| {
            a.sql().is_some() || matches!(a.paths.as_slice(), [p] if cx.sql_locals.contains_key(p))
        })
    }) else {
        return false;
    };
    // Awaited at once, or after the builder steps of the same statement
    // (`client.query(sql).fetch_all().await`).
    call.steps[i..].iter().take(3).any(|s| s.awaited)
}

/// Does a delete's filter name no row by its key: it has columns, none is a plain key (`id`,
/// `order_id`; on a token table, a token column), and they hold no unique key the schema
/// declares (`WHERE expires_at < now()`)? Then it is housekeeping over many rows, a purge, not
/// the consumption of one.
fn keyless_filter(
    cx: &Classifier<'_>,
    table: Option<&str>,
    cols: &[Name],
    token_table: bool,
) -> bool {
    !cols.is_empty()
        && !cols
            .iter()
            .any(|c| is_plain_key(c) || token_table && is_token_name(c))
        && !keyed_by_schema(cx, table, cols)
}

/// Do the filter's columns hold a whole unique key (a primary key) that the project's schema
/// files declare for the table (`DELETE FROM email_tokens WHERE did = $1 AND purpose = $2`
/// under `PRIMARY KEY (purpose, did)`)? Then the statement picks one row by its key, whatever
/// the columns are called: no purge.
fn keyed_by_schema(cx: &Classifier<'_>, table: Option<&str>, cols: &[Name]) -> bool {
    table.is_some_and(|t| cx.facts.duplicates_allowed(&normalize_table(t), cols) == Some(false))
}

/// Does the filter hold exactly one unique key the schema files declare for the table, and
/// nothing else? It then tests no more than the key, whatever its columns are called.
fn keyed_exactly(cx: &Classifier<'_>, table: Option<&str>, cols: &[Name]) -> bool {
    table.is_some_and(|t| cx.facts.is_declared_key(&normalize_table(t), cols))
}

/// The query a plain local holds, when the body bound it to a diesel table's query (`let target
/// = invites::table.filter(invites::code.eq(code))`, also through the table's `dsl` module),
/// perhaps in steps (`let query = t::table.find(id); let query = query.for_update();`, or
/// `query = query.filter(..)` after the binding): every call that built it, the table's own
/// query last.
fn bound_query<'b>(cx: &Classifier<'b>, local: &str) -> Option<Vec<&'b Call>> {
    if local.contains(['.', ':']) {
        return None;
    }
    let events = &cx.body.events;
    let mut chain: Vec<&Call> = Vec::new();
    let (mut name, mut before) = (local, events.len());
    // A few rebindings at most (`let query = query.filter(..)`).
    for _ in 0..4 {
        let (at, q) = last_binding(events, name, before, |q| {
            q.func.is_empty() && !q.steps.is_empty()
        })?;
        chain.push(q);
        if chain.len() == 1 {
            // Narrowed after its binding (`query = query.filter(..)` in a branch, `query =
            // query.for_update()` for one backend).
            chain.extend(calls_on(events, local, at));
            // The binding's own call first, the narrowing after: the table's query stays last.
            chain.rotate_left(1);
        }
        // `invites::table`, or the table through its `dsl` module
        // (`upload_tokens::dsl::upload_tokens`, `i_dsl::invoice` after `use
        // schema::invoice::dsl as i_dsl`).
        if q.recv.last().is_some_and(|r| r == "table")
            || q.recv.len() >= 2 && q.recv.iter().any(|r| r == "dsl")
            || q.recv.len() == 2 && dsl_module(cx, &q.recv[0]).is_some()
        {
            return Some(chain);
        }
        match q.recv.as_slice() {
            [earlier] if !earlier.contains(['.', ':']) => (name, before) = (earlier, at),
            _ => return None,
        }
    }
    None
}

/// The table of a diesel model value (`diesel::delete(&self)`, `diesel::update(&invite)`):
/// the `#[diesel(table_name = ..)]` of its struct.
fn model_table(cx: &Classifier<'_>, place: &str) -> Option<Name> {
    let parts: Vec<Name> = place.split('.').map(Name::new).collect();
    let Some(Class::User(ty)) = cx.place_class(&parts) else {
        return None;
    };
    let table = cx.facts.field_type(&ty, DIESEL_TABLE_FIELD)?.first()?;
    Some(normalize_table(table))
}

/// The table whose `dsl` module `local` stands for (`use crate::schema::invoice::dsl as
/// i_dsl` makes `i_dsl` the `invoice` table's).
fn dsl_module(cx: &Classifier<'_>, local: &str) -> Option<Name> {
    let full = cx.facts.resolve(cx.file, local);
    let mut parts = full.rsplit("::");
    (parts.next() == Some("dsl"))
        .then(|| parts.next())
        .flatten()
        .filter(|t| !t.is_empty() && *t != "schema" && *t != "crate")
        .map(normalize_table)
}

/// The table a crate row type is stored in: its diesel `table_name`, or the type's own name.
pub fn row_table(facts: &crate::facts::Facts<'_>, ty: &str) -> Name {
    facts
        .field_type(ty, DIESEL_TABLE_FIELD)
        .and_then(|t| t.first())
        .map_or_else(|| normalize_table(ty), |t| normalize_table(t))
}

/// `orders::table` / `Orders` / `order::Entity` to a comparable table name.
pub fn table_of(path: &str) -> Name {
    // The module paths diesel's generated schema sits under are not the table
    // (`schema::orders::table`, `dsl::orders`).
    let first = path
        .split(['.', ':'])
        .find(|s| !s.is_empty() && !matches!(*s, "crate" | "schema" | "dsl"))
        .unwrap_or(path);
    normalize_table(first)
}

pub fn normalize_table(t: &str) -> Name {
    // One buffer, cut in place (this runs for every database call classified).
    let mut s = String::with_capacity(t.len() + 4);
    for (i, c) in t.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_lowercase());
    }
    if s.ends_with("_entity") {
        s.truncate(s.len() - "_entity".len());
    }
    if let Some(x) = s.strip_suffix("es")
        && (x.ends_with("ss") || x.ends_with("sh") || x.ends_with("ch"))
    {
        s.truncate(s.len() - 2);
    }
    if s.ends_with('s') {
        s.pop();
    }
    Name::from(s)
}

/// `SELECT pg_advisory_lock($1)`: a lock held by the database session. A session lock outlives
/// transactions and is lost with the connection: a lease.
fn advisory_lock(advisory: Advisory) -> Effect {
    let mut e = if advisory.session {
        Effect::new(EffectKind::Lock, "takes a session advisory lock")
    } else {
        Effect::new(EffectKind::Lock, "takes a transaction advisory lock")
    };
    e.lease = advisory.session;
    e.attempt = advisory.attempt;
    e.sql = Some(SqlKind::Select);
    e
}

fn sql_eff(sql: &SqlInfo, call: &Call, cx: &Classifier<'_>) -> Effect {
    let table = sql.table().map(normalize_table);
    let verb = match sql.kind {
        SqlKind::Select => "SELECT",
        SqlKind::Update => "UPDATE",
        SqlKind::Insert => "INSERT",
        SqlKind::Delete => "DELETE",
        SqlKind::Begin => "BEGIN",
        SqlKind::Commit => "COMMIT",
        SqlKind::Rollback => "ROLLBACK",
        SqlKind::Other => "SQL",
    };
    let what = match sql.table() {
        Some(t) => format!("runs `{verb}` on `{t}`"),
        None => format!("runs `{verb}`"),
    };
    let kind = match sql.kind {
        SqlKind::Select => EffectKind::Read,
        SqlKind::Update | SqlKind::Delete => EffectKind::Write,
        SqlKind::Insert => {
            if sql.on_conflict_nothing {
                EffectKind::Claim
            } else {
                EffectKind::Write
            }
        }
        SqlKind::Begin => EffectKind::TxBegin,
        SqlKind::Commit => EffectKind::TxCommit,
        SqlKind::Rollback => EffectKind::TxRollback,
        SqlKind::Other => EffectKind::Write,
    };
    let mut e = Effect::new(kind, what).with_table(table);
    e.sql = Some(sql.kind);
    // `INSERT INTO job_locks .. ON CONFLICT DO NOTHING`: a lock row claimed.
    e.lock_claim = kind == EffectKind::Claim && sql.table().is_some_and(|t| t.contains("lock"));
    e.locking = sql.locking;
    e.set_writes_in_cte(kind == EffectKind::Read && sql.cte_writes);
    e.counts = sql.counts;
    e.set_ordered(sql.ordered);
    e.conditional = sql.is_conditional() && !keyed_exactly(cx, sql.table(), &sql.where_cols);
    e.ident_guard = sql
        .where_cols
        .iter()
        .any(|c| is_operation_identity(c) && !is_own_key(c, sql.table()));
    e.delete = sql.kind == SqlKind::Delete;
    // Filtered on no key (`WHERE expires_at < now()`), or not filtered at all (a table wipe in
    // a migration or a reset): housekeeping, not the consumption of one token.
    // The rows an `UPDATE` or `DELETE` changes are its target's: a table its subquery reads
    // (`DELETE FROM users WHERE id IN (SELECT user_id FROM magic_links ..)`) is not consumed.
    let token_table = if matches!(sql.kind, SqlKind::Update | SqlKind::Delete) {
        sql.table().is_some_and(is_token_name)
    } else {
        sql.tables.iter().any(|t| is_token_name(t))
    };
    e.purge = e.delete
        && (!sql.filtered || keyless_filter(cx, sql.table(), &sql.where_cols, token_table));
    e.insert = sql.kind == SqlKind::Insert;
    e.upsert = sql.upsert;
    e.where_cols = sql.where_cols.clone().into();
    e.token = token_table
        || sql.kind != SqlKind::Insert && sql.where_cols.iter().any(|c| is_token_name(c));
    let mut sets = cx.sql_assignments(sql, call);
    // The claimed column first (see `Effect::picked_claim`).
    if let Some(col) = &sql.picked_claim
        && let Some(k) = sets.iter().position(|a| a.column == *col)
    {
        sets[..=k].rotate_right(1);
        e.set_picked_claim(true);
    }
    // The stamped column first (see `Effect::null_claim`).
    if let Some(col) = &sql.null_claim
        && let Some(k) = sets.iter().position(|a| a.column == *col)
    {
        sets[..=k].rotate_right(1);
        e.set_null_claim(true);
    }
    e.sets = sets.into();
    e.filtered = sql.filtered;
    // `WITH picked AS (SELECT .. WHERE status = .. FOR UPDATE) UPDATE ..`: the rows written are
    // the ones the locking query picked, by its filter.
    if kind == EffectKind::Write && sql.locking && !sql.cte_where_cols.is_empty() {
        let mut cols = e.where_cols.to_vec();
        cols.extend(sql.cte_where_cols.iter().cloned());
        e.where_cols = cols.into();
    }
    if takes_lease_row(&e) {
        e.kind = EffectKind::Claim;
        e.lease = true;
        e.attempt = true;
        e.what = format!(
            "takes the lease kept in `{}`",
            sql.table().unwrap_or("a table")
        )
        .into();
    }
    e
}

/// `UPDATE leader SET holder = $1, expires_at = now() + '10s' WHERE name = $2 AND (expires_at
/// < now() OR holder = $1)`: a lease kept in a row (a leader election, a named lock), taken by
/// writing an owner and an expiry where the last holder's expiry has passed. Whoever the update
/// matched holds it until that expiry, and no longer. Rows of a work table (jobs, tasks) are
/// work items claimed, judged as such.
fn takes_lease_row(e: &Effect) -> bool {
    e.sql == Some(SqlKind::Update)
        && e.table.as_deref().is_some_and(|t| !is_work(t))
        && e.sets.iter().any(|a| is_owner_column(&a.column))
        && e.sets.iter().any(|a| is_expiry_column(&a.column))
        && e.where_cols.iter().any(|c| is_expiry_column(c))
}

/// The columns a diesel chain's `.filter(..)` steps compare (`.filter(status.eq(..))`).
fn diesel_filter_cols(call: &Call) -> Vec<Name> {
    filter_cols(call, DIESEL_FILTER_STEPS)
}

/// The columns compared (`.eq(..)` & co.) in the arguments of a chain's filter steps.
fn filter_cols(call: &Call, filter_steps: &[&str]) -> Vec<Name> {
    call.steps
        .iter()
        .filter(|s| filter_steps.contains(&s.name.as_str()))
        .flat_map(|s| &s.args)
        .flat_map(|a| a.eq_cols().iter().cloned())
        .collect()
}

/// Whether call `call` of the body is an argument of another call.
fn handed_on(cx: &Classifier<'_>, call: &Call) -> bool {
    let Some(at) =
        cx.body.events.iter().position(
            |e| matches!(&e.kind, crate::ir::EventKind::Call(c) if std::ptr::eq(&**c, call)),
        )
    else {
        return false;
    };
    cx.body.events.iter().any(|e| {
        matches!(&e.kind, crate::ir::EventKind::Call(c)
            if c.all_args().any(|a| a.ev == Some(at as u32)))
    })
}

#[cfg(test)]
mod tests {
    use super::normalize_table;

    #[test]
    fn table_names_are_snake_case_and_singular() {
        for (written, table) in [
            ("Orders", "order"),
            ("OrderEntity", "order"),
            ("order_items", "order_item"),
            ("Matches", "match"),
            ("Wishes", "wish"),
            ("seat", "seat"),
            ("Boxes", "boxe"),
        ] {
            assert_eq!(normalize_table(written).as_str(), table, "{written}");
        }
    }
}
