//! SQL text classification: SELECT vs `SELECT .. FOR UPDATE` vs UPDATE (with its SET and WHERE
//! columns), INSERT (with `ON CONFLICT DO NOTHING`), DELETE, and transaction control.
//!
//! The text is tokenized with `sqlparser`'s tokenizer (so quoting, comments and placeholders are
//! handled by a real SQL lexer); the statement shape is then read from the token stream, which
//! also works for dialect extensions and fragments that a full parser would reject.

use crate::name::Name;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// What one SQL statement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlKind {
    Select,
    Update,
    Insert,
    Delete,
    Begin,
    Commit,
    Rollback,
    Other,
}

/// What a statement sets a column to (`UPDATE .. SET col = ..`, `INSERT .. (col) VALUES (..)`,
/// `ON CONFLICT .. DO UPDATE SET col = ..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// A literal, as written without its quotes: `'paid'`, `TRUE`, `3`.
    Literal(Name),
    /// A placeholder as written (`$2`, `:state`, `@state`); the n-th `?` is `?n`.
    Param(Name),
    /// The current time: `now()`, `CURRENT_TIMESTAMP`, `datetime('now')`, `unixepoch()`.
    Now,
    /// The column's own value changed by an operator (`balance = balance - $1`, `tries = tries
    /// + 1`): applied twice, the change is made twice.
    Relative,
    /// Anything else: an expression, another column, a sub-select.
    Expr,
}

/// The facts the rules need about one SQL statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlInfo {
    pub kind: SqlKind,
    /// Tables read or written (lowercase, unqualified).
    pub tables: Vec<Name>,
    /// `SELECT .. FOR UPDATE` / `FOR NO KEY UPDATE` / `FOR SHARE` / `LOCK IN SHARE MODE`.
    pub locking: bool,
    /// Columns assigned by `UPDATE .. SET` (lowercase).
    pub set_cols: Vec<Name>,
    /// Every column the statement assigns, with its value: `UPDATE .. SET`, an `INSERT`'s
    /// columns and first row of values, and an upsert's `DO UPDATE SET`.
    pub assigns: Vec<(Name, SqlValue)>,
    /// Columns compared in the WHERE clause (lowercase, unqualified).
    pub where_cols: Vec<Name>,
    /// Columns compared in the WHERE clauses of the `WITH` queries before the statement's verb
    /// (`WITH picked AS (SELECT .. WHERE status = $1 FOR UPDATE SKIP LOCKED) UPDATE ..`).
    pub cte_where_cols: Vec<Name>,
    /// The statement has a WHERE clause (a `DELETE` without one empties the table).
    pub filtered: bool,
    /// `INSERT .. ON CONFLICT DO NOTHING` / `INSERT IGNORE`.
    pub on_conflict_nothing: bool,
    /// An insert that settles a row already there: `ON CONFLICT`, `ON DUPLICATE KEY`, `INSERT
    /// OR REPLACE | IGNORE`, `REPLACE INTO`, or `INSERT .. SELECT .. WHERE ..`.
    pub upsert: bool,
    pub returning: bool,
    /// `.. ISOLATION LEVEL SERIALIZABLE` (in `BEGIN` or `SET TRANSACTION`).
    pub serializable: bool,
    /// A `WITH` query before the statement's verb writes (`WITH picked AS (UPDATE .. RETURNING
    /// ..) SELECT ..`): a data-modifying CTE.
    pub cte_writes: bool,
    /// A `SELECT` that counts rows: `count(..)` in its projection (before its `FROM`).
    pub counts: bool,
    /// A `SELECT` that orders what it finds (`ORDER BY sent_at DESC LIMIT 1`): it picks among
    /// several rows with the columns it filters on.
    pub ordered: bool,
    /// An `UPDATE` of the row an unlocked subquery picked, setting a column that subquery
    /// filtered on (`SET ledger_tx_id = $1 WHERE id = (SELECT id .. WHERE ledger_tx_id IS NULL
    /// LIMIT 1)`): the column claimed, which the outer filter does not test again.
    pub picked_claim: Option<Name>,
    /// An `UPDATE` that sets a column to the current time where its filter (or the subquery
    /// that picks the row) requires that column to be `NULL`, and compares it with nothing
    /// else (`SET started_at = now() WHERE id = $1 AND started_at IS NULL`): the column is
    /// claimed by being stamped, and no filter takes an old stamp back.
    pub null_claim: Option<Name>,
    /// An advisory lock the statement takes: PostgreSQL's `pg_advisory_lock` /
    /// `pg_try_advisory_lock` (held by the session, across transactions) or the
    /// `pg_advisory_xact_lock` forms (ended by the transaction), MySQL's `GET_LOCK` (session).
    pub advisory: Option<Advisory>,
}

/// An advisory lock a statement takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advisory {
    /// Held by the session (the connection) until released, across transactions; otherwise
    /// until the transaction ends.
    pub session: bool,
    /// A `try` form: it answers at once, `false` when the lock is held.
    pub attempt: bool,
    /// It releases the lock (`pg_advisory_unlock`, MySQL's `RELEASE_LOCK`).
    pub unlock: bool,
}

impl SqlInfo {
    /// A statement of `kind` of which nothing else is known yet.
    pub fn of(kind: SqlKind) -> SqlInfo {
        SqlInfo {
            kind,
            tables: Vec::new(),
            locking: false,
            set_cols: Vec::new(),
            assigns: Vec::new(),
            where_cols: Vec::new(),
            cte_where_cols: Vec::new(),
            filtered: false,
            on_conflict_nothing: false,
            upsert: false,
            returning: false,
            serializable: false,
            cte_writes: false,
            counts: false,
            ordered: false,
            picked_claim: None,
            null_claim: None,
            advisory: None,
        }
    }

