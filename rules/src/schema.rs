//! The unique keys a project's SQL schema declares: `.sql` files (migrations, `schema.sql`) read
//! on `sqlparser`'s tokenizer for `CREATE TABLE` (column and table `PRIMARY KEY` / `UNIQUE`),
//! `CREATE UNIQUE INDEX` and `ALTER TABLE .. ADD [CONSTRAINT ..] UNIQUE | PRIMARY KEY`. A
//! rule asks whether two rows with the same values in some columns can both exist.

use crate::fxhash::FxHashMap;
use crate::kb::db::normalize_table;
use crate::name::Name;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::tokenizer::{Token, Tokenizer};

/// What one schema file declares: the tables it creates or alters, and their unique keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schema {
    /// Tables created (normalised like every table name: `orders` → `order`).
    pub tables: Vec<Name>,
    /// A table and the columns of one of its unique keys (a primary key is one).
    pub unique: Vec<(Name, Box<[Name]>)>,
    /// `ALTER TABLE old RENAME TO new`: the keys declared under the old name hold under the new.
    pub renames: Vec<(Name, Name)>,
}

#[derive(Debug, Clone, PartialEq)]
enum T {
    Word(String),
    Open,
    Close,
    Comma,
    Dot,
    Semi,
    Other,
}

impl T {
    fn is(&self, kw: &str) -> bool {
        matches!(self, T::Word(w) if w == kw)
    }
}

/// A renamed table keeps its keys, through chains of renames in any file order; only a table
/// some file declares (a key of `tables`) passes them on.
pub fn carry_renames(tables: &mut FxHashMap<Name, Vec<Box<[Name]>>>, renames: &[(Name, Name)]) {
    loop {
        let mut changed = false;
        for (old, new) in renames {
            let Some(keys) = tables.get(old).cloned() else {
                continue;
            };
            let before = tables.get(new).map(Vec::len);
            let into = tables.entry(new.clone()).or_default();
            for k in keys {
                if !into.contains(&k) {
                    into.push(k);
                }
            }
            changed |= before != Some(into.len());
        }
        if !changed {
            return;
        }
    }
}

/// A migration that undoes another: diesel's `down.sql`, sqlx's and golang-migrate's
/// `0001_x.down.sql`.
pub fn is_down_migration(path: &str) -> bool {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let stem = file.strip_suffix(".sql").unwrap_or(file);
    stem == "down" || stem.ends_with(".down")
}

/// Reads a schema file. When the tokenizer rejects the text (another dialect's string escapes,
/// say), each `;`-separated piece is read on its own, so one odd statement loses only itself.
pub fn read(text: &str) -> Schema {
    let mut out = Schema::default();
    match tokens(text) {
        Some(toks) => statements(&toks, &mut out),
        None => {
            for piece in text.split(';') {
                if let Some(toks) = tokens(piece) {
                    statements(&toks, &mut out);
                }
            }
        }
    }
    out
}

fn tokens(text: &str) -> Option<Vec<T>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, text)
        .tokenize()
        .ok()?;
    let toks = tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Whitespace(_) => None,
            Token::Word(w) => Some(T::Word(w.value.to_ascii_lowercase())),
            Token::LParen => Some(T::Open),
            Token::RParen => Some(T::Close),
            Token::Comma => Some(T::Comma),
            Token::Period => Some(T::Dot),
            Token::SemiColon => Some(T::Semi),
            _ => Some(T::Other),
        })
        .collect();
    Some(toks)
}

fn statements(toks: &[T], out: &mut Schema) {
    let mut i = 0;
    while i < toks.len() {
        let end = toks[i..]
            .iter()
            .position(|t| *t == T::Semi)
            .map_or(toks.len(), |p| i + p);
        statement(&toks[i..end], out);
        i = end + 1;
    }
}

