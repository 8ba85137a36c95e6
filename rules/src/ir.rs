//! The effect-trace IR: what lowering produces from each function body and what every later stage
//! (classification, summaries, rules) reads. It holds no syntax tree and is `Send + Sync`.
//!
//! A body is a flat, ordered list of [`Event`]s. Structure that matters for the rules is kept with
//! paired [`EventKind::Enter`] / [`EventKind::Leave`] markers (branches, loops, closures, async blocks), and guard
//! lifetimes with [`EventKind::Drop`] at scope end or `drop(x)`.

pub use crate::name::Name;
pub use crate::small::Small;
pub use crate::sql::SqlInfo;

/// Accessors for the rarer facts a type keeps in its optional `extra` box: a list reads as empty
/// and an optional fact as `None` when there is no box.
macro_rules! extra_facts {
    (lists: $($list:ident: $item:ty),*; options: $($opt:ident: $ty:ty),*; boxed: $($boxed:ident: $bty:ty),*) => {
        $(
            pub fn $list(&self) -> &[$item] {
                self.extra.as_ref().map(|x| x.$list.as_slice()).unwrap_or(&[])
            }
        )*
        $(
            pub fn $opt(&self) -> Option<&$ty> {
                self.extra.as_ref().and_then(|x| x.$opt.as_ref())
            }
        )*
        $(
            pub fn $boxed(&self) -> Option<&$bty> {
                self.extra.as_ref().and_then(|x| x.$boxed.as_deref())
            }
        )*
    };
}

/// A compact source range: 1-based lines and 1-based char columns. Byte offsets are computed
/// only for the spans a diagnostic shows, from the file's [`crate::parse::Lines`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Sp {
    pub line: u32,
    pub col: u32,
    pub end_line: u32,
    pub end_col: u32,
}

/// A type as written, flattened to the paths it mentions in pre-order:
/// `Arc<Mutex<HashMap<Uuid, Order>>>` is `["Arc", "Mutex", "HashMap", "Uuid", "Order"]`,
/// `Arc<dyn PaymentGateway + Send>` is `["Arc", "dyn PaymentGateway", "Send"]`.
pub type TypeRef = Vec<Name>;

/// The pseudo-field a diesel model's struct carries for its `#[diesel(table_name = ..)]` (its
/// type is the table's name); no Rust field can be called so.
pub const DIESEL_TABLE_FIELD: &str = "#diesel(table_name)";
/// The pseudo field holding a sea-orm model's `#[sea_orm(table_name = ..)]` (kept apart from
/// diesel's: every sea-orm entity module names its model `Model`, so the name alone says
/// nothing; it is read per file, see [`crate::facts::Facts::file_model_table`]).
pub const SEA_ORM_TABLE_FIELD: &str = "#sea_orm(table_name)";

/// One lowered file.
#[derive(Debug, Clone, Default)]
pub struct FileIr {
    pub bodies: Vec<Body>,
    pub facts: FileFacts,
    /// Items for item-level suppressions: the first line (of its attributes and doc comments),
    /// the line of its keyword (`fn`, `impl`, ..) and the last line.
    pub items: Vec<(u32, u32, u32)>,
    /// `mod name;` declarations (the module tree's edges to other files).
    pub modules: Vec<crate::ModDecl>,
    /// Item-level `include!("file")` paths.
    pub includes: Vec<String>,
    /// What fixes edit by, for the bodies that have any, in body order.
    pub fix_anchors: Vec<FixAnchors>,
}

impl FileIr {
    /// Drops the spare capacity lowering's pushes left (the lowered files stay in memory until
    /// the crate is checked).
    pub fn shrink(&mut self) {
        self.bodies.shrink_to_fit();
        self.items.shrink_to_fit();
        self.modules.shrink_to_fit();
        self.includes.shrink_to_fit();
        self.fix_anchors.shrink_to_fit();
        let f = &mut self.facts;
        f.structs.shrink_to_fit();
        for (_, fields) in &mut f.structs {
            fields.shrink_to_fit();
            for (_, ty) in fields {
                ty.shrink_to_fit();
            }
        }
        f.uses.shrink_to_fit();
        f.sql_consts.shrink_to_fit();
        f.str_consts.shrink_to_fit();
        f.trait_impls.shrink_to_fit();
        f.aliases.shrink_to_fit();
        f.mods.shrink_to_fit();
    }
}