    /// The main table (first one named).
    pub fn table(&self) -> Option<&str> {
        self.tables.first().map(Name::as_str)
    }

    /// A write whose WHERE clause tests more than the row key: current state, version, owner or
    /// operation identity (`WHERE id = $1 AND status = 'pending'`).
    pub fn is_conditional(&self) -> bool {
        self.where_cols.iter().any(|c| {
            !is_plain_key(c) && !crate::kb::names::is_own_key(c, self.table())
                // `SET token = $1 .. WHERE token = $2`: a compare-and-set on the column.
                || self.set_cols.contains(c) && !matches!(c.as_str(), "id" | "uuid" | "pk")
        })
    }
}

/// A column that only names the row (`id`, `order_id`), not its state.
pub fn is_plain_key(col: &str) -> bool {
    if matches!(col, "id" | "uuid" | "key" | "pk" | "token" | "code") || col.ends_with("_key") {
        return true;
    }
    if crate::kb::names::is_operation_identity(col) {
        return false;
    }
    col == "id"
        || col == "uuid"
        || col == "key"
        || col == "pk"
        || col.ends_with("_id")
        || col.ends_with("_key")
}

/// Does this string literal look like SQL at all? Comments before the statement (`-- grab
/// the jobs first`, `/* .. */`) are skipped.
pub fn looks_like_sql(text: &str) -> bool {
    let t = after_comments(text);
    let head: String = t.chars().take(18).collect::<String>().to_ascii_uppercase();
    [
        "SELECT ",
        "SELECT\n",
        "UPDATE ",
        "INSERT ",
        "DELETE ",
        "WITH ",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "START TRANSACTION",
        "REPLACE INTO",
        "SET TRANSACTION",
    ]
    .iter()
    .any(|k| head.starts_with(k))
        || head == "SELECT"
}

/// The text past leading whitespace and SQL comments (`-- ..` to the end of the line, `/* .. */`).
fn after_comments(text: &str) -> &str {
    let mut t = text.trim_start();
    loop {
        if let Some(rest) = t.strip_prefix("--") {
            t = rest
                .split_once('\n')
                .map_or("", |(_, after)| after)
                .trim_start();
        } else if let Some(rest) = t.strip_prefix("/*") {
            t = rest
                .split_once("*/")
                .map_or("", |(_, after)| after)
                .trim_start();
        } else {
            return t;
        }
    }
}

/// Classifies SQL text; `None` when it is not SQL.
pub fn classify(text: &str) -> Option<SqlInfo> {
    if !looks_like_sql(text) {
        return None;
    }
    // `format!` placeholders are replaced so the lexer sees plain identifiers.
    let cleaned;
    let text = if text.contains('{') {
        cleaned = replace_format_holes(text);
        cleaned.as_str()
    } else {
        text
    };
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, text).tokenize().ok()?;
    let mut questions = 0;
    let toks: Vec<Tok> = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Whitespace(_) => None,
            Token::Word(w) => Some(Tok::Word(
                w.value.to_ascii_lowercase(),
                w.quote_style.is_some(),
            )),
            Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq => Some(Tok::Cmp),
            Token::LParen => Some(Tok::Open),
            Token::RParen => Some(Tok::Close),
            Token::Comma => Some(Tok::Comma),
            Token::Period => Some(Tok::Dot),
            Token::SemiColon => Some(Tok::Semi),
            Token::SingleQuotedString(s) => Some(Tok::Str(s)),
            Token::Number(n, _) => Some(Tok::Num(n)),
            Token::Placeholder(p) => Some(Tok::Param(p)),
            Token::Question => {
                questions += 1;
                Some(Tok::Param(format!("?{questions}")))
            }
            Token::Colon => Some(Tok::Sigil(':')),
            Token::AtSign => Some(Tok::Sigil('@')),
            Token::Plus | Token::Minus => Some(Tok::Arith),
            _ => Some(Tok::Other),
        })
        .collect();
    Some(analyse(&named_params(toks)))
}

fn replace_format_holes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_hole = false;
    for c in text.chars() {
        match (c, in_hole) {
            ('{', false) => {
                in_hole = true;
                out.push('x');
            }
            ('}', true) => in_hole = false,
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String, bool),
    Cmp,
    Open,
    Close,
    Comma,
    Dot,
    Semi,
    /// A single-quoted string's text.
    Str(String),
    Num(String),
    /// A placeholder: `$1`, the n-th `?` as `?n`, `:name`, `@name`.
    Param(String),
    /// `:` or `@` (folded into the next word as a named placeholder).
    Sigil(char),
    /// `+` or `-`.
    Arith,
    Other,
}

/// `:name` and `@name` as one placeholder.
fn named_params(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out = Vec::with_capacity(toks.len());
    let mut it = toks.into_iter().peekable();
    while let Some(t) = it.next() {
        match (t, it.peek()) {
            (Tok::Sigil(c), Some(Tok::Word(w, _))) => {
                let param = Tok::Param(format!("{c}{w}"));
                it.next();
                out.push(param);
            }
            (Tok::Sigil(_), _) => out.push(Tok::Other),
            (t, _) => out.push(t),
        }
    }
    out
}

impl Tok {
    fn is_kw(&self, kw: &str) -> bool {
        matches!(self, Tok::Word(w, false) if w == kw)
    }
}

const CLAUSE_END: &[&str] = &[
    "where",
    "returning",
    "from",
    "order",
    "limit",
    "group",
    "having",
    "for",
    "on",
    "values",
    "set",
    "join",
    "left",
    "right",
    "inner",
    "outer",
    "union",
    "select",
    "lock",
    "using",
    "offset",
    "window",
];

