//! Databases: transactions (begin / commit / rollback / closures) and reads and writes through
//! sqlx, tokio-postgres, deadpool / bb8 connections (by SQL text), diesel and sea-orm builders.

use super::names::{is_operation_identity, is_token_name};
use super::{Class, Cx};
use crate::effects::{Effect, EffectKind};
use crate::ir::Call;
use crate::name::Name;
use crate::sql::{SqlInfo, SqlKind, is_plain_key};

const EXEC_STEPS: &[&str] = &[
    "execute",
    "fetch",
    "fetch_one",
    "fetch_optional",
    "fetch_all",
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "execute_raw",
    "batch_execute",
    "simple_query",
    "exec",
    "one",
    "all",
    "get_result",
    "get_results",
    "load",
    "first",
    "fetch_many",
    "query_typed",
    "prepare",
    "prepare_cached",
    "exec_with_returning",
    "query_row",
];

fn db_recv(recv: &Class) -> bool {
    matches!(recv, Class::Db | Class::DbTx)
}

pub(super) fn classify(cx: &Cx<'_>, call: &Call, recv: &Class, _resolved: &str) -> Option<Effect> {
    let head = call.head();
    let last = call.last().map(|s| s.name.as_str()).unwrap_or("");
    let recv_local = Name::join(&call.recv, ".");

    // Transaction control.
    if call.func.is_empty() {
        if let Some(s) = call.steps.iter().find(|s| {
            matches!(
                s.name.as_str(),
                "transaction" | "transaction_with" | "in_transaction" | "run" | "transaction_async"
            )
        }) && s.args.iter().any(|a| a.closure)
            && (s.name != "run" || call.has_step("build_transaction"))
            && !matches!(recv, Class::Redis | Class::Http | Class::Channel)
        {
            return Some(Effect::new(
                EffectKind::TxClosure,
                "runs a transaction closure",
            ));
        }
        let begin = call.steps.iter().any(|s| {
            matches!(
                s.name.as_str(),
                "begin"
                    | "begin_with"
                    | "start_transaction"
                    | "begin_transaction"
                    | "begin_immediate"
            ) || (s.name == "transaction" && s.args.is_empty())
                || (s.name == "start" && call.has_step("build_transaction"))
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
            && matches!(head, "commit" | "rollback")
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
            e.tx_local = Some(recv_local);
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
            || matches!(
                call.func_last(),
                "query"
                    | "query_as"
                    | "query_scalar"
                    | "query_with"
                    | "query_as_with"
                    | "query_scalar_with"
            );
        if executes {
            return Some(sql_eff(&sql, call));
        }
    }

    // diesel: `diesel::update(..).set(..).filter(..).execute(conn)` & friends.
    let flast = call.func_last();
    if !call.func.is_empty()
        && matches!(
            flast,
            "update" | "insert_into" | "delete" | "replace_into" | "insert_or_ignore_into"
        )
        && (call.func.len() == 1 || call.func[0] == "diesel")
        && call.steps.iter().skip(1).any(|s| {
            matches!(
                s.name.as_str(),
                "execute" | "get_result" | "get_results" | "returning" | "set" | "values"
            )
        })
    {
        let table = call.steps[0]
            .args
            .first()
            .and_then(|a| a.paths.first())
            .map(|p| table_of(p));
        let mut where_cols: Vec<Name> = Vec::new();
        for s in &call.steps {
            if matches!(s.name.as_str(), "filter" | "or_filter") {
                for a in &s.args {
                    where_cols.extend(a.eq_cols().iter().cloned());
                }
            }
        }
        for a in &call.steps[0].args {
            where_cols.extend(a.eq_cols().iter().cloned());
            if a.calls().is_empty() && !a.paths.is_empty() {
                // `update(orders.find(id))`: the key.
            }
        }
        let kind_word = match flast {
            "update" => "runs a diesel `update`",
            "delete" => "runs a diesel `delete`",
            _ => "runs a diesel insert",
        };
        let mut e = Effect::new(EffectKind::Write, kind_word).with_table(table.clone());
        e.conditional = where_cols.iter().any(|c| !is_plain_key(c));
        e.ident_guard = where_cols.iter().any(|c| is_operation_identity(c));
        e.delete = flast == "delete";
        e.purge = e.delete && !where_cols.is_empty() && !where_cols.iter().any(|c| is_plain_key(c));
        e.where_cols = where_cols.into();
        e.insert = flast.contains("insert") || flast.contains("replace");
        e.token = table.as_deref().is_some_and(is_token_name);
        return Some(e);
    }
    // diesel reads: `orders::table.find(id).first::<Order>(conn)`, `.load(conn)`, `.for_update()`.
    if call.func.is_empty()
        && !call.recv.is_empty()
        && matches!(
            last,
            "first" | "load" | "get_result" | "get_results" | "load_iter"
        )
        && call.last().is_some_and(|s| s.args.len() == 1)
        && !matches!(recv, Class::Collection | Class::Channel)
        && (call.recv.len() == 1 || call.recv.last().is_some_and(|p| p == "table"))
        && call.steps.len() >= 2
    {
        let mut e = Effect::new(EffectKind::Read, "loads rows with diesel")
            .with_table(Some(table_of(&call.recv[0])));
        e.token = e.table.as_deref().is_some_and(is_token_name);
        e.locking = call.steps.iter().any(|s| {
            matches!(
                s.name.as_str(),
                "for_update" | "for_no_key_update" | "for_share"
            )
        });
        return Some(e);
    }

    // sea-orm: `Entity::find_by_id(id).one(db)`, `Entity::update_many()..exec(db)`, `model.update(db)`.
    if call.func.len() >= 2 {
        let entity = table_of(&call.func[call.func.len() - 2]);
        let entity = if entity == "entity" && call.func.len() >= 3 {
            table_of(&call.func[call.func.len() - 3])
        } else {
            entity
        };
        let runs = |names: &[&str]| {
            call.steps
                .iter()
                .skip(1)
                .any(|s| names.contains(&s.name.as_str()))
        };
        match flast {
            "find" | "find_by_id" | "find_related"
                if runs(&["one", "all", "stream", "count", "paginate"]) =>
            {
                let e_token_read = is_token_name(&entity);
                let mut e = Effect::new(EffectKind::Read, format!("reads `{entity}` with sea-orm"))
                    .with_table(Some(entity));
                e.token = e_token_read;
                e.locking = call.steps.iter().any(|s| {
                    matches!(
                        s.name.as_str(),
                        "lock_exclusive" | "lock_shared" | "lock" | "lock_with_behavior"
                    )
                });
                return Some(e);
            }
            "update_many" | "update" | "delete_many" | "delete_by_id" | "delete" | "insert"
            | "insert_many"
                if runs(&["exec", "exec_with_returning", "exec_without_returning"]) =>
            {
                let mut where_cols = Vec::new();
                for s in &call.steps {
                    if s.name == "filter" {
                        for a in &s.args {
                            where_cols.extend(a.eq_cols().iter().cloned());
                        }
                    }
                }
                if matches!(flast, "delete_by_id") {
                    where_cols.push("id".into());
                }
                let mut e =
                    Effect::new(EffectKind::Write, format!("writes `{entity}` with sea-orm"))
                        .with_table(Some(entity.clone()));
                e.conditional = where_cols.iter().any(|c| !is_plain_key(c));
                e.ident_guard = where_cols.iter().any(|c| is_operation_identity(c));
                e.delete = flast.starts_with("delete");
                e.purge = e.delete
                    && !where_cols.is_empty()
                    && !where_cols.iter().any(|c| is_plain_key(c));
                e.where_cols = where_cols.into();
                e.token = is_token_name(&entity);
                return Some(e);
            }
            _ => {}
        }
    }
    // sea-orm active models: `order.update(db).await`, `.insert(db)`, `.save(db)`, `.delete(db)`.
    if call.func.is_empty()
        && call.steps.len() == 1
        && matches!(head, "update" | "insert" | "save" | "delete")
        && call.steps[0].args.len() == 1
        && call.steps[0].awaited
        && !matches!(
            recv,
            Class::Collection
                | Class::Channel
                | Class::Redis
                | Class::Http
                | Class::User(_)
                | Class::Trait(_)
        )
    {
        let table = call
            .recv
            .first()
            .and_then(|r| cx.local_modules.get(r))
            .map(|m| normalize_table(m));
        let mut e = Effect::new(
            EffectKind::Write,
            format!("runs `{head}` on an active model"),
        )
        .with_table(table);
        e.insert = head == "insert";
        e.delete = head == "delete";
        return Some(e);
    }
    None
}

/// `orders::table` / `Orders` / `order::Entity` to a comparable table name.
pub fn table_of(path: &str) -> Name {
    let first = path
        .split(['.', ':'])
        .find(|s| !s.is_empty())
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

fn sql_eff(sql: &SqlInfo, call: &Call) -> Effect {
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
    e.conditional = sql.is_conditional();
    e.ident_guard = sql.where_cols.iter().any(|c| is_operation_identity(c));
    e.delete = sql.kind == SqlKind::Delete;
    // Filtered on no key (`WHERE expires_at < now()`), or not filtered at all (a table wipe in
    // a migration or a reset): housekeeping, not the consumption of one token.
    e.purge = e.delete
        && (!sql.filtered
            || !sql.where_cols.is_empty() && !sql.where_cols.iter().any(|c| is_plain_key(c)));
    e.insert = sql.kind == SqlKind::Insert;
    e.where_cols = sql.where_cols.clone().into();
    e.token = sql.tables.iter().any(|t| is_token_name(t))
        || sql.kind != SqlKind::Insert && sql.where_cols.iter().any(|c| is_token_name(c));
    let _ = call;
    e
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