/// Crate-wide facts contributed by one file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    /// Struct name and its named fields with their types.
    pub structs: Vec<(Name, Vec<(Name, TypeRef)>)>,
    /// `use` aliases: the name in scope and the full path it stands for.
    pub uses: Vec<(Name, Name)>,
    /// Consts and statics holding SQL text.
    pub sql_consts: Vec<(Name, SqlInfo)>,
    /// Consts and statics holding other short strings (redis keys, prefixes).
    pub str_consts: Vec<(Name, Name)>,
    /// `impl Trait for Type` pairs.
    pub trait_impls: Vec<(Name, Name)>,
    /// `type Alias = Target;`
    pub aliases: Vec<(Name, TypeRef)>,
    /// Modules the paths do not show: inline ones (`mod x { .. }`, `false`) and ones declared
    /// as test code in their own file (`#[cfg(test)] mod tests;`, `true`).
    pub mods: Vec<(Name, bool)>,
    /// The unique keys of a schema file (`.sql`); `None` for Rust files.
    pub schema: Option<Box<crate::schema::Schema>>,
}

/// One function, method or trait default method.
#[derive(Debug, Clone)]
pub struct Body {
    pub ident: Name,
    pub self_ty: Option<Name>,
    pub trait_name: Option<Name>,
    /// The fn's name token.
    pub sp: Sp,
    /// Under `#[staleguard::fenced(..)]` with arguments that parse.
    pub fenced: bool,
    /// Takes `&mut self` (or `mut self`): a method that changes its receiver.
    pub mut_self: bool,
    /// Under `#[staleguard::idempotent(..)]` with arguments that parse.
    pub idempotent: bool,
    /// The `key = ..` of that attribute as a dotted place (`top_up.voucher`), when it is one.
    pub idempotent_key: Option<Box<Name>>,
    /// A route attribute puts it at a path that receives messages (`#[post("/webhooks/psp")]`).
    pub message_route: bool,
    /// A route attribute puts it at any path (`#[post("/orders/<id>/pay")]`): the framework
    /// calls it, with a connection of its own, not a caller's transaction.
    pub routed: bool,
    /// How many arguments a call passes besides the receiver (the signature's inputs other
    /// than `self`, whatever their patterns bind), saturating: a call with another count runs
    /// some other fn of that name.
    pub arity: u8,
    pub params: Box<[(Name, TypeRef)]>,
    pub ret: Box<[Name]>,
    /// Boxed once lowering is done: no spare capacity is kept for the run.
    pub events: Box<[Event]>,
}

/// What the fixes of one body edit by, kept apart from the body so that the bodies with none
/// (most of them) carry nothing: the statements that run one call and drop its value (for
/// fixes that remove them), and where the steps of the calls shaped like a Redis command are
/// (`apis::REDIS_SPAN_STEPS`, `redis::cmd(..)`: fixes that rename them or add arguments).
#[derive(Debug, Clone, Default)]
pub struct FixAnchors {
    /// The body's index in its file.
    pub body: u32,
    pub discards: Box<[Discard]>,
    /// Per call event (in event order), where each of its steps is.
    pub spans: Box<[CallSpans]>,
}

/// Where each step of the call at an event is.
pub type CallSpans = (u32, Box<[StepSpan]>);

impl FixAnchors {
    /// Where the steps of the call at event `call` are, when it kept them.
    pub fn steps(&self, call: u32) -> Option<&[StepSpan]> {
        self.spans
            .binary_search_by_key(&call, |(e, _)| *e)
            .ok()
            .map(|k| &*self.spans[k].1)
    }
}

/// A statement that runs one call chain and drops its value (`call;`, `let _ = call;`, `let _:
/// () = call;`): the call's event, and the text a fix removes to delete it (the statement's
/// whole lines when nothing but blanks and a line comment shares them, else the statement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discard {
    pub call: u32,
    pub sp: Sp,
}

#[derive(Debug, Clone)]
pub struct Event {
    pub sp: Sp,
    pub kind: EventKind,
}

/// The event kinds. Calls are kept raw here; [`crate::kb`] classifies them at check time, when
/// crate-wide facts (field types, other files' functions) are known.
#[derive(Debug, Clone)]
pub enum EventKind {
    /// A call chain (`self.http.post(url).json(&b).send().await?`) as one event.
    Call(Box<Call>),
    /// `let pat = init;` — the names bound, the locals the init reads, the calls in the init.
    Bind(Box<Bind>),
    /// `target = value` (also `+=` and friends); `target` is a dotted path (`g.balance`, `*g` is `g`).
    Assign(Box<Assign>),
    /// A test: `if`, `match` scrutinee, match guard, `let else`, `assert!`/`ensure!`, `?` on a check.
    Cond(Box<Test>),
    /// `return`, `break`, `continue`.
    Exit,
    /// A local goes out of scope or is passed to `drop`.
    Drop {
        name: Name,
    },
    Enter(Region),
    Leave,
}

