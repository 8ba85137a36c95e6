//! SQL written with sea-query's builder (`Query::update().table(Users::Table).value(Users::Status,
//! "banned").and_where(Expr::col(Users::Id).eq(id))`): the statement the chain builds, read
//! off its steps as [`crate::sql::classify`] reads SQL text, so the rules see it as they see
//! `UPDATE users SET status = 'banned' WHERE id = $1`.
//!
//! Tables and columns are sea-query identifiers: a variant of an `Iden` enum (`Users::Table`
//! names the table `users`, `UserIden::UsedBy` the column `used_by`: snake case, an `Iden` /
//! `Def` suffix of the enum dropped), a string (`Alias::new("users")`, `"users"`), or a string
//! const (`USER_TABLE`), kept as written for the classifier to look up
//! ([`SqlInfo::tables`] holds it upper case).

use syn::{Expr, ExprMethodCall};

use super::Seq;
use crate::name::Name;
use crate::sql::{SqlInfo, SqlKind, SqlValue};

/// The statement a sea-query builder chain makes, when `e` is one (through `&`, `?`, `.await`
/// and the builder's finishing steps: `.to_owned()`, `.build_sqlx(..)`, `.to_string(..)`).
pub(super) fn statement(e: &Expr) -> Option<SqlInfo> {
    // Every `let` asks: find the chain's root call first, allocating nothing.
    let kind = root_kind(e)?;
    // The steps, outermost first, down to the root.
    let mut steps: Vec<&ExprMethodCall> = Vec::new();
    let mut at = e;
    while let Some(next) = inner(at) {
        if let Expr::MethodCall(m) = at {
            steps.push(m);
        }
        at = next;
    }
    let mut info = SqlInfo::of(kind);
    // An insert's columns, matched with its first row of values.
    let mut columns: Vec<Name> = Vec::new();
    let mut row: Vec<SqlValue> = Vec::new();
    for m in steps.iter().rev() {
        let name = m.method.to_string();
        let args: Vec<&Expr> = m.args.each().collect();
        match name.as_str() {
            "from" | "from_as" | "table" | "into_table" | "from_table" => {
                if let Some(t) = args.first().and_then(|a| table_of(a)) {
                    info.tables.push(t);
                }
            }
            "and_where" | "or_where" | "cond_where" | "and_where_option" => {
                info.filtered = true;
                for a in &args {
                    compared(a, &mut info.where_cols, 0);
                }
            }
            "value" => {
                if let (Some(c), Some(v)) = (args.first().and_then(|a| column_of(a)), args.get(1)) {
                    set(&mut info, c, value_of(v));
                }
            }
            // An update's `.values([(col, value), ..])`; an insert's row.
            "values" | "values_panic" => {
                let items = args.first().map(|a| elements(a)).unwrap_or_default();
                for item in &items {
                    match item {
                        Expr::Tuple(t) if t.elems.len() == 2 && kind == SqlKind::Update => {
                            let mut it = t.elems.each();
                            if let (Some(c), Some(v)) = (it.next().and_then(column_of), it.next()) {
                                set(&mut info, c, value_of(v));
                            }
                        }
                        v if kind == SqlKind::Insert && row.len() < columns.len().max(32) => {
                            row.push(value_of(v));
                        }
                        _ => {}
                    }
                }
            }
            "columns" if kind == SqlKind::Insert => {
                columns.extend(
                    args.first()
                        .map(|a| elements(a))
                        .unwrap_or_default()
                        .iter()
                        .filter_map(column_of),
                );
            }
            "expr" | "expr_as" | "exprs" if kind == SqlKind::Select => {
                info.counts |= args.iter().any(|a| counts(a, 0));
            }
            "lock" | "lock_exclusive" | "lock_with_behavior" | "lock_with_tables" => {
                info.locking = true;
            }
            "order_by" | "order_by_columns" | "order_by_expr" => info.ordered = true,
            "on_conflict" => {
                info.upsert = true;
                info.on_conflict_nothing = args.first().is_some_and(|a| does_nothing(a, 0));
            }
            "returning" | "returning_all" | "returning_col" => info.returning = true,
            _ => {}
        }
    }
    if kind == SqlKind::Insert {
        for (c, v) in columns.into_iter().zip(row) {
            info.assigns.push((c, v));
        }
    }
    // A table is what every statement names; a builder without one is not read.
    (!info.tables.is_empty()).then_some(info)
}