fn statement(s: &[T], out: &mut Schema) {
    let mut i = 0;
    let skip = |i: &mut usize, words: &[&str]| {
        while s.get(*i).is_some_and(|t| words.iter().any(|w| t.is(w))) {
            *i += 1;
        }
    };
    if s.first().is_some_and(|t| t.is("create")) {
        i += 1;
        skip(
            &mut i,
            &[
                "or",
                "replace",
                "temporary",
                "temp",
                "unlogged",
                "global",
                "local",
            ],
        );
        if s.get(i).is_some_and(|t| t.is("table")) {
            i += 1;
            skip(&mut i, &["if", "not", "exists"]);
            let Some((table, next)) = name_at(s, i) else {
                return;
            };
            out.tables.push(table.clone());
            if s.get(next) == Some(&T::Open) {
                for element in elements(&s[next + 1..]) {
                    table_element(&table, element, out);
                }
            }
        } else if s.get(i).is_some_and(|t| t.is("unique"))
            && s.get(i + 1).is_some_and(|t| t.is("index"))
        {
            let Some(on) = s.iter().position(|t| t.is("on")) else {
                return;
            };
            let mut j = on + 1;
            skip(&mut j, &["only"]);
            let Some((table, mut next)) = name_at(s, j) else {
                return;
            };
            if s.get(next).is_some_and(|t| t.is("using")) {
                next += 2;
            }
            if s.get(next) == Some(&T::Open) {
                push_key(out, &table, columns(&s[next + 1..]));
            }
        }
    } else if s.first().is_some_and(|t| t.is("alter")) && s.get(1).is_some_and(|t| t.is("table")) {
        i = 2;
        skip(&mut i, &["if", "exists", "only"]);
        let Some((table, next)) = name_at(s, i) else {
            return;
        };
        // Altering declares no table: one created elsewhere (Rust migration code, a file not
        // read) keeps its unknown keys.
        if s.get(next).is_some_and(|t| t.is("rename"))
            && s.get(next + 1).is_some_and(|t| t.is("to"))
            && let Some((new, _)) = name_at(s, next + 2)
        {
            out.renames.push((table, new));
            return;
        }
        // Each `ADD ..` clause up to the next top-level comma.
        for clause in elements(&s[next..]) {
            let mut k = 0;
            if !clause.first().is_some_and(|t| t.is("add")) {
                continue;
            }
            k += 1;
            if clause.get(k).is_some_and(|t| t.is("column")) {
                k += 1;
            }
            let rest = &clause[k..];
            if rest.first().is_some_and(|t| t.is("if")) {
                table_element(&table, &rest[3.min(rest.len())..], out);
            } else {
                table_element(&table, rest, out);
            }
        }
    }
}

/// One element of a `CREATE TABLE` list (or an `ADD` clause): a table constraint or a column.
fn table_element(table: &Name, e: &[T], out: &mut Schema) {
    let mut e = e;
    if e.first().is_some_and(|t| t.is("constraint")) {
        e = &e[2.min(e.len())..];
    }
    let key_start = if e.first().is_some_and(|t| t.is("unique")) {
        Some(1)
    } else if e.first().is_some_and(|t| t.is("primary")) && e.get(1).is_some_and(|t| t.is("key")) {
        Some(2)
    } else {
        None
    };
    if let Some(k) = key_start {
        // `UNIQUE NULLS NOT DISTINCT (a, b)`, `UNIQUE (a, b)`.
        if let Some(open) = e[k..].iter().position(|t| *t == T::Open) {
            push_key(out, table, columns(&e[k + open + 1..]));
        }
        return;
    }
    if matches!(
        e.first(),
        Some(T::Word(w)) if matches!(w.as_str(), "foreign" | "check" | "exclude" | "like")
    ) {
        return;
    }
    // A column: `email TEXT NOT NULL UNIQUE`, `id BIGSERIAL PRIMARY KEY`.
    let Some(T::Word(column)) = e.first() else {
        return;
    };
    let mut depth = 0;
    for (i, t) in e.iter().enumerate() {
        match t {
            T::Open => depth += 1,
            T::Close => depth -= 1,
            _ if depth == 0
                && (t.is("unique")
                    || t.is("primary") && e.get(i + 1).is_some_and(|n| n.is("key"))) =>
            {
                push_key(out, table, vec![Name::from(column.as_str())]);
                return;
            }
            _ => {}
        }
    }
}

/// A possibly schema-qualified name at `i` (`public.orders` → `order`) and the index after it.
fn name_at(s: &[T], mut i: usize) -> Option<(Name, usize)> {
    let T::Word(mut name) = s.get(i)?.clone() else {
        return None;
    };
    while s.get(i + 1) == Some(&T::Dot) {
        let Some(T::Word(w)) = s.get(i + 2) else {
            break;
        };
        name = w.clone();
        i += 2;
    }
    Some((normalize_table(&name), i + 1))
}