impl Body {
    /// Display name: `Type::method` or `function` (built when shown, not stored).
    pub fn name(&self) -> BodyName<'_> {
        BodyName(self)
    }
}

/// A body's display name; see [`Body::name`].
pub struct BodyName<'a>(&'a Body);

impl std::fmt::Display for BodyName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0.self_ty {
            Some(t) => write!(f, "{t}::{}", self.0.ident),
            None => f.write_str(&self.0.ident),
        }
    }
}

/// The payload of [`EventKind::Assign`] (boxed: assignments are rare, and the event stays small).
#[derive(Debug, Clone)]
pub struct Assign {
    pub target: Name,
    pub deps: Box<[Name]>,
    /// The value assigned, when it is a constant (see [`ArgExtra::value`]): `Set(Status::Paid)`
    /// gives `Status::Paid`.
    pub value: Option<Name>,
}

/// The payload of [`EventKind::Cond`]: the places and the call events a test reads, and what it
/// compares them with.
#[derive(Debug, Clone)]
pub struct Test {
    pub deps: Box<[Name]>,
    pub calls: Box<[u32]>,
    pub role: TestRole,
    /// The constants the test compares with or matches: string and integer literals, paths of
    /// two or more segments and capitalised ones, each by its last segment (`"23505"`, `0`,
    /// `UNIQUE_VIOLATION` of `SqlState::UNIQUE_VIOLATION`, `None`), also in a `matches!` pattern.
    pub values: Box<[Name]>,
    /// The patterns tested, in the same form: one per arm for a `match` (in arm order), the
    /// pattern of an `if let` / `let .. else` / `while let`.
    pub pats: Box<[Box<[Name]>]>,
    /// The test holds when what it tests is absent, false or zero: `!x`, `x == 0`, `n < 1`,
    /// `x.is_none()`, `x.is_empty()` (a double negation cancels).
    pub negated: bool,
    /// The comparison at the top of the test, if it is one.
    pub comparison: Comparison,
    /// Every constant in `values` and `pats` is a string literal (`"paid"`, not `PAID` or
    /// `Status::Paid`), and there is at least one.
    pub str_lits: bool,
}

/// The comparison a test is at its top (through parentheses): `x == c` or a pattern match
/// (`if let P = x`), `x != c`, an ordering (`n >= limit`, `owners.len() <= 1`), or something
/// else (`a && b`, a call, a flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Equal,
    NotEqual,
    Ordering,
    Other,
}

/// Where a test sits, which says which branches follow it: an `if` is followed by its then
/// branch and maybe an else branch, a `match` by its arms, a `let .. else` by its else branch;
/// a guard opens the arm it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestRole {
    If,
    Match,
    Guard,
    LetElse,
    While,
    /// A comparison anywhere (`Ok(changed == 1)`), an assertion.
    Other,
}

