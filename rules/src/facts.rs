//! Crate-wide facts, merged from every lowered file: functions and methods with their impl type,
//! struct field types, `use` aliases, consts holding SQL, trait implementations.

use crate::fxhash::{FxHashMap, FxHashSet};
use crate::ir::{Body, FileIr, Name, TypeRef};
use crate::sql::SqlInfo;

/// A body's global index: file index and body index in that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyId {
    pub file: u32,
    pub body: u32,
}

/// One value per body of the crate, indexed by [`BodyId`]. Bodies are numbered densely file by
/// file, so a vector with per-file offsets does what a hash map keyed by `BodyId` did, without
/// hashing and with the values in body order.
#[derive(Debug)]
pub struct PerBody<T> {
    /// Index in `items` of each file's first body, then the total.
    start: Vec<u32>,
    items: Vec<T>,
}

impl<T> PerBody<T> {
    /// `items` in body order (file by file), `counts` the number of bodies of each file.
    pub fn new(counts: impl IntoIterator<Item = usize>, items: Vec<T>) -> PerBody<T> {
        let mut start = vec![0u32];
        for n in counts {
            start.push(start[start.len() - 1] + n as u32);
        }
        assert_eq!(
            start[start.len() - 1] as usize,
            items.len(),
            "one value per body"
        );
        PerBody { start, items }
    }

    /// `items` (in body order) laid out like `layout`.
    pub fn new_like<U>(layout: &PerBody<U>, items: Vec<T>) -> PerBody<T> {
        assert_eq!(items.len(), layout.items.len(), "one value per body");
        PerBody {
            start: layout.start.clone(),
            items,
        }
    }

    /// The same layout with `f` of each value.
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> PerBody<U> {
        PerBody {
            start: self.start.clone(),
            items: self.items.iter().map(f).collect(),
        }
    }

    fn index_of(&self, id: &BodyId) -> Option<usize> {
        let file = id.file as usize;
        let (first, end) = (*self.start.get(file)?, *self.start.get(file + 1)?);
        let i = first as usize + id.body as usize;
        (i < end as usize).then_some(i)
    }

    pub fn get(&self, id: &BodyId) -> Option<&T> {
        self.index_of(id).map(|i| &self.items[i])
    }

    pub fn get_mut(&mut self, id: &BodyId) -> Option<&mut T> {
        self.index_of(id).map(|i| &mut self.items[i])
    }

    /// Every value, in body order.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }
}

impl<T> std::ops::Index<&BodyId> for PerBody<T> {
    type Output = T;

    fn index(&self, id: &BodyId) -> &T {
        self.get(id).expect("a body of the crate being checked")
    }
}