/// What the chain `e` is made of, one level down: a step's receiver, or what `&`, `( )`, `?`
/// and `.await` wrap. `None` at the root.
fn inner(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::MethodCall(m) => Some(&m.receiver),
        Expr::Reference(r) => Some(&r.expr),
        Expr::Paren(p) => Some(&p.expr),
        Expr::Try(t) => Some(&t.expr),
        Expr::Await(a) => Some(&a.base),
        _ => None,
    }
}

/// The statement kind of the chain's root call, when it is sea-query's `Query::select()`,
/// `insert()`, `update()` or `delete()`.
fn root_kind(e: &Expr) -> Option<SqlKind> {
    let mut at = e;
    while let Some(next) = inner(at) {
        at = next;
    }
    let Expr::Call(root) = at else {
        return None;
    };
    let Expr::Path(f) = &*root.func else {
        return None;
    };
    let mut segs = f.path.segments.each().rev();
    let verb = segs.next()?;
    if segs.next()?.ident != "Query" || !root.args.is_empty() {
        return None;
    }
    if verb.ident == "select" {
        Some(SqlKind::Select)
    } else if verb.ident == "insert" {
        Some(SqlKind::Insert)
    } else if verb.ident == "update" {
        Some(SqlKind::Update)
    } else if verb.ident == "delete" {
        Some(SqlKind::Delete)
    } else {
        None
    }
}

fn set(info: &mut SqlInfo, column: Name, value: SqlValue) {
    info.set_cols.push(column.clone());
    info.assigns.push((column, value));
}

/// The items of an array, a `vec![..]` or a slice reference.
fn elements(e: &Expr) -> Vec<Expr> {
    match e {
        Expr::Array(a) => a.elems.each().cloned().collect(),
        Expr::Reference(r) => elements(&r.expr),
        Expr::Macro(m) if m.mac.path.is_ident("vec") => m
            .mac
            .parse_body_with(syn::punctuated::Punctuated::<Expr, syn::Token![,]>::parse_terminated)
            .map(|items| items.into_iter().collect())
            .unwrap_or_default(),
        other => vec![other.clone()],
    }
}

/// A table identifier: `Users::Table`, `UserIden::Table`, a string, `Alias::new("users")`, a
/// const (kept as written).
fn table_of(e: &Expr) -> Option<Name> {
    match e {
        Expr::Path(p) if p.qself.is_none() => {
            let segs: Vec<String> = p
                .path
                .segments
                .each()
                .map(|s| s.ident.to_string())
                .collect();
            match segs.as_slice() {
                [.., owner, last] if last == "Table" => Some(iden_table(owner)),
                [only] if only.chars().all(|c| !c.is_lowercase()) => {
                    Some(Name::from(only.as_str()))
                }
                _ => None,
            }
        }
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => Some(Name::from(s.value().to_ascii_lowercase())),
            _ => None,
        },
        Expr::Call(c) => c.args.first_item().and_then(table_of),
        Expr::Reference(r) => table_of(&r.expr),
        Expr::Paren(p) => table_of(&p.expr),
        Expr::MethodCall(m) if m.args.is_empty() => table_of(&m.receiver),
        _ => None,
    }
}

/// The table an `Iden` enum stands for: `UserEmails` is `user_emails`, `SignupCodeIden` and
/// `JobDependDef` (sea-query's `#[enum_def]`) drop their suffix.
fn iden_table(owner: &str) -> Name {
    let bare = owner
        .strip_suffix("Iden")
        .or_else(|| owner.strip_suffix("Def"))
        .filter(|b| !b.is_empty())
        .unwrap_or(owner);
    super::chain::snake_case(bare)
}