fn analyse(toks: &[Tok]) -> SqlInfo {
    let mut info = SqlInfo {
        serializable: toks.iter().any(|t| t.is_kw("serializable")),
        advisory: toks.iter().find_map(|t| match t {
            Tok::Word(w, false) => {
                let (session, attempt, unlock) = match w.as_str() {
                    "pg_advisory_lock" | "get_lock" => (true, false, false),
                    "pg_try_advisory_lock" => (true, true, false),
                    "pg_advisory_xact_lock" => (false, false, false),
                    "pg_try_advisory_xact_lock" => (false, true, false),
                    "pg_advisory_unlock" | "pg_advisory_unlock_all" | "release_lock" => {
                        (true, false, true)
                    }
                    _ => return None,
                };
                Some(Advisory {
                    session,
                    attempt,
                    unlock,
                })
            }
            _ => None,
        }),
        ..SqlInfo::of(SqlKind::Other)
    };
    // The statement's verb: the first top-level verb after an optional WITH clause.
    let mut depth = 0i32;
    let mut verb_at = None;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            Tok::Word(w, false) if depth == 0 => {
                let kind = match w.as_str() {
                    "select" => Some(SqlKind::Select),
                    "update"
                        if !prev_is_kw(toks, i, "for")
                            && !prev_is_kw(toks, i, "key")
                            && !prev_is_kw(toks, i, "do") =>
                    {
                        Some(SqlKind::Update)
                    }
                    "insert" | "replace" if i == 0 || verb_at.is_none() => Some(SqlKind::Insert),
                    "delete" => Some(SqlKind::Delete),
                    "begin" | "start" => Some(SqlKind::Begin),
                    "commit" | "end" => Some(SqlKind::Commit),
                    "rollback" | "abort" => Some(SqlKind::Rollback),
                    _ => None,
                };
                if let Some(k) = kind {
                    // In `WITH x AS (..) UPDATE ..` the last top-level verb wins over a select
                    // inside the CTE (which is at depth > 0 anyway).
                    if verb_at.is_none() || info.kind == SqlKind::Select && k != SqlKind::Select {
                        info.kind = k;
                        verb_at = Some(i);
                    }
                }
            }
            _ => {}
        }
    }
    let start = verb_at.unwrap_or(0);
    info.filtered = toks[start..].iter().any(|t| t.is_kw("where"));
    if info.kind == SqlKind::Select {
        let projection = toks[start..]
            .iter()
            .position(|t| t.is_kw("from"))
            .map_or(&toks[start..], |end| &toks[start..start + end]);
        info.counts = projection
            .windows(2)
            .any(|w| (w[0].is_kw("count") || w[0].is_kw("sum")) && matches!(w[1], Tok::Open));
        info.ordered = toks[start..]
            .windows(2)
            .any(|w| w[0].is_kw("order") && w[1].is_kw("by"));
    }
    // Tables: identifiers after FROM / JOIN / UPDATE / INTO.
    for i in 0..toks.len() {
        let introduces = match &toks[i] {
            Tok::Word(w, false) => {
                matches!(w.as_str(), "from" | "join" | "into")
                    || (w == "update" && i == start && info.kind == SqlKind::Update)
            }
            _ => false,
        };
        if introduces && let Some(name) = object_name(toks, i + 1) {
            push_unique(&mut info.tables, name);
        }
    }
    // Locking reads.
    for i in 0..toks.len() {
        if toks[i].is_kw("for") {
            let next = toks.get(i + 1);
            if next.is_some_and(|t| {
                t.is_kw("update") || t.is_kw("share") || t.is_kw("no") || t.is_kw("key")
            }) {
                info.locking = true;
            }
        }
        if toks[i].is_kw("lock") && toks.get(i + 1).is_some_and(|t| t.is_kw("in")) {
            info.locking = true;
        }
        if toks[i].is_kw("returning") {
            info.returning = true;
        }
        if toks[i].is_kw("conflict") && toks[i + 1..].iter().take(12).any(|t| t.is_kw("nothing")) {
            info.on_conflict_nothing = true;
        }
        if toks[i].is_kw("ignore") && i > 0 && toks[i - 1].is_kw("insert") {
            info.on_conflict_nothing = true;
        }
        if toks[i].is_kw("conflict") && i > 0 && toks[i - 1].is_kw("on")
            || toks[i].is_kw("duplicate") && toks.get(i + 1).is_some_and(|t| t.is_kw("key"))
            || toks[i].is_kw("or")
                && i > 0
                && toks[i - 1].is_kw("insert")
                && toks
                    .get(i + 1)
                    .is_some_and(|t| t.is_kw("replace") || t.is_kw("ignore"))
            || toks[i].is_kw("replace") && toks.get(i + 1).is_some_and(|t| t.is_kw("into"))
        {
            info.upsert = true;
        }
    }
    if info.kind == SqlKind::Insert {
        insert_values(toks, start, &mut info.assigns);
        // `INSERT .. SELECT .. WHERE NOT EXISTS (..)` (or `NOT IN`, `EXCEPT`): the insert
        // checks for the row itself.
        info.upsert |= toks[start..]
            .windows(2)
            .any(|w| w[0].is_kw("not") && (w[1].is_kw("exists") || w[1].is_kw("in")))
            || toks[start..].iter().any(|t| t.is_kw("except"));
    }
    // A data-modifying `WITH` query before the verb (`FOR UPDATE` is no write).
    info.cte_writes = toks[..start].iter().enumerate().any(|(i, t)| {
        (t.is_kw("update") && !prev_is_kw(toks, i, "for") && !prev_is_kw(toks, i, "key")
            || t.is_kw("delete")
            || t.is_kw("insert"))
            && i > 0
    });
    // WHERE columns of the `WITH` queries before the verb.
    let mut i = 0;
    while i < start {
        if toks[i].is_kw("where") {
            i = where_columns(toks, i + 1, &mut info.cte_where_cols);
            continue;
        }
        i += 1;
    }
    // SET columns (UPDATE, an upsert's DO UPDATE) and WHERE columns (UPDATE, DELETE, SELECT).
    let mut i = start;
    while i < toks.len() {
        if toks[i].is_kw("set") && matches!(info.kind, SqlKind::Update | SqlKind::Insert) {
            let update = info.kind == SqlKind::Update;
            let mut j = i + 1;
            let mut expect_col = true;
            let mut depth = 0i32;
            while j < toks.len() {
                match &toks[j] {
                    Tok::Open => depth += 1,
                    Tok::Close => depth -= 1,
                    Tok::Comma if depth == 0 => expect_col = true,
                    Tok::Word(w, quoted) if depth == 0 => {
                        if !quoted && CLAUSE_END.contains(&w.as_str()) {
                            break;
                        }
                        if expect_col {
                            if toks.get(j + 1) == Some(&Tok::Dot) {
                                j += 1;
                                continue;
                            }
                            if update {
                                push_unique(&mut info.set_cols, w.clone());
                            }
                            if toks.get(j + 1) == Some(&Tok::Cmp) {
                                let value = match value_at(toks, j + 2) {
                                    SqlValue::Expr if relative(toks, j + 2, w) => {
                                        SqlValue::Relative
                                    }
                                    v => v,
                                };
                                info.assigns.push((Name::new(w), value));
                            }
                            expect_col = false;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
            continue;
        }
        if toks[i].is_kw("where") {
            let mut picked = Subquery::default();
            i = where_columns_split(toks, i + 1, &mut info.where_cols, Some(&mut picked));
            // An `UPDATE` / `DELETE` of the row a subquery picked without locking it (`WHERE id
            // = (SELECT id .. WHERE ledger_tx_id IS NULL LIMIT 1)`): the subquery's filter is
            // read from the statement's snapshot and not tested again once the row is locked,
            // so only the outer filter guards the write. Two workers pick the same row. (A
            // subquery with no `LIMIT` names every row that qualifies: a transition of them
            // all, which a second run makes again.)
            let writes = matches!(info.kind, SqlKind::Update | SqlKind::Delete);
            if writes && picked.seen && picked.limited && !picked.locked {
                info.picked_claim = info
                    .set_cols
                    .iter()
                    .find(|c| picked.cols.contains(c) && !info.where_cols.contains(c))
                    .cloned();
            } else {
                for c in picked.cols {
                    push_unique(&mut info.where_cols, c);
                }
            }
            continue;
        }
        i += 1;
    }
    if info.kind == SqlKind::Update {
        info.null_claim = null_claim(toks, &info);
    }
    info
}

/// The column an `UPDATE` stamps with the current time where its filter finds it `NULL` (see
/// [`SqlInfo::null_claim`]).
fn null_claim(toks: &[Tok], info: &SqlInfo) -> Option<Name> {
    let filter = toks.iter().position(|t| t.is_kw("where"))?;
    let toks = &toks[filter..];
    info.assigns.iter().find_map(|(col, value)| {
        if *value != SqlValue::Now {
            return None;
        }
        let at = |i: usize| matches!(toks.get(i), Some(Tok::Word(w, _)) if w == col.as_str());
        let mut null = false;
        for i in 0..toks.len() {
            if !at(i) {
                continue;
            }
            if toks.get(i + 1).is_some_and(|t| t.is_kw("is"))
                && toks.get(i + 2).is_some_and(|t| t.is_kw("null"))
            {
                null = true;
            } else if matches!(toks.get(i + 1), Some(Tok::Cmp))
                || i > 0 && matches!(toks.get(i - 1), Some(Tok::Cmp))
                || toks.get(i + 1).is_some_and(|t| t.is_kw("is"))
            {
                // Compared with a time (`started_at < now() - ..`) or tested `IS NOT NULL`:
                // the filter also takes stamped rows.
                return None;
            }
        }
        null.then(|| col.clone())
    })
}

/// The columns compared in the `WHERE` clause that starts at `from`; returns where it ends.
fn where_columns(toks: &[Tok], from: usize, out: &mut Vec<Name>) -> usize {
    where_columns_split(toks, from, out, None)
}

/// What a `WHERE` clause's subqueries (`(SELECT ..)`) compare, kept apart from the clause's
/// own columns.
#[derive(Default)]
struct Subquery {
    seen: bool,
    /// Some subquery locks what it reads (`FOR UPDATE`, `FOR SHARE`).
    locked: bool,
    /// Some subquery picks a few rows (`LIMIT ..`): a claim of the next row, not a transition
    /// of every row that qualifies.
    limited: bool,
    cols: Vec<Name>,
}

/// [`where_columns`]; with `sub`, the columns compared inside subqueries go to `sub` instead.
fn where_columns_split(
    toks: &[Tok],
    from: usize,
    out: &mut Vec<Name>,
    mut sub: Option<&mut Subquery>,
) -> usize {
    let mut j = from;
    let mut depth = 0i32;
    // The depth at which the outermost subquery's tokens are, while inside one.
    let mut in_sub: Option<i32> = None;
    while j < toks.len() {
        match &toks[j] {
            Tok::Open => {
                depth += 1;
                if in_sub.is_none()
                    && let Some(s) = sub.as_deref_mut()
                    && toks.get(j + 1).is_some_and(|t| t.is_kw("select"))
                {
                    s.seen = true;
                    in_sub = Some(depth);
                }
            }
            Tok::Close => {
                if in_sub == Some(depth) {
                    in_sub = None;
                }
                depth -= 1;
                if depth < 0 {
                    break;
                }
            }
            Tok::Word(w, false)
                if in_sub.is_some()
                    && w == "for"
                    && toks.get(j + 1).is_some_and(|t| {
                        t.is_kw("update") || t.is_kw("share") || t.is_kw("no")
                    }) =>
            {
                if let Some(s) = sub.as_deref_mut() {
                    s.locked = true;
                }
            }
            Tok::Word(w, false) if in_sub.is_some() && w == "limit" => {
                if let Some(s) = sub.as_deref_mut() {
                    s.limited = true;
                }
            }
            Tok::Semi => break,
            Tok::Word(w, quoted) => {
                if depth == 0
                    && !quoted
                    && matches!(
                        w.as_str(),
                        "returning" | "order" | "limit" | "for" | "group" | "lock"
                    )
                {
                    break;
                }
                let next = toks.get(j + 1);
                let compared = matches!(next, Some(Tok::Cmp))
                    || next.is_some_and(|t| {
                        t.is_kw("in")
                            || t.is_kw("is")
                            || t.is_kw("like")
                            || t.is_kw("between")
                            || t.is_kw("not")
                    });
                let prev_cmp = j > 0 && matches!(toks[j - 1], Tok::Cmp);
                let is_keyword = !quoted && SQL_WORDS.contains(&w.as_str());
                if compared && !is_keyword && !prev_cmp {
                    match (in_sub, sub.as_deref_mut()) {
                        (Some(_), Some(s)) => push_unique(&mut s.cols, w.clone()),
                        _ => push_unique(out, w.clone()),
                    }
                }
            }
            _ => {}
        }
        j += 1;
    }
    j
}

/// The value that starts at `i` and runs to the next top-level comma or clause.
fn value_at(toks: &[Tok], i: usize) -> SqlValue {
    if i >= toks.len() {
        return SqlValue::Expr;
    }
    let mut end = i;
    let mut depth = 0i32;
    while let Some(t) = toks.get(end) {
        match t {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => break,
            Tok::Close => depth -= 1,
            Tok::Comma | Tok::Semi if depth == 0 => break,
            Tok::Word(w, false) if depth == 0 && end > i && CLAUSE_END.contains(&w.as_str()) => {
                break;
            }
            _ => {}
        }
        end += 1;
    }
    let mut value = &toks[i.min(end)..end];
    // `(strftime('%s', 'now'))`: a value in parentheses is that value.
    while let [Tok::Open, inner @ .., Tok::Close] = value
        && balanced(inner)
    {
        value = inner;
    }
    // A trailing cast (`'x'::kind`, `$1::text`) keeps the value what it is.
    let plain = |rest: &[Tok]| {
        rest.iter()
            .all(|t| matches!(t, Tok::Other | Tok::Arith | Tok::Dot | Tok::Word(..)))
    };
    match value {
        [Tok::Str(s), rest @ ..] if plain(rest) => SqlValue::Literal(Name::new(s)),
        [Tok::Num(n)] => SqlValue::Literal(Name::new(n)),
        [Tok::Param(p), rest @ ..] if plain(rest) => SqlValue::Param(Name::new(p)),
        [Tok::Word(w, false)] if matches!(w.as_str(), "true" | "false" | "null") => {
            SqlValue::Literal(Name::new(w))
        }
        [Tok::Word(w, false), rest @ ..] if is_now(w, rest) => SqlValue::Now,
        _ => SqlValue::Expr,
    }
}

/// Do the parentheses of `toks` close in order, none before it opens?
fn balanced(toks: &[Tok]) -> bool {
    let mut depth = 0u32;
    for t in toks {
        match t {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => return false,
            Tok::Close => depth -= 1,
            _ => {}
        }
    }
    depth == 0
}

/// Does the value at `i` start with the assigned column itself and a `+` or `-` (`balance -
/// $1`, `t.tries + 1`)?
fn relative(toks: &[Tok], i: usize, column: &str) -> bool {
    let i = match (toks.get(i), toks.get(i + 1)) {
        (Some(Tok::Word(..)), Some(Tok::Dot)) => i + 2,
        _ => i,
    };
    matches!(toks.get(i), Some(Tok::Word(w, _)) if w == column)
        && matches!(toks.get(i + 1), Some(Tok::Arith))
}

/// `now()`, `CURRENT_TIMESTAMP`, `datetime('now')`, `strftime('%s', 'now')`, `unixepoch()` and
/// the like, alone.
fn is_now(word: &str, rest: &[Tok]) -> bool {
    let call = matches!(rest, [Tok::Open, Tok::Close])
        || matches!(rest, [Tok::Open, Tok::Str(s), Tok::Close] if s == "now")
        || matches!(rest, [Tok::Open, Tok::Str(_), Tok::Comma, Tok::Str(s), Tok::Close] if s == "now");
    match word {
        "current_timestamp" | "localtimestamp" | "current_date" => rest.is_empty() || call,
        "now"
        | "unixepoch"
        | "datetime"
        | "strftime"
        | "julianday"
        | "getdate"
        | "sysdate"
        | "utc_timestamp"
        | "clock_timestamp"
        | "statement_timestamp"
        | "transaction_timestamp" => call,
        _ => false,
    }
}

/// An `INSERT`'s columns paired with its first row of values.
fn insert_values(toks: &[Tok], start: usize, out: &mut Vec<(Name, SqlValue)>) {
    let Some(into) = toks[start..].iter().position(|t| t.is_kw("into")) else {
        return;
    };
    let Some(open) = toks[start + into..].iter().position(|t| *t == Tok::Open) else {
        return;
    };
    let open = start + into + open;
    let Some(values) = toks[open..].iter().position(|t| t.is_kw("values")) else {
        return;
    };
    let mut cols = Vec::new();
    for t in &toks[open + 1..] {
        match t {
            Tok::Close => break,
            Tok::Word(w, _) => cols.push(Name::new(w)),
            _ => {}
        }
    }
    let row = open + values + 1;
    if toks.get(row) != Some(&Tok::Open) {
        return;
    }
    let mut at = row + 1;
    for col in cols {
        out.push((col, value_at(toks, at)));
        // To the next top-level comma of the row.
        let mut depth = 0i32;
        while let Some(t) = toks.get(at) {
            match t {
                Tok::Open => depth += 1,
                Tok::Close if depth == 0 => return,
                Tok::Close => depth -= 1,
                Tok::Comma if depth == 0 => break,
                _ => {}
            }
            at += 1;
        }
        at += 1;
    }
}

const SQL_WORDS: &[&str] = &[
    "and",
    "or",
    "not",
    "null",
    "true",
    "false",
    "now",
    "current_timestamp",
    "exists",
    "select",
    "any",
    "all",
    "coalesce",
    "lower",
    "upper",
];

fn prev_is_kw(toks: &[Tok], i: usize, kw: &str) -> bool {
    i > 0 && toks[i - 1].is_kw(kw)
}

fn object_name(toks: &[Tok], mut i: usize) -> Option<String> {
    // Skip `ONLY`, `IGNORE INTO`-style noise.
    while toks
        .get(i)
        .is_some_and(|t| t.is_kw("only") || t.is_kw("lateral"))
    {
        i += 1;
    }
    let mut name = match toks.get(i)? {
        Tok::Word(w, quoted) if *quoted || !SQL_WORDS.contains(&w.as_str()) => w.clone(),
        _ => return None,
    };
    if name == "select" {
        return None;
    }
    while toks.get(i + 1) == Some(&Tok::Dot) {
        if let Some(Tok::Word(w, _)) = toks.get(i + 2) {
            name = w.clone();
            i += 2;
        } else {
            break;
        }
    }
    Some(name)
}

fn push_unique(v: &mut Vec<Name>, s: impl Into<Name>) {
    let s = s.into();
    if !v.contains(&s) {
        v.push(s);
    }
}

/// Where the `WHERE` predicate of an `UPDATE` or `DELETE` is in its text: the (line, char
/// column) of its first token and just past its last, both 1-based; whether it has a top-level
/// `OR`; and whether the statement names a quoted identifier or joins another table (`FROM`,
/// `USING`), where a bare column name may not say what is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predicate {
    pub start: (u32, u32),
    pub end: (u32, u32),
    pub or: bool,
    pub ambiguous: bool,
}

/// The `WHERE` predicate of an `UPDATE` or `DELETE` statement (see [`Predicate`]): it ends
/// before a top-level `RETURNING`, `ORDER BY`, `LIMIT`, `;` or the end of the text. `None` for
/// other statements, one without a `WHERE`, a `WITH` query or text with `format!` holes.
pub fn predicate(text: &str) -> Option<Predicate> {
    if text.contains('{') {
        return None;
    }
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .ok()?;
    let toks: Vec<_> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let kw = |i: usize, k: &str| {
        matches!(&toks.get(i)?.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(k))
            .then_some(())
    };
    if kw(0, "update").is_none() && kw(0, "delete").is_none() {
        return None;
    }
    let mut ambiguous = toks.iter().any(|t| {
        matches!(&t.token, Token::Word(w) if w.quote_style.is_some())
            || matches!(t.token, Token::DoubleQuotedString(_))
    });
    let mut depth = 0i32;
    // The first token of the predicate and the last one.
    let mut first = None;
    let mut last = None;
    let mut or = false;
    for (i, t) in toks.iter().enumerate() {
        let top = depth == 0;
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon if top => break,
            _ => {}
        }
        if first.is_none() {
            if top {
                // `DELETE FROM t` names its table with FROM; a later FROM or USING joins another.
                ambiguous |= kw(i, "using").is_some() || kw(i, "from").is_some() && i > 1;
                if kw(i, "where").is_some() {
                    first = toks.get(i + 1);
                }
            }
            continue;
        }
        if top
            && ["returning", "order", "limit", "offset", "for"]
                .iter()
                .any(|k| kw(i, k).is_some())
        {
            break;
        }
        or |= top && kw(i, "or").is_some();
        last = Some(*t);
    }
    let (first, last) = (first?, last?);
    let at = |l: &sqlparser::tokenizer::Location| (l.line as u32, l.column as u32);
    Some(Predicate {
        start: at(&first.span.start),
        end: at(&last.span.end),
        or,
        ambiguous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_comments() {
        let i = classify(
            "-- take the oldest available jobs; we don't want two workers on one\n/* claim them */\n  UPDATE jobs SET status = 'running' WHERE id = $1",
        )
        .unwrap();
        assert_eq!(i.kind, SqlKind::Update);
        assert_eq!(i.set_cols, vec!["status"]);
        assert!(classify("-- only a comment").is_none());
        assert!(classify("/* unterminated").is_none());
    }

    #[test]
    fn update_with_guard() {
        let i = classify("UPDATE orders SET status = 'paid', paid_at = now() WHERE id = $1 AND status = 'pending'").unwrap();
        assert_eq!(i.kind, SqlKind::Update);
        assert_eq!(i.tables, vec!["orders"]);
        assert_eq!(i.set_cols, vec!["status", "paid_at"]);
        assert_eq!(i.where_cols, vec!["id", "status"]);
        assert!(i.is_conditional());
    }

    #[test]
    fn relative_changes() {
        let i = classify(
            "UPDATE a SET n = n + 1, t.m = t.m - $1, log = log || 'x', c = $1 - c, d = e + 1 WHERE id = $2",
        )
        .unwrap();
        let value = |c: &str| {
            i.assigns
                .iter()
                .find(|(n, _)| n == c)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(value("n"), Some(SqlValue::Relative));
        assert_eq!(value("m"), Some(SqlValue::Relative));
        assert_eq!(
            value("log"),
            Some(SqlValue::Expr),
            "a concatenation is not counted"
        );
        assert_eq!(value("c"), Some(SqlValue::Param(Name::new("$1"))));
        assert_eq!(value("d"), Some(SqlValue::Expr), "another column's value");
    }

    #[test]
    fn update_by_key_only() {
        let i = classify("update public.orders o set status = $2 where o.id = $1").unwrap();
        assert_eq!(i.tables, vec!["orders"]);
        assert_eq!(i.where_cols, vec!["id"]);
        assert!(!i.is_conditional());
    }

    #[test]
    fn select_for_update() {
        let i = classify("SELECT status FROM seats WHERE id = $1 FOR UPDATE").unwrap();
        assert_eq!(i.kind, SqlKind::Select);
        assert!(i.locking);
        let j = classify("SELECT status FROM seats WHERE id = ?").unwrap();
        assert!(!j.locking);
    }

    #[test]
    fn a_select_that_orders_what_it_finds() {
        let ordered = |q: &str| classify(q).unwrap().ordered;
        assert!(ordered(
            "SELECT state FROM emails WHERE user_id = $1 ORDER BY sent_at DESC LIMIT 3"
        ));
        assert!(!ordered("SELECT state FROM emails WHERE user_id = $1"));
        assert!(!ordered("SELECT id, \"order\" FROM steps WHERE job = $1"));
    }

    #[test]
    fn a_select_that_counts_rows() {
        let count = |q: &str| classify(q).unwrap().counts;
        assert!(count("SELECT count(*) FROM memberships WHERE team_id = $1"));
        assert!(count("select COUNT(id) as n from seats"));
        assert!(!count("SELECT id, count FROM counters WHERE id = $1"));
        assert!(!count(
            "SELECT id FROM teams WHERE (SELECT count(*) FROM memberships) < $1"
        ));
        assert!(!count(
            "INSERT INTO m (a) SELECT $1 WHERE (SELECT count(*) FROM m) < $2"
        ));
    }

    #[test]
    fn insert_on_conflict() {
        let i = classify("INSERT INTO idem_keys (key, state) VALUES ($1, 'processing') ON CONFLICT (key) DO NOTHING").unwrap();
        assert_eq!(i.kind, SqlKind::Insert);
        assert_eq!(i.tables, vec!["idem_keys"]);
        assert!(i.on_conflict_nothing);
        let u =
            classify("INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = excluded.a")
                .unwrap();
        assert_eq!(u.kind, SqlKind::Insert);
        assert!(!u.on_conflict_nothing);
        for upsert in [
            "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
            "INSERT INTO kv (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)",
            "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)",
            "REPLACE INTO kv (k, v) VALUES (?, ?)",
            "INSERT INTO kv (k, v) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM kv WHERE k = $1)",
        ] {
            assert!(classify(upsert).unwrap().upsert, "{upsert}");
        }
        assert!(
            !classify("INSERT INTO kv (k, v) VALUES ($1, $2)")
                .unwrap()
                .upsert
        );
        let filtered =
            "INSERT INTO members (user_id, team_id) SELECT $1, id FROM teams WHERE id = $2";
        assert!(!classify(filtered).unwrap().upsert);
    }

    #[test]
    fn delete_and_control() {
        assert_eq!(
            classify("DELETE FROM tokens WHERE token = $1")
                .unwrap()
                .kind,
            SqlKind::Delete
        );
        assert_eq!(classify("BEGIN").unwrap().kind, SqlKind::Begin);
        assert_eq!(classify("commit").unwrap().kind, SqlKind::Commit);
        assert!(classify("hello world").is_none());
    }

    #[test]
    fn assignments_with_their_values() {
        let i = classify(
            "UPDATE jobs SET status = 'running'::job_state, locked_by = $2, locked_until = now() + interval '5 minutes', tries = tries + 1, started_at = NOW() WHERE id = $1",
        )
        .unwrap();
        assert_eq!(
            i.assigns,
            vec![
                ("status".into(), SqlValue::Literal("running".into())),
                ("locked_by".into(), SqlValue::Param("$2".into())),
                ("locked_until".into(), SqlValue::Expr),
                ("tries".into(), SqlValue::Relative),
                ("started_at".into(), SqlValue::Now),
            ]
        );
        let q = classify("update t set state = ?, owner = :me, x = @y where id = ?").unwrap();
        assert_eq!(
            q.assigns,
            vec![
                ("state".into(), SqlValue::Param("?1".into())),
                ("owner".into(), SqlValue::Param(":me".into())),
                ("x".into(), SqlValue::Param("@y".into())),
            ]
        );
        assert_eq!(q.where_cols, vec!["id"]);
        let ins = classify(
            "INSERT INTO idempotency (key, state, created_at) VALUES ($1, 'PROCESSING', CURRENT_TIMESTAMP) ON CONFLICT (key) DO UPDATE SET state = excluded.state",
        )
        .unwrap();
        assert_eq!(
            ins.assigns,
            vec![
                ("key".into(), SqlValue::Param("$1".into())),
                ("state".into(), SqlValue::Literal("PROCESSING".into())),
                ("created_at".into(), SqlValue::Now),
                ("state".into(), SqlValue::Expr),
            ]
        );
        assert!(ins.set_cols.is_empty(), "an upsert sets no UPDATE columns");
    }

    #[test]
    fn cut_statements_do_not_panic() {
        for text in [
            "UPDATE t SET a =",
            "UPDATE t SET a",
            "INSERT INTO t (a, b) VALUES (",
            "INSERT INTO t (a, b) VALUES",
            "INSERT INTO t (a VALUES (1",
            "UPDATE t SET a = (",
            "UPDATE t SET a = 'x'::",
        ] {
            let _ = classify(text);
        }
        assert_eq!(
            classify("UPDATE t SET a =").unwrap().assigns,
            vec![("a".into(), SqlValue::Expr)]
        );
    }

    #[test]
    fn a_stamp_set_where_it_was_null_is_a_claim() {
        let claim = |sql: &str| classify(sql).unwrap().null_claim;
        assert_eq!(
            claim("UPDATE jobs SET started_at = now() WHERE id = $1 AND started_at IS NULL")
                .as_deref(),
            Some("started_at")
        );
        assert_eq!(
            claim(
                "UPDATE q SET started_at=(strftime('%s', 'now')) WHERE jid IN \
                 (SELECT jid FROM q WHERE started_at IS NULL LIMIT 1)"
            )
            .as_deref(),
            Some("started_at")
        );
        // An old stamp taken back, a stamp tested otherwise, a value that is not the time.
        for sql in [
            "UPDATE jobs SET started_at = now() WHERE id = $1 AND (started_at IS NULL OR started_at < now() - interval '5 minutes')",
            "UPDATE jobs SET started_at = now() WHERE id = $1 AND started_at IS NOT NULL",
            "UPDATE jobs SET started_at = $2 WHERE id = $1 AND started_at IS NULL",
            "UPDATE jobs SET started_at = now() WHERE id = $1",
        ] {
            assert_eq!(claim(sql), None, "{sql}");
        }
    }

    #[test]
    fn an_unlocked_subquery_pick_does_not_guard_the_update() {
        let i = classify(
            "UPDATE transfers SET ledger_entry_id = $1 WHERE id = (SELECT id FROM transfers WHERE ledger_entry_id IS NULL LIMIT 1) RETURNING id",
        )
        .unwrap();
        assert_eq!(i.where_cols, vec!["id"]);
        assert_eq!(i.picked_claim.as_deref(), Some("ledger_entry_id"));
        // Locked, the pick is tested again once the row is held: its filter guards the write.
        let locked = classify(
            "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = 'queued' LIMIT 1 FOR UPDATE SKIP LOCKED)",
        )
        .unwrap();
        assert_eq!(locked.where_cols, vec!["id", "status"]);
        assert_eq!(locked.picked_claim, None);
        // A transition of every qualifying row (no `LIMIT`) keeps them too.
        let all = classify(
            "UPDATE jobs SET status = 'queued' WHERE id IN (SELECT id FROM jobs WHERE status = 'waiting')",
        )
        .unwrap();
        assert_eq!(all.where_cols, vec!["id", "status"]);
        assert_eq!(all.picked_claim, None);
        // A read keeps its subquery's columns.
        let read = classify(
            "SELECT * FROM users WHERE id IN (SELECT user_id FROM resets WHERE token = $1)",
        )
        .unwrap();
        assert_eq!(read.where_cols, vec!["id", "token"]);
    }

    #[test]
    fn a_locking_cte_keeps_its_filter() {
        let i = classify(
            "WITH picked AS (SELECT id FROM jobs WHERE status = $1 AND run_at <= now() FOR UPDATE SKIP LOCKED)
             UPDATE jobs j SET status = $2 FROM picked WHERE j.id = picked.id RETURNING j.id",
        )
        .unwrap();
        assert_eq!(i.kind, SqlKind::Update);
        assert!(i.locking);
        assert_eq!(i.where_cols, vec!["id"]);
        assert_eq!(i.cte_where_cols, vec!["status", "run_at"]);
        assert!(!i.cte_writes, "a locking select in the WITH writes nothing");
    }

    #[test]
    fn a_claiming_cte_writes() {
        let i = classify(
            "WITH claimed AS (UPDATE jobs SET status = $1 WHERE id IN (SELECT id FROM jobs WHERE status = $2 LIMIT 5 FOR UPDATE SKIP LOCKED) RETURNING jobs)
             SELECT jobs FROM claimed ORDER BY id",
        )
        .unwrap();
        assert_eq!(i.kind, SqlKind::Select);
        assert!(i.locking);
        assert!(i.cte_writes);
        assert!(
            !classify("SELECT id FROM jobs FOR UPDATE")
                .unwrap()
                .cte_writes
        );
    }

    #[test]
    fn format_holes() {
        let i = classify("UPDATE {table} SET status = '{}' WHERE id = $1").unwrap();
        assert_eq!(i.kind, SqlKind::Update);
        assert_eq!(i.set_cols, vec!["status"]);
    }

    #[test]
    fn a_predicate_ends_before_returning_and_says_where_it_is() {
        let text = "UPDATE orders SET status = 'paid' WHERE id = $1 RETURNING id";
        let p = predicate(text).unwrap();
        let (s, e) = (p.start.1 as usize - 1, p.end.1 as usize - 1);
        assert_eq!(&text[s..e], "id = $1");
        assert!(!p.or && !p.ambiguous);

        let text = "UPDATE jobs\n   SET status = 'done'\n WHERE id = $1 OR (a = 1 OR b = 2)\n ORDER BY id LIMIT 1;";
        let p = predicate(text).unwrap();
        assert_eq!((p.start, p.end), ((3, 8), (3, 35)));
        assert!(p.or);

        let p = predicate("DELETE FROM tokens WHERE token = $1 AND (x OR y)").unwrap();
        assert!(!p.or && !p.ambiguous);
        assert!(
            predicate("UPDATE a SET s = 'x' FROM b WHERE a.id = b.id")
                .unwrap()
                .ambiguous
        );
        assert!(
            predicate("UPDATE \"Orders\" SET s = 'x' WHERE id = 1")
                .unwrap()
                .ambiguous
        );
        for none in [
            "SELECT status FROM orders WHERE id = $1",
            "UPDATE orders SET status = 'x'",
            "UPDATE orders SET status = 'x' WHERE RETURNING id",
            "UPDATE {table} SET status = 'x' WHERE id = 1",
        ] {
            assert_eq!(predicate(none), None, "{none}");
        }
    }
}