/// Everything known about the crate (or workspace) being checked.
#[derive(Debug, Default)]
pub struct Facts<'a> {
    /// Struct name to its named fields, borrowed from the lowered file that declares it.
    pub structs: FxHashMap<&'a str, &'a [(Name, TypeRef)]>,
    pub sql_consts: FxHashMap<Name, SqlInfo>,
    pub str_consts: FxHashMap<Name, Name>,
    /// Trait name to the types implementing it in the crate.
    pub trait_impls: FxHashMap<Name, Vec<Name>>,
    /// The other way round: a type to the crate traits it implements.
    pub traits_of: FxHashMap<Name, Vec<Name>>,
    /// Free fns by ident.
    pub free_fns: FxHashMap<&'a str, Vec<BodyId>>,
    /// Methods by (self type or trait, ident).
    pub methods_of: FxHashMap<(Name, Name), Vec<BodyId>>,
    /// Methods by ident alone (any type).
    pub methods_named: FxHashMap<&'a str, Vec<BodyId>>,
    /// Methods taking `&mut self`.
    pub mut_self: FxHashSet<BodyId>,
    /// Bodies by their impl's self type, and by the (last segment of the) types their
    /// non-`self` parameters mention: built on first use (see [`Facts::by_type`]).
    /// (Keyed by owned names: a lifetime inside a `OnceLock` would make `Facts` invariant.)
    by_type: std::sync::OnceLock<FxHashMap<Name, Vec<BodyId>>>,
    taking: std::sync::OnceLock<FxHashMap<Name, Vec<BodyId>>>,
    /// (package, struct name) to where the package declares it (file, index among the file's
    /// structs), `None` when it declares it twice: built on first use (see
    /// [`Facts::package_struct`]).
    package_structs: std::sync::OnceLock<PackageStructs>,
    /// Every file's bodies, for the indexes built on first use.
    bodies: Vec<&'a [Body]>,
    /// `type Alias = Target;` across the crate.
    pub aliases: FxHashMap<Name, TypeRef>,
    /// Per file: its `use` aliases, sorted by alias at lowering, borrowed.
    pub uses: Vec<&'a [(Name, Name)]>,
    /// Per package (see [`package_root`]): the names of its modules, every directory and file
    /// stem of its files below the package root (`-` read as `_`) and every inline `mod`. A
    /// path whose first segment is none of these, no package name and not `crate` / `self` /
    /// `super` (`sqlx::query`, `diesel::update`, `bitcoin::Transaction` where another package
    /// has a `bitcoin` module) names a library, not a crate fn.
    modules: Vec<FxHashSet<Name>>,
    /// The names of the checked packages (their root directories' names, `-` read as `_`): a
    /// path through another package of the workspace (`billing_core::charge`) is the
    /// workspace's own.
    packages: FxHashSet<Name>,
    /// Per package: its name, when its root directory has one.
    package_names: Vec<Option<Name>>,
    /// The names the workspace's packages are imported by (`cache_service`), each with its
    /// package, when the caller told them (see [`crate::Analyzer::with_crates`]).
    crate_names: Vec<(Name, u32)>,
    /// Per file (in file order): the index of its package in `modules`.
    package_of: Vec<u32>,
    /// Per file: its inline `mod`s, merged into its package's modules with the paths.
    inline_mods: Vec<&'a [(Name, bool)]>,
    /// Tables the schema files declare, and their unique keys (sorted columns).
    pub schema: FxHashMap<Name, Vec<Box<[Name]>>>,
    /// Per file (in file order): its path, whose directories and stem name its modules.
    pub paths: Vec<&'a str>,
    /// Per package: the SQL databases its types and `use` paths name (see [`Dialects`]);
    /// built on first use.
    dialects: std::sync::OnceLock<Vec<Dialects>>,
    /// Per file: the structs it declares, for what their field types name there.
    file_structs: Vec<&'a [StructDecl]>,
    /// The crate's structs with a field typed by a bare `Transaction` that the declaring file
    /// imports from a library that is no database (`use bitcoin::Transaction`); found on first
    /// use (see [`Facts::foreign_transaction_field`]).
    foreign_transaction: std::sync::OnceLock<FxHashSet<Name>>,
}

/// (package, struct name) to where the package declares it: (file, index among the file's
/// structs), `None` when it declares it twice.
type PackageStructs = FxHashMap<(u32, Name), Option<(u32, u32)>>;

/// A struct as a file declares it: its name and its named fields with their types.
type StructDecl = (Name, Vec<(Name, TypeRef)>);

/// The SQL databases a package's code names, as bits: its `use` paths, and the types of its
/// fns' parameters and results (through `type` aliases): `SqlitePool`, `sqlx::Sqlite`,
/// `rusqlite::Connection`, `diesel::SqliteConnection`; `PgPool`, `tokio_postgres::Client`;
/// `MySqlPool`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dialects(u8);

impl Dialects {
    const SQLITE: u8 = 1;
    const POSTGRES: u8 = 2;
    const MYSQL: u8 = 4;

    /// Adds what one path or type names.
    fn note(&mut self, text: &str) {
        for seg in text.split([':', '<', '>', ',', ' ', '&', '(', ')', '[', ']']) {
            if seg.is_empty() {
                continue;
            }
            let lower = seg.to_ascii_lowercase();
            if lower.contains("sqlite") {
                self.0 |= Self::SQLITE;
            }
            // `Pg` followed by a capital (`PgPool`, `PgConnection`, `PgExecutor`), or the name.
            let pg = seg.strip_prefix("Pg").and_then(|r| r.chars().next());
            if lower.contains("postgres") || pg.is_some_and(|c| c.is_ascii_uppercase()) {
                self.0 |= Self::POSTGRES;
            }
            if lower.contains("mysql") || lower.contains("mariadb") {
                self.0 |= Self::MYSQL;
            }
        }
    }

    /// Only SQLite is named: every transaction of the package is an SQLite one.
    pub fn sqlite_only(self) -> bool {
        self.0 == Self::SQLITE
    }
}