/// A column identifier: `Users::Status`, `(Users::Table, Users::Status)`, `Expr::col(..)`, a
/// string.
fn column_of(e: &Expr) -> Option<Name> {
    match e {
        Expr::Path(p) if p.qself.is_none() && p.path.segments.len() >= 2 => {
            let last = p.path.segments.last_item()?.ident.to_string();
            (last != "Table").then(|| super::chain::snake_case(&last))
        }
        Expr::Tuple(t) => t.elems.last_item().and_then(column_of),
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => Some(Name::from(s.value().to_ascii_lowercase())),
            _ => None,
        },
        Expr::Call(c) => c.args.first_item().and_then(column_of),
        Expr::Reference(r) => column_of(&r.expr),
        Expr::Paren(p) => column_of(&p.expr),
        _ => None,
    }
}

/// Columns compared in a condition: `Expr::col(Users::Status).eq(..)`, `Users::Id.eq(..)`
/// (`ExprTrait`), `Cond::all().add(..)`, `.and(..)` / `.or(..)`.
fn compared(e: &Expr, out: &mut Vec<Name>, depth: u32) {
    if depth > 16 {
        return;
    }
    match e {
        Expr::MethodCall(m) => {
            let method = m.method.to_string();
            let tests = crate::apis::COLUMN_TESTS.contains(&method.as_str())
                || matches!(
                    method.as_str(),
                    "is_null" | "is_not_null" | "is_in" | "is_not_in" | "between" | "like"
                );
            if tests && let Some(c) = column_in(&m.receiver) {
                out.push(c);
            }
            compared(&m.receiver, out, depth + 1);
            for a in m.args.each() {
                compared(a, out, depth + 1);
            }
        }
        Expr::Call(c) => c.args.each().for_each(|a| compared(a, out, depth + 1)),
        Expr::Reference(r) => compared(&r.expr, out, depth + 1),
        Expr::Paren(p) => compared(&p.expr, out, depth + 1),
        _ => {}
    }
}

/// The column a comparison's left side names: `Expr::col(X::C)`, `Expr::col((X::Table, X::C))`,
/// `X::C` itself.
fn column_in(e: &Expr) -> Option<Name> {
    match e {
        Expr::Call(c)
            if matches!(&*c.func, Expr::Path(p)
            if p.path.segments.last_item().is_some_and(|s| matches!(s.ident.to_string().as_str(), "col" | "tbl" | "column"))) =>
        {
            c.args.first_item().and_then(column_of)
        }
        Expr::Path(_) => column_of(e),
        Expr::Paren(p) => column_in(&p.expr),
        _ => None,
    }
}

/// What a builder sets a column to.
fn value_of(e: &Expr) -> SqlValue {
    match e {
        Expr::Lit(l) => match &l.lit {
            syn::Lit::Str(s) => SqlValue::Literal(Name::from(s.value())),
            syn::Lit::Bool(b) => {
                SqlValue::Literal(Name::new(if b.value { "true" } else { "false" }))
            }
            syn::Lit::Int(i) => SqlValue::Literal(Name::new(i.base10_digits())),
            _ => SqlValue::Expr,
        },
        Expr::Path(p) if p.path.is_ident("None") => SqlValue::Literal(Name::new("null")),
        Expr::Path(p) if p.qself.is_none() && p.path.segments.len() >= 2 => SqlValue::Literal(
            Name::join(&super::segments(&p.path).collect::<Vec<_>>(), "::"),
        ),
        Expr::Call(c) => {
            let name = match &*c.func {
                Expr::Path(p) => p.path.segments.last_item().map(|s| s.ident.to_string()),
                _ => None,
            };
            match name.as_deref() {
                Some("current_timestamp" | "now" | "current_date" | "now_utc") => SqlValue::Now,
                // `SimpleExpr::Value(..)`, `Value::from(..)`, `Some(..)`: the value inside.
                Some("Value" | "from" | "Some" | "val" | "value") if c.args.len() == 1 => {
                    c.args.first_item().map_or(SqlValue::Expr, value_of)
                }
                _ => SqlValue::Expr,
            }
        }
        Expr::MethodCall(m) => match m.method.to_string().as_str() {
            "into" | "to_string" | "to_owned" | "as_str" | "clone" if m.args.is_empty() => {
                value_of(&m.receiver)
            }
            // `Expr::col(Users::Tries).add(1)`: the column's own value changed.
            "add" | "sub" | "mul" if column_in(&m.receiver).is_some() => SqlValue::Relative,
            _ => SqlValue::Expr,
        },
        Expr::Reference(r) => value_of(&r.expr),
        Expr::Paren(p) => value_of(&p.expr),
        _ => SqlValue::Expr,
    }
}