impl Test {
    /// A test of `deps` and `calls` with no constants or patterns.
    pub fn plain(role: TestRole, deps: Vec<Name>, calls: Vec<u32>) -> Self {
        Test {
            deps: deps.into(),
            calls: calls.into(),
            role,
            values: Box::default(),
            pats: Box::default(),
            negated: false,
            comparison: Comparison::Other,
            str_lits: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Bind {
    pub names: Small<Name>,
    pub deps: Small<Name>,
    pub calls: Small<u32>,
    /// The rarer facts (most `let`s have none of them), boxed so a binding stays small.
    pub extra: Option<Box<BindExtra>>,
}

/// The rarer facts about a `let`.
#[derive(Debug, Clone, Default)]
pub struct BindExtra {
    /// The declared type (`let tx: Transaction<'_, Postgres> = ..`).
    pub ty: Option<TypeRef>,
    /// Short string literals in the init (`format!("idem:{}", k)` gives `idem:{}`).
    pub strs: Vec<Name>,
    /// SQL text in the init (`let sql = format!("UPDATE ..")`).
    pub sql: Option<Box<SqlInfo>>,
    /// A struct literal in the init.
    pub lit: Option<Box<StructLit>>,
    /// The `Enter` event of a closure or async block the init is (`let run = move || ..`).
    pub closure: Option<u32>,
}

impl BindExtra {
    pub fn is_empty(&self) -> bool {
        self.ty.is_none()
            && self.strs.is_empty()
            && self.sql.is_none()
            && self.lit.is_none()
            && self.closure.is_none()
    }
}

impl Bind {
    /// A binding of `names` from `deps` and `calls`, with no type, literal, SQL or closure.
    pub fn plain(names: Vec<Name>, deps: Vec<Name>, calls: Vec<u32>) -> Self {
        Bind {
            names: names.into(),
            deps: deps.into(),
            calls: calls.into(),
            extra: None,
        }
    }

    /// A binding with its rarer facts (kept only when there are any).
    pub fn with_extra(mut self, extra: BindExtra) -> Self {
        self.extra = (!extra.is_empty()).then(|| Box::new(extra));
        self
    }

    extra_facts! {
        lists: strs: Name;
        options: ty: TypeRef;
        boxed: sql: SqlInfo, lit: StructLit
    }

    pub fn closure(&self) -> Option<u32> {
        self.extra.as_ref().and_then(|x| x.closure)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Region {
    /// An `if` / `else` / match arm / `let else` block; `diverges` when it always leaves the
    /// function or loop (`return`, `?`-less `bail!`, `continue`, `panic!`).
    Branch {
        diverges: bool,
        /// It ends in a failure: `Err(..)` as its value or returned, `bail!`, `panic!`, or an
        /// HTTP error status (`StatusCode::CONFLICT`, `HttpResponse::InternalServerError()`).
        fails: bool,
        /// It leaves answering nothing: `return Ok(None)`, `return None`, `Ok(false)` as its
        /// value (a token found expired and cleaned up: the caller gets nothing to act on).
        nothing: bool,
    },
    Loop,
    /// A closure or async block; `call` is the index of the call event it is an argument of.
    Closure {
        call: Option<u32>,
    },
}

/// A call chain: a root (receiver path or function path) and its method steps.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The receiver path when the chain starts at a place: `["self", "http"]`, `["tx"]`.
    pub recv: Small<Name>,
    /// The function path when the chain starts with a call or macro: `["sqlx", "query"]`,
    /// `["sqlx", "query!"]`. Its call is `steps[0]`.
    pub func: Small<Name>,
    pub steps: Small<Step>,
}

/// Where a call step is: from its name (the function path of a root step) to its closing
/// parenthesis, and whether its argument list ends in a comma (`f(a, b,)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepSpan {
    pub sp: Sp,
    pub trailing_comma: bool,
}

#[derive(Debug, Clone)]
pub struct Step {
    pub name: Name,
    pub args: Small<Arg>,
    /// How many arguments the call passes (saturating), kept when a body's arguments are
    /// dropped to save memory: the arity that tells same-named fns apart.
    pub argc: u8,
    /// `.await` directly after this step.
    pub awaited: bool,
    /// `?` after this step (and its await).
    pub tried: bool,
}

/// What the classifier needs to know about one argument. Rare facts live in `extra`, so the
/// common argument (a place or a literal) stays small.
#[derive(Debug, Clone, Default)]
pub struct Arg {
    /// Dotted places read (`order.id`, `self.db`, `tx`).
    pub paths: Small<Name>,
    /// The call event the argument lowered to (`tokio::spawn(worker::run(job))`).
    pub ev: Option<u32>,
    pub closure: bool,
    /// `&mut *x`, `&mut x`, `x.as_mut()`.
    pub mut_borrow: bool,
    /// A plain local handed over as it is (`f(tx)`): moved into the callee when it owns it.
    pub moved: bool,
    pub extra: Option<Box<ArgExtra>>,
}

/// The rarer facts about an argument.
#[derive(Debug, Clone, Default)]
pub struct ArgExtra {
    /// Short string literals (also the literal of a `format!`).
    pub strs: Vec<Name>,
    pub sql: Option<Box<SqlInfo>>,
    /// Columns compared with `.eq(..)` & co. (diesel / sea-orm filters and `.set(..)`).
    pub eq_cols: Vec<Name>,
    /// For each of `eq_cols`, the value of an `.eq(..)` that is a constant.
    pub eq_values: Vec<Option<Name>>,
    /// The argument's value when it is a constant: a string literal, an enum variant or const
    /// path (`Status::Paid`, `PROCESSING`), through `&`, `.to_string()`, `Set(..)`, `Some(..)`.
    pub value: Option<Name>,
    /// For an array argument (`&[&"running", &id]`, tokio-postgres parameters), each element's
    /// constant value; empty otherwise.
    pub items: Vec<Option<Name>>,
    /// Function paths called inside the argument (`Request::new`, `FutureRecord::to`).
    pub calls: Vec<Name>,
    pub lit: Option<Box<StructLit>>,
    /// Where fixes edit the argument (boxed: only SQL literals and Redis expiries have any).
    pub fix: Option<Box<ArgFix>>,
}

/// Where a fix edits an argument.
#[derive(Debug, Clone, Default)]
pub struct ArgFix {
    /// For an argument that is a SQL string literal, where text appended to the statement goes:
    /// an empty span just before the closing quote (`None` when the statement ends in a `;`,
    /// whitespace or an escape, where appending is not that simple).
    pub sql_end: Option<Sp>,
    /// For an `UPDATE` or `DELETE` string literal argument, its `WHERE` predicate in the
    /// source (see [`SqlWhere`]).
    pub sql_where: Option<SqlWhere>,
    /// An integer literal argument of a Redis expiry step (see
    /// `apis::REDIS_INT_ARG_STEPS`), as written without its suffix (`172_800`).
    pub int: Option<Name>,
}

/// Where a SQL literal's `WHERE` predicate is in the source: from its first token to the end
/// of its last (before any `RETURNING`, `ORDER BY`, `LIMIT`, `;`), for fixes that add a
/// condition to it. Recorded only when the literal's text is its value (no escapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlWhere {
    pub sp: Sp,
    /// The predicate has a top-level `OR`: a condition added with `AND` needs parentheses.
    pub or: bool,
    /// The statement names a quoted identifier or more than one table (`UPDATE .. FROM`), so
    /// a bare column name may not say what is meant.
    pub ambiguous: bool,
}

impl ArgExtra {
    pub fn is_empty(&self) -> bool {
        self.strs.is_empty()
            && self.sql.is_none()
            && self.value.is_none()
            && self.items.is_empty()
            && self.eq_cols.is_empty()
            && self.calls.is_empty()
            && self.lit.is_none()
            && self.fix.is_none()
    }
}

/// Marks an [`Arg::eq_values`] entry that is a plain local, not a constant (`state.eq(state)`
/// gives `=state`): classification turns it into the body's parameter of that name.
pub const LOCAL_VALUE: &str = "=";

/// The value text of a call that reads the clock (`Utc::now()`, `OffsetDateTime::now_utc()`),
/// as SQL's `now()`.
pub const NOW_VALUE: &str = "now()";

/// Marks an [`Arg::eq_values`] entry of a column tested `NULL` (`started_at.is_null()`).
pub const NULL_VALUE: &str = "is null";

/// Marks an [`Arg::eq_values`] entry that moves the column by its own value
/// (`access_count.eq(access_count + 1)`), as SQL's `SET n = n + 1`.
pub const RELATIVE_VALUE: &str = "+=";
/// The type of a [`StructLit`] that is a BSON document (`doc! { .. }`), not a struct.
pub const DOC_LITERAL: &str = "doc!";

impl Arg {
    extra_facts! {
        lists: strs: Name, eq_cols: Name, eq_values: Option<Name>, items: Option<Name>, calls: Name;
        options: value: Name;
        boxed: sql: SqlInfo, fix: ArgFix, lit: StructLit
    }

    /// An integer literal argument of a Redis expiry step, as written without its suffix.
    pub fn int(&self) -> Option<&Name> {
        self.fix().and_then(|f| f.int.as_ref())
    }
}

/// `Type { field, other: .. }` with the field names (shorthand and explicit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructLit {
    pub ty: Name,
    /// The module the type is named through (`jobs` in `jobs::ActiveModel { .. }`).
    pub module: Option<Name>,
    pub fields: Vec<Name>,
    /// Each field's value when it is a constant (`status: Set(Status::Paid)`).
    pub values: Vec<Option<Name>>,
    /// The literal is the whole value (`let p = Payout { .. }`, `&Payout { .. }`), not an
    /// argument or receiver inside it (`insert(Payout { .. })`).
    pub whole: bool,
}

impl Call {
    /// The last path segment of the function root, or the first step's name.
    pub fn head(&self) -> &str {
        self.steps.first().map(|s| s.name.as_str()).unwrap_or("")
    }

    pub fn awaited(&self) -> bool {
        self.steps.iter().any(|s| s.awaited)
    }

    pub fn has_step(&self, name: &str) -> bool {
        self.steps.iter().any(|s| s.name == name)
    }

    /// The first SQL text in any argument.
    pub fn sql(&self) -> Option<&SqlInfo> {
        self.steps
            .iter()
            .flat_map(|s| &s.args)
            .find_map(|a| a.sql())
    }

    pub fn all_args(&self) -> impl Iterator<Item = &Arg> {
        self.steps.iter().flat_map(|s| &s.args)
    }

    pub fn func_last(&self) -> &str {
        self.func.last().map(Name::as_str).unwrap_or("")
    }
}