/// The module names a file's path gives: its directories and its stem, without `src`, `mod`,
/// `lib`, `main` (as written: `-` is not yet `_`).
fn path_modules(path: &str) -> impl Iterator<Item = &str> {
    path.split(['/', '\\'])
        .map(|part| part.strip_suffix(".rs").unwrap_or(part))
        .filter(|stem| {
            !stem.is_empty() && !matches!(*stem, "." | ".." | "src" | "mod" | "lib" | "main")
        })
}

/// A file's package root and the rest of its path: the directory before its last `src`
/// segment (`crates/billing/src/pay.rs` -> `crates/billing`, `pay.rs`), else before its last
/// `tests`, `benches` or `examples` segment (a package's other targets), else the empty root
/// (plain files: one package). Module names come from the rest only, so `bitcoin-ext/src/
/// bitcoin.rs` makes `bitcoin` a module of the `bitcoin-ext` package, not of every package.
pub(crate) fn package_root(path: &str) -> (&str, &str) {
    let bytes = path.as_bytes();
    let is_sep = |i: usize| bytes[i] == b'/' || bytes[i] == b'\\';
    // Segment boundaries: (start, end) of each segment.
    let mut segs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for i in 0..=bytes.len() {
        if i == bytes.len() || is_sep(i) {
            if i > start {
                segs.push((start, i));
            }
            start = i + 1;
        }
    }
    let dirs = &segs[..segs.len().saturating_sub(1)];
    let find = |names: &[&str]| {
        dirs.iter()
            .rev()
            .find(|(a, b)| names.contains(&&path[*a..*b]))
            .copied()
    };
    match find(&["src"]).or_else(|| find(&["tests", "benches", "examples"])) {
        Some((a, b)) => (path[..a].trim_end_matches(['/', '\\']), &path[b..]),
        None => ("", path),
    }
}

/// Does a path segment (`my-lib`, as written) name the module `module` (`my_lib`)?
fn same_module(seg: &str, module: &str) -> bool {
    seg.len() == module.len()
        && seg
            .bytes()
            .zip(module.bytes())
            .all(|(a, b)| a == b || a == b'-' && b == b'_')
}