/// Does a select's expression count rows (`Expr::col(..).count()`, `Func::count(..)`)?
fn counts(e: &Expr, depth: u32) -> bool {
    depth < 16
        && match e {
            Expr::MethodCall(m) => m.method == "count" || counts(&m.receiver, depth + 1),
            Expr::Call(c) => {
                matches!(&*c.func, Expr::Path(p) if p.path.segments.last_item().is_some_and(|s| s.ident == "count"))
                    || c.args.each().any(|a| counts(a, depth + 1))
            }
            Expr::Reference(r) => counts(&r.expr, depth + 1),
            Expr::Paren(p) => counts(&p.expr, depth + 1),
            _ => false,
        }
}

/// `OnConflict::column(..).do_nothing()`.
fn does_nothing(e: &Expr, depth: u32) -> bool {
    depth < 16
        && match e {
            Expr::MethodCall(m) => m.method == "do_nothing" || does_nothing(&m.receiver, depth + 1),
            Expr::Reference(r) => does_nothing(&r.expr, depth + 1),
            Expr::Paren(p) => does_nothing(&p.expr, depth + 1),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::statement;
    use crate::sql::{SqlKind, SqlValue};

    fn of(src: &str) -> crate::sql::SqlInfo {
        statement(&syn::parse_str(src).expect("an expression")).expect("a statement")
    }

    #[test]
    fn reads_a_builder_chain() {
        let u = of("Query::update().table(UserIden::Table)
            .values(vec![(UserIden::Status, \"banned\".into()), (UserIden::SeenAt, Expr::current_timestamp().into())])
            .and_where(Expr::col(UserIden::Id).eq(id)).to_owned()");
        assert_eq!(u.kind, SqlKind::Update);
        assert_eq!(u.tables, ["user"]);
        assert_eq!(u.set_cols, ["status", "seen_at"]);
        assert_eq!(u.assigns[0].1, SqlValue::Literal("banned".into()));
        assert_eq!(u.assigns[1].1, SqlValue::Now);
        assert_eq!(u.where_cols, ["id"]);
        assert!(u.filtered);

        let s = of("Query::select().expr(Expr::col(UserEmails::UserEmailId).count())
            .from(UserEmails::Table).and_where(Expr::col((UserEmails::Table, UserEmails::Email)).eq(email))
            .build_sqlx(PostgresQueryBuilder)");
        assert_eq!((s.kind, s.counts), (SqlKind::Select, true));
        assert_eq!(
            (s.tables.as_slice(), s.where_cols.as_slice()),
            (&["user_emails".into()][..], &["email".into()][..])
        );

        let i = of("Query::insert().into_table(SIGNUP_CODE_TABLE).columns([Codes::Id, Codes::State])
            .values_panic([id.into(), \"fresh\".into()]).on_conflict(OnConflict::column(Codes::Id).do_nothing().to_owned())");
        assert_eq!(
            (i.kind, i.upsert, i.on_conflict_nothing),
            (SqlKind::Insert, true, true)
        );
        assert_eq!(i.tables, ["SIGNUP_CODE_TABLE"]);
        assert_eq!(
            i.assigns[1],
            ("state".into(), SqlValue::Literal("fresh".into()))
        );

        let l = of(
            "Query::select().from(Jobs::Table).column(Jobs::Id).lock(LockType::Update).to_owned()",
        );
        assert!(l.locking && !l.filtered);
    }

    #[test]
    fn other_chains_are_not_statements() {
        for src in [
            "Query::new().table(Users::Table)",
            "client.query().from(Users::Table)",
            "Query::select().columns([Users::Id])",
        ] {
            assert!(
                statement(&syn::parse_str(src).expect("an expression")).is_none(),
                "{src}"
            );
        }
    }
}