/// The comma-separated elements of a parenthesised list that starts after its `(` (nested
/// parentheses kept inside their element), up to its `)`.
fn elements(s: &[T]) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, t) in s.iter().enumerate() {
        match t {
            T::Open => depth += 1,
            T::Close if depth == 0 => {
                out.push(&s[start..i]);
                return out;
            }
            T::Close => depth -= 1,
            T::Comma if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The columns of a key list after its `(`: the column words of each element (`lower(email)`
/// is `email`; `ASC`, `DESC`, `NULLS ..`, `COLLATE x` and operator classes are not columns).
fn columns(s: &[T]) -> Vec<Name> {
    let mut cols = Vec::new();
    for e in elements(s) {
        // A word before `(` is a function (`lower(email)`), unless a length follows (MySQL's
        // prefix index `email(191)`).
        let word = e.iter().enumerate().find_map(|(i, t)| match t {
            T::Word(w)
                if !KEY_NOISE.contains(&w.as_str())
                    && (e.get(i + 1) != Some(&T::Open) || e.get(i + 2) == Some(&T::Other)) =>
            {
                Some(w)
            }
            _ => None,
        });
        if let Some(w) = word {
            cols.push(Name::from(w.as_str()));
        }
    }
    cols
}

const KEY_NOISE: &[&str] = &[
    "asc", "desc", "nulls", "first", "last", "collate", "not", "distinct",
];

fn push_key(out: &mut Schema, table: &Name, mut cols: Vec<Name>) {
    if cols.is_empty() {
        return;
    }
    cols.sort();
    cols.dedup();
    let key = (table.clone(), cols.into_boxed_slice());
    if !out.unique.contains(&key) {
        out.unique.push(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<String> {
        read(text)
            .unique
            .iter()
            .map(|(t, cols)| format!("{t}({})", cols.join(",")))
            .collect()
    }

    #[test]
    fn create_table_column_and_table_keys() {
        let sql = "CREATE TABLE IF NOT EXISTS public.users (
            id BIGSERIAL PRIMARY KEY,
            email TEXT NOT NULL UNIQUE,
            org_id BIGINT REFERENCES orgs (id),
            owner_id BIGINT REFERENCES users (id) ON DELETE CASCADE UNIQUE,
            name TEXT DEFAULT lower('x'),
            CONSTRAINT users_org_name UNIQUE (org_id, name),
            CHECK (length(name) > 0)
        );
        CREATE TABLE likes (user_id INT, post_id INT, PRIMARY KEY (user_id, post_id));";
        assert_eq!(
            keys(sql),
            [
                "user(id)",
                "user(email)",
                "user(owner_id)",
                "user(name,org_id)",
                "like(post_id,user_id)"
            ]
        );
        assert_eq!(read(sql).tables, [Name::from("user"), Name::from("like")]);
    }

    #[test]
    fn unique_indexes_and_altered_tables() {
        let sql = r#"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idx_mail ON "accounts" USING btree (lower(email)) WHERE deleted_at IS NULL;
            CREATE INDEX idx_plain ON tasks (uniq_hash);
            ALTER TABLE ONLY tasks ADD CONSTRAINT tasks_pk PRIMARY KEY (id), ADD COLUMN slug TEXT UNIQUE;
            ALTER TABLE reposts ADD COLUMN IF NOT EXISTS note TEXT;"#;
        assert_eq!(keys(sql), ["account(email)", "task(id)", "task(slug)"]);
        assert_eq!(
            read("ALTER TABLE IF EXISTS old_batches RENAME TO l1_batches;").renames,
            [(Name::from("old_batch"), Name::from("l1_batch"))]
        );
        // Altering a table declares none (its keys may be declared elsewhere).
        assert!(read(sql).tables.is_empty());
    }

    #[test]
    fn prefix_indexes_name_their_column() {
        let sql = "CREATE TABLE u (id INT, email VARCHAR(255), UNIQUE KEY uk (email(191)))";
        assert_eq!(keys(sql), ["u(email)"]);
    }

    #[test]
    fn down_migrations_are_told_apart() {
        assert!(is_down_migration("migrations/2024-01-01_init/down.sql"));
        assert!(is_down_migration("migrations/0002_tags.down.sql"));
        assert!(is_down_migration("db\\0003_x.down.sql"));
        assert!(!is_down_migration("migrations/0007_shut_down.sql"));
        assert!(!is_down_migration("migrations/0002_tags.up.sql"));
        assert!(!is_down_migration("migrations/0004_countdown.sql"));
    }

    #[test]
    fn text_that_is_not_a_schema_declares_nothing() {
        assert_eq!(
            read("INSERT INTO users (id) VALUES (1); SELECT 'unterminated"),
            Schema::default()
        );
        // A statement the tokenizer rejects loses only itself.
        let odd = "CREATE TABLE a (id INT PRIMARY KEY); INSERT INTO a VALUES ('unterminated";
        assert_eq!(keys(odd), ["a(id)"]);
        assert!(read("-- nothing\n").unique.is_empty());
    }
}