impl<'a> Facts<'a> {
    /// Merges every file's facts; the per-file `use` tables are built on up to `threads`
    /// threads.
    pub fn collect(files: &[&'a FileIr]) -> Facts<'a> {
        let mut renames: Vec<(Name, Name)> = Vec::new();
        let mut f = Facts {
            bodies: files.iter().map(|file| file.bodies.as_slice()).collect(),
            uses: files
                .iter()
                .map(|file| file.facts.uses.as_slice())
                .collect(),
            inline_mods: files
                .iter()
                .map(|file| file.facts.mods.as_slice())
                .collect(),
            file_structs: files
                .iter()
                .map(|file| file.facts.structs.as_slice())
                .collect(),
            ..Facts::default()
        };
        for (fi, &file) in files.iter().enumerate() {
            for (name, fields) in &file.facts.structs {
                f.structs.entry(name.as_str()).or_insert(fields.as_slice());
            }
            for (name, info) in &file.facts.sql_consts {
                f.sql_consts.insert(name.clone(), info.clone());
            }
            for (name, s) in &file.facts.str_consts {
                f.str_consts.insert(name.clone(), s.clone());
            }
            if let Some(schema) = &file.facts.schema {
                for t in &schema.tables {
                    f.schema.entry(t.clone()).or_default();
                }
                for (t, cols) in &schema.unique {
                    f.schema.entry(t.clone()).or_default().push(cols.clone());
                }
                renames.extend(schema.renames.iter().cloned());
            }
            for (a, ty) in &file.facts.aliases {
                f.aliases.insert(a.clone(), ty.clone());
            }
            for (t, ty) in &file.facts.trait_impls {
                f.trait_impls.entry(t.clone()).or_default().push(ty.clone());
                f.traits_of.entry(ty.clone()).or_default().push(t.clone());
            }
            for (bi, b) in file.bodies.iter().enumerate() {
                let id = BodyId {
                    file: fi as u32,
                    body: bi as u32,
                };
                match (&b.self_ty, &b.trait_name) {
                    (None, _) => f.free_fns.entry(b.ident.as_str()).or_default().push(id),
                    (Some(t), tr) => {
                        f.methods_named
                            .entry(b.ident.as_str())
                            .or_default()
                            .push(id);
                        if b.mut_self {
                            f.mut_self.insert(id);
                        }
                        f.methods_of
                            .entry((t.clone(), b.ident.clone()))
                            .or_default()
                            .push(id);
                        if let Some(tr) = tr.as_ref().filter(|tr| *tr != t) {
                            f.methods_of
                                .entry((tr.clone(), b.ident.clone()))
                                .or_default()
                                .push(id);
                        }
                    }
                }
            }
        }
        crate::schema::carry_renames(&mut f.schema, &renames);
        f
    }

    /// The table of the one sea-orm model the file declares, `Model` with its
    /// `#[sea_orm(table_name = ..)]`: what a bare `Entity` or `ActiveModel` of that file's
    /// entity module stands for (`mod entity { .. }` inline, `use self::entity::Entity`).
    pub fn file_model_table(&self, file: u32) -> Option<&Name> {
        let mut tables = self
            .file_structs
            .get(file as usize)?
            .iter()
            .filter_map(|(s, fields)| {
                (s == "Model")
                    .then(|| {
                        fields
                            .iter()
                            .find(|(f, _)| f == crate::ir::SEA_ORM_TABLE_FIELD)
                    })
                    .flatten()
                    .and_then(|(_, t)| t.first())
            });
        let one = tables.next()?;
        tables.next().is_none().then_some(one)
    }

    /// Does struct `name` type a field with a bare `Transaction` that its file imports from a
    /// library that is no database (`use bitcoin::Transaction;` .. `tx: Transaction`), or that
    /// is the crate's own `Transaction` struct (a ledger's or a chain's transaction kept as
    /// data: `pending: Mutex<VecDeque<Transaction>>`; whether that struct holds a database
    /// transaction is asked of its own fields)?
    pub fn foreign_transaction_field(&self, name: &str) -> bool {
        let set = self.foreign_transaction.get_or_init(|| {
            let mut out = FxHashSet::default();
            let own = self.structs.contains_key("Transaction");
            for (fi, structs) in self.file_structs.iter().enumerate() {
                for (s, fields) in structs.iter() {
                    let foreign = fields.iter().flat_map(|(_, ty)| ty.iter()).any(|seg| {
                        if seg != "Transaction" {
                            return false;
                        }
                        let full = self.resolve(fi as u32, seg);
                        let head = full.split("::").next().unwrap_or("");
                        !crate::apis::DB_TRANSACTION_CRATES.contains(&head)
                            && (own
                                || full.contains("::") && !self.in_scope_module(fi as u32, head))
                    });
                    if foreign {
                        out.insert(s.clone());
                    }
                }
            }
            out
        });
        set.contains(name)
    }

    /// The SQL databases the package of `file` names (see [`Dialects`]).
    pub fn dialects(&self, file: u32) -> Dialects {
        let all = self.dialects.get_or_init(|| {
            let n = self
                .package_of
                .iter()
                .copied()
                .max()
                .map_or(1, |m| m as usize + 1);
            let mut out = vec![Dialects::default(); n];
            let note_ty = |d: &mut Dialects, ty: &[Name]| self.note_type(d, ty);
            for (fi, bodies) in self.bodies.iter().enumerate() {
                let d = &mut out[self.package_of(fi as u32) as usize];
                for (_, full) in self.uses.get(fi).copied().unwrap_or(&[]) {
                    d.note(full);
                }
                for b in bodies.iter() {
                    for (_, ty) in b.params.iter() {
                        note_ty(d, ty);
                    }
                    note_ty(d, &b.ret);
                }
            }
            out
        });
        all.get(self.package_of(file) as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The SQL databases one body's own types name: its parameters and result, and the fields
    /// of its impl's struct (`pool: SqlitePool`) when its package declares that struct once. A package with a store per database (a
    /// PostgreSQL and an SQLite implementation of one trait) names both; each store's bodies
    /// name one.
    pub fn body_dialects(&self, id: BodyId) -> Dialects {
        let b = self.body(id);
        let mut d = Dialects::default();
        for (n, ty) in b.params.iter() {
            if n != "self" {
                self.note_type(&mut d, ty);
            }
        }
        self.note_type(&mut d, &b.ret);
        // The impl's struct as its package declares it (a same-named struct elsewhere is
        // another type), and only when no parameter is a struct of the crate's that may carry
        // a connection of its own (`state: &AppState`).
        let carrier = b.params.iter().any(|(n, ty)| {
            n != "self"
                && ty
                    .first()
                    .is_some_and(|t| self.structs.contains_key(crate::kb::types::named_type(t)))
        });
        if let Some(fields) = b
            .self_ty
            .as_deref()
            .filter(|_| !carrier)
            .and_then(|t| self.package_struct(self.package_of(id.file), t))
        {
            for (_, ty) in fields.iter() {
                self.note_type(&mut d, ty);
            }
        }
        d
    }

    /// The fields of struct `name` as package `package` declares it, when it declares it once
    /// (two declarations, in two modules, are two types). Indexed on first use.
    fn package_struct(&self, package: u32, name: &str) -> Option<&'a [(Name, TypeRef)]> {
        let index = self.package_structs.get_or_init(|| {
            let mut map = PackageStructs::default();
            for (fi, structs) in self.file_structs.iter().enumerate() {
                let package = self.package_of(fi as u32);
                for (si, (n, _)) in structs.iter().enumerate() {
                    map.entry((package, n.clone()))
                        .and_modify(|at| *at = None)
                        .or_insert(Some((fi as u32, si as u32)));
                }
            }
            map
        });
        let (fi, si) = (*index.get(&(package, Name::new(name)))?)?;
        Some(self.file_structs[fi as usize][si as usize].1.as_slice())
    }

    /// Adds to `d` what a type as written names, and what the `type` alias it is names.
    fn note_type(&self, d: &mut Dialects, ty: &[Name]) {
        for t in ty {
            d.note(t);
            let last = t.rsplit(':').next().unwrap_or(t);
            if let Some(target) = self.aliases.get(last) {
                for x in target.iter() {
                    d.note(x);
                }
            }
        }
    }

    /// Bodies by their impl's self type. Only one rule asks, and rarely: built on first use
    /// instead of on every check.
    pub fn by_type(&self) -> &FxHashMap<Name, Vec<BodyId>> {
        self.by_type.get_or_init(|| {
            let mut map: FxHashMap<Name, Vec<BodyId>> = FxHashMap::default();
            for (id, b) in self.all_bodies() {
                if let Some(t) = &b.self_ty {
                    map.entry(t.clone()).or_default().push(id);
                }
            }
            map
        })
    }

    /// Bodies by the (last segment of the) types their non-`self` parameters mention; built on
    /// first use like [`Facts::by_type`].
    pub fn taking(&self) -> &FxHashMap<Name, Vec<BodyId>> {
        self.taking.get_or_init(|| {
            let mut map: FxHashMap<Name, Vec<BodyId>> = FxHashMap::default();
            for (id, b) in self.all_bodies() {
                for (n, ty) in &b.params {
                    if n != "self" {
                        for x in ty {
                            let last = x.rsplit(':').next().unwrap_or(x);
                            let v = map.entry(Name::new(last)).or_default();
                            if v.last() != Some(&id) {
                                v.push(id);
                            }
                        }
                    }
                }
            }
            map
        })
    }

    /// The body behind an id.
    pub fn body(&self, id: BodyId) -> &'a Body {
        &self.bodies[id.file as usize][id.body as usize]
    }

    /// Every body of the crate with its id, file by file.
    pub fn all_bodies(&self) -> impl Iterator<Item = (BodyId, &'a Body)> + '_ {
        self.bodies.iter().enumerate().flat_map(|(fi, bodies)| {
            bodies.iter().enumerate().map(move |(bi, b)| {
                (
                    BodyId {
                        file: fi as u32,
                        body: bi as u32,
                    },
                    b,
                )
            })
        })
    }

    /// Can two rows of `table` agree on all of `cols`? `Some(true)` when the schema files
    /// declare the table and none of its unique keys lies within `cols`, `Some(false)` when one
    /// does, `None` when no schema file declares the table.
    pub fn duplicates_allowed(&self, table: &str, cols: &[Name]) -> Option<bool> {
        let keys = self.schema.get(table)?;
        Some(
            !keys
                .iter()
                .any(|key| key.iter().all(|k| cols.iter().any(|c| c == k))),
        )
    }

    /// Are `cols` exactly one unique key the schema files declare for `table` (every column of
    /// the key, and nothing else)? A filter on them picks one row by its key, whatever the
    /// columns are called (`WHERE txid = $1` under `txid TEXT PRIMARY KEY`).
    pub fn is_declared_key(&self, table: &str, cols: &[Name]) -> bool {
        self.schema.get(table).is_some_and(|keys| {
            keys.iter().any(|key| {
                key.iter().all(|k| cols.contains(k)) && cols.iter().all(|c| key.contains(c))
            })
        })
    }

    /// The type of `ty.field`, following struct facts.
    pub fn field_type(&self, ty: &str, field: &str) -> Option<&TypeRef> {
        self.structs
            .get(ty)?
            .iter()
            .find(|(n, _)| n == field)
            .map(|(_, t)| t)
    }

    /// Resolves the first segment of a path through the file's `use` aliases.
    pub fn resolve(&self, file: u32, path: &str) -> Name {
        // The first `:` starts the first `::` (paths hold no single colons); a char search
        // needs no substring searcher.
        let (head, rest) = match path.find(':') {
            Some(i) => (&path[..i], &path[i..]),
            None => (path, ""),
        };
        match self.alias(file, head) {
            Some(full) => full.with_suffix(rest),
            None => Name::new(path),
        }
    }

    /// [`Facts::resolve`] of the path `parts` joined with `::`, without building the joined
    /// text first.
    pub fn resolve_parts(&self, file: u32, parts: &[Name]) -> Name {
        let Some((head, rest)) = parts.split_first() else {
            return Name::EMPTY;
        };
        match self.alias(file, head) {
            Some(full) if rest.is_empty() => full.clone(),
            Some(full) => Name::display(&format_args!("{full}::{}", Name::join(rest, "::"))),
            None => Name::join(parts, "::"),
        }
    }

    /// Adds the files' paths (in file order, as given to [`Facts::collect`]) and the module
    /// and package names they give (see [`Facts::modules`]).
    pub fn add_module_paths(
        &mut self,
        paths: impl IntoIterator<Item = &'a str>,
        crates: &[crate::CrateName],
    ) {
        let mut roots: Vec<&'a str> = Vec::new();
        for path in paths {
            let fi = self.paths.len();
            self.paths.push(path);
            let (root, below) = package_root(path);
            let package = match roots.iter().position(|r| *r == root) {
                Some(k) => k,
                None => {
                    roots.push(root);
                    self.modules.push(FxHashSet::default());
                    let name = path_modules(root)
                        .last()
                        .map(|n| Name::new(&n.replace('-', "_")));
                    if let Some(name) = &name {
                        self.packages.insert(name.clone());
                    }
                    self.package_names.push(name);
                    let package = (roots.len() - 1) as u32;
                    for c in crates
                        .iter()
                        .filter(|c| c.dir.trim_end_matches('/') == root)
                    {
                        let name = Name::new(&c.name.replace('-', "_"));
                        self.packages.insert(name.clone());
                        self.crate_names.push((name, package));
                    }
                    roots.len() - 1
                }
            };
            self.package_of.push(package as u32);
            let modules = &mut self.modules[package];
            if let Some(mods) = self.inline_mods.get(fi) {
                modules.extend(mods.iter().filter(|m| !m.1).map(|m| m.0.clone()));
            }
            // Schema files are no modules; their directories (`migrations/`) neither.
            if crate::is_schema_path(path) {
                continue;
            }
            for seg in path_modules(below) {
                if !modules.contains(seg) {
                    modules.insert(Name::new(&seg.replace('-', "_")));
                }
            }
        }
    }

    /// Is `head`, the first segment of a `use` path written in `file`, the workspace's own
    /// there: `crate`, `self`, `super`, a checked package, or a module in scope of the file's
    /// module (an inline `mod`, or a child module's file: `src/lib.rs` sees `src/bitcoin/`,
    /// `src/bitcoin/utxo.rs` sees `src/bitcoin/utxo/`)? Elsewhere the path names a library:
    /// `use bitcoin::Transaction` in `src/sweep.rs` imports the `bitcoin` crate's, whatever
    /// modules the crate's root declares.
    pub fn in_scope_module(&self, file: u32, head: &str) -> bool {
        if matches!(head, "crate" | "self" | "super") || self.packages.contains(head) {
            return true;
        }
        if self
            .inline_mods
            .get(file as usize)
            .is_some_and(|mods| mods.iter().any(|(m, _)| m == head))
        {
            return true;
        }
        let path = self.paths.get(file as usize).copied().unwrap_or("");
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let sep = if dir.is_empty() { "" } else { "/" };
        // The directory that holds the file's child modules.
        let children = match name.strip_suffix(".rs") {
            Some("lib" | "main" | "mod") | None => dir.to_string(),
            Some(stem) => format!("{dir}{sep}{stem}"),
        };
        let sep = if children.is_empty() { "" } else { "/" };
        let as_file = format!("{children}{sep}{head}.rs");
        let as_dir = format!("{children}{sep}{head}/mod.rs");
        self.paths.iter().any(|p| *p == as_file || *p == as_dir)
    }

    /// The package of file `file` (an index into the per-package tables).
    pub fn package_of(&self, file: u32) -> u32 {
        self.package_of.get(file as usize).copied().unwrap_or(0)
    }

    /// Is `seg`, a path's first segment written in package `package`, the workspace's own:
    /// `crate`, `self`, `super`, one of the package's [`Facts::modules`], or a checked
    /// package's name?
    /// Is `seg` a path head of the workspace's own in any checked package?
    pub fn is_any_crate_module(&self, seg: &str) -> bool {
        (0..self.modules.len().max(1) as u32).any(|p| self.is_crate_module(p, seg))
    }

    pub fn is_crate_module(&self, package: u32, seg: &str) -> bool {
        matches!(seg, "crate" | "self" | "super")
            || self.packages.contains(seg)
            || self
                .modules
                .get(package as usize)
                .is_some_and(|m| m.contains(seg))
    }

    /// Free fns named by the module-qualified path `parts` (`operations::pipeline::get`),
    /// written in `file`. The path starts in a package: the caller's own for `crate::`,
    /// `self::`, `super::` and its modules, another checked package named by its head. The fns
    /// of that package in a file under the path's last module come first; else (a package
    /// re-exported under another name, `pub use billing_core as core`) any package's fns in a
    /// file under that module; else every fn of the name in the starting package.
    pub fn free_fns_in(&self, file: u32, parts: &[Name]) -> Vec<BodyId> {
        let Some((name, quals)) = parts.split_last() else {
            return Vec::new();
        };
        let all = self
            .free_fns
            .get(name.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        // The package the path starts in: the caller's, unless its head names another one.
        let home = self.package_of(file);
        let package = match quals.first().map(Name::as_str) {
            None | Some("crate" | "self" | "super") => home,
            Some(h)
                if self
                    .modules
                    .get(home as usize)
                    .is_some_and(|m| m.contains(h)) =>
            {
                home
            }
            Some(h) => self.package_named(h).unwrap_or(home),
        };
        let module = quals
            .iter()
            .rev()
            .find(|q| !matches!(q.as_str(), "crate" | "self" | "super"));
        let under = |id: &BodyId| {
            module.is_none_or(|m| {
                self.paths
                    .get(id.file as usize)
                    .is_some_and(|p| path_modules(package_root(p).1).any(|seg| same_module(seg, m)))
            })
        };
        let in_package: Vec<BodyId> = all
            .iter()
            .copied()
            .filter(|id| self.package_of(id.file) == package)
            .collect();
        // The package's fns under the module; else (a re-exported package, `use other as m`)
        // any package's fns under it; else the package's fns of the name.
        let within: Vec<BodyId> = in_package.iter().copied().filter(under).collect();
        if !within.is_empty() {
            return within;
        }
        let anywhere: Vec<BodyId> = all.iter().copied().filter(under).collect();
        if module.is_some() && !anywhere.is_empty() {
            return anywhere;
        }
        in_package
    }

    /// The checked package named `name` (a root directory's name, `-` read as `_`).
    fn package_named(&self, name: &str) -> Option<u32> {
        self.crate_names
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, k)| *k)
            .or_else(|| {
                self.package_names
                    .iter()
                    .position(|n| n.as_deref() == Some(name))
                    .map(|k| k as u32)
            })
    }

    /// The free fns a bare call `name(..)` written in `file` may run, as Rust scopes it: the
    /// file's own fn of that name; else the one its `use` imports (none when imported from a
    /// library); else one of the same package (a glob import, an inline module); else the
    /// workspace's only fn of that name. A name that several other packages define is not
    /// guessed.
    pub fn bare_fn(&self, file: u32, name: &str) -> Vec<BodyId> {
        let all = self.free_fns.get(name).map(Vec::as_slice).unwrap_or(&[]);
        if all.is_empty() {
            return Vec::new();
        }
        let here: Vec<BodyId> = all.iter().copied().filter(|id| id.file == file).collect();
        if !here.is_empty() {
            return here;
        }
        if let Some(full) = self.alias(file, name) {
            let parts: Vec<Name> = full.as_str().split("::").map(Name::new).collect();
            let package = self.package_of(file);
            return match parts.first() {
                Some(head) if self.is_crate_module(package, head) => self.free_fns_in(file, &parts),
                _ => Vec::new(),
            };
        }
        let package = self.package_of(file);
        let same: Vec<BodyId> = all
            .iter()
            .copied()
            .filter(|id| self.package_of(id.file) == package)
            .collect();
        if !same.is_empty() || all.len() > 1 {
            same
        } else {
            all.to_vec()
        }
    }

    /// Does the path `parts`, written in `file`, name something of the crate? Its first segment
    /// (through the file's `use` aliases) is `crate`, `self`, `super` or one of
    /// [`Facts::modules`]. A bare name with no alias is taken as the crate's; one imported from a
    /// library (`use sqlx::query;`) is not.
    pub fn is_crate_path(&self, file: u32, parts: &[Name]) -> bool {
        let Some(head) = parts.first() else {
            return false;
        };
        let package = self.package_of(file);
        let local = |seg: &str| seg == "Self" || self.is_crate_module(package, seg);
        match self.alias(file, head) {
            Some(full) => {
                let first = full.as_str().split("::").next().unwrap_or_default();
                local(first)
            }
            None => parts.len() == 1 || local(head),
        }
    }

    /// What `head` stands for in `file` through its `use` aliases.
    fn alias(&self, file: u32, head: &str) -> Option<&Name> {
        let uses = self.uses.get(file as usize)?;
        // The last import of the name wins (the sort at lowering is stable).
        let end = uses.partition_point(|(a, _)| a.as_str() <= head);
        uses[..end]
            .last()
            .filter(|(a, _)| a == head)
            .map(|(_, f)| f)
    }

    /// Bodies that a method named `method` on type `ty` may run: inherent and trait impls on
    /// `ty`, or every implementation when `ty` is a trait of the crate.
    pub fn methods(&self, ty: &str, method: &str) -> &[BodyId] {
        self.methods_of
            .get(&(Name::new(ty), Name::new(method)))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::{BodyId, Dialects, PerBody};

    #[test]
    fn dialects_are_read_off_types_and_paths() {
        let of = |texts: &[&str]| {
            let mut d = Dialects::default();
            for t in texts {
                d.note(t);
            }
            d
        };
        assert!(of(&["sqlx::SqlitePool"]).sqlite_only());
        assert!(of(&["&mut Transaction<'_, Sqlite>", "rusqlite::Connection"]).sqlite_only());
        // A second database, or none, is not SQLite only.
        assert!(!of(&["SqlitePool", "PgPool"]).sqlite_only());
        assert!(!of(&["SqlitePool", "impl PgExecutor<'_>"]).sqlite_only());
        assert!(!of(&["SqlitePool", "tokio_postgres::Client"]).sqlite_only());
        assert!(!of(&["SqlitePool", "MySqlPool"]).sqlite_only());
        assert!(!of(&["sea_orm::DatabaseConnection"]).sqlite_only());
        // `Pg` must start a word: `Pgp`, `Page` name no database.
        assert!(of(&["SqlitePool", "PgpKey", "Page"]).sqlite_only());
    }

    fn id(file: u32, body: u32) -> BodyId {
        BodyId { file, body }
    }

    #[test]
    fn per_body_finds_each_files_bodies_and_nothing_past_them() {
        // Three files with 2, 0 and 3 bodies.
        let t = PerBody::new([2, 0, 3], vec!["a0", "a1", "c0", "c1", "c2"]);
        assert_eq!(t[&id(0, 1)], "a1");
        assert_eq!(t[&id(2, 0)], "c0");
        assert_eq!(t.get(&id(2, 2)), Some(&"c2"));
        assert_eq!(
            t.get(&id(0, 2)),
            None,
            "a file's bodies end where the next file's begin"
        );
        assert_eq!(t.get(&id(1, 0)), None);
        assert_eq!(t.get(&id(3, 0)), None);
        let lens = t.map(|s| s.len());
        assert_eq!(lens.get(&id(2, 1)), Some(&2));
    }
}
