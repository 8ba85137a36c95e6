//! The one table of library APIs the analyzer knows by name: method, function, macro and type
//! names of the common crates (sqlx, diesel, sea-orm, tokio-postgres, redis, reqwest, hyper,
//! tonic, aws-sdk, lapin, rdkafka, tokio, std, ..), read by lowering's pre-filters, the
//! knowledge base (`kb/`), the shared queries and the summaries. Logic lives with its readers;
//! this file only says which names mean what.
//!
//! The lists under [`trigger_lists!`] are the *triggers*: a step (a method or function of a call
//! chain) named so can carry an effect on its own, whatever its receiver, and lowering keeps
//! every body with one of them whole (see `lower::is_inert`): its arguments, its tests and its
//! regions. Lists that only matter after a trigger in the same chain (what is done through a
//! lock guard), on a typed receiver (a `DashMap`), or on an awaited call (which lowering keeps
//! anyway) are plain lists. A test checks that every trigger keeps a body whole.

/// Declares trigger lists: each is a `pub(crate) const` of step names, and
/// [`is_trigger_step`] is their union (one `match`, the hot path of lowering's pre-filter).
macro_rules! trigger_lists {
    ($( $(#[$meta:meta])* $name:ident = [$($step:literal),* $(,)?]; )*) => {
        $( $(#[$meta])* pub(crate) const $name: &[&str] = &[$($step),*]; )*

        /// Every trigger list, with its name (for tests and docs).
        #[cfg(test)]
        pub(crate) const TRIGGERS: &[(&str, &[&str])] = &[$((stringify!($name), $name)),*];

        /// A step name in some trigger list.
        #[allow(unreachable_patterns)]
        pub(crate) fn is_trigger_step(name: &str) -> bool {
            matches!(name, $($($step)|*)|*)
        }
    };
}

trigger_lists! {
    // --- Locks and guarded state (tokio::sync, std::sync, parking_lot) ---
    /// Steps that take a lock and hand out a guard.
    LOCK_STEPS = [
        "lock", "lock_owned", "write", "write_owned", "read", "read_owned", "blocking_lock",
        "try_lock", "try_write", "upgradable_read",
    ];
    // --- Tasks, sleeps and delayed work (tokio, std::thread, actix, job queues) ---
    /// Functions that spawn a task or thread; closure arguments run detached.
    SPAWN_FNS = ["spawn", "spawn_local", "spawn_blocking"];
    /// Steps that run a closure argument once after a delay (actix `run_later`, one-shot
    /// scheduler jobs).
    DELAYED_CLOSURE_STEPS = [
        "run_later", "new_one_shot_async", "new_one_shot", "spawn_after", "call_later",
    ];
    /// Functions that sleep (`tokio::time::sleep`, `std::thread::sleep`, tokio 0.2's
    /// `delay_for`).
    SLEEP_FNS = ["sleep", "sleep_until", "delay_for", "delay_until"];
    /// A timer tick awaited (`interval.tick().await`).
    TICK_STEPS = ["tick"];
    /// Steps that schedule delayed work (`DelayQueue::insert`, job queues' `enqueue_in`, ..).
    /// `insert` and `insert_at` count only on a `DelayQueue`.
    SCHEDULE_STEPS = [
        "insert", "insert_at", "enqueue_in", "enqueue_at", "enqueue_after", "schedule",
        "schedule_in", "schedule_at", "schedule_after", "push_delayed", "push_in", "push_at",
        "enqueue_delayed", "send_delayed", "publish_delayed", "delay", "run_at", "run_in",
        "enqueue_scheduled", "schedule_job", "defer",
    ];
    // --- Databases (sqlx, tokio-postgres, deadpool, diesel, sea-orm, rusqlite, mysql) ---
    /// Steps that run a closure argument inside a transaction (`run` only after
    /// `build_transaction`).
    TX_CLOSURE_STEPS = [
        "transaction", "transaction_with", "in_transaction", "run", "transaction_async",
    ];
    /// Steps that begin a transaction (also `transaction` with no argument, and `start` after
    /// `build_transaction`).
    TX_BEGIN_STEPS = [
        "begin", "begin_with", "start_transaction", "begin_transaction", "begin_immediate",
    ];
    /// A transaction builder (tokio-postgres, diesel-async): `.start()` begins it,
    /// `.run(closure)` runs a closure in it.
    TX_BUILDER_STEPS = ["build_transaction"];
    /// Steps that end a transaction.
    TX_END_STEPS = ["commit", "rollback"];
    /// Steps that run a statement (SQL text in an argument, or a built query).
    EXEC_STEPS = [
        "execute", "fetch", "fetch_one", "fetch_optional", "fetch_all", "query", "query_one",
        "query_opt", "query_raw", "execute_raw", "batch_execute", "simple_query", "exec", "one",
        "all", "get_result", "get_results", "load", "first", "fetch_many", "query_typed",
        "prepare", "prepare_cached", "exec_with_returning", "query_row",
    ];
    /// Functions that build a query from SQL text (`sqlx::query(..)`, `query_as::<_, T>(..)`).
    QUERY_FNS = [
        "query", "query_as", "query_scalar", "query_with", "query_as_with",
        "query_scalar_with",
    ];
    /// diesel's statement builders (`diesel::update(..)`, `insert_into(..)`).
    DIESEL_WRITE_FNS = [
        "update", "insert_into", "delete", "replace_into", "insert_or_ignore_into",
    ];
    /// diesel steps that load rows from a table (`orders::table.find(id).first(conn)`).
    DIESEL_READ_STEPS = ["first", "load", "get_result", "get_results", "load_iter"];
    /// sea-orm entity functions that read (`Order::find_by_id(id).one(db)`).
    SEA_ORM_FIND_FNS = ["find", "find_by_id", "find_related"];
    /// sea-orm entity functions that write (`Order::update_many()..exec(db)`).
    SEA_ORM_WRITE_FNS = [
        "update_many", "update", "delete_many", "delete_by_id", "delete", "insert",
        "insert_many",
    ];
    /// sea-orm active-model methods (`order.update(db).await`).
    ACTIVE_MODEL_STEPS = ["update", "insert", "save", "delete"];
    // --- Redis (redis-rs, deadpool-redis, fred-style command methods) ---
    /// `redis::cmd("SET")..` and `redis::pipe()..`.
    REDIS_COMMAND_FNS = ["cmd", "pipe"];
    /// Steps that run a command or script (`query_async`, `invoke_async`): only a trigger (the
    /// command is read from the chain's other steps).
    #[allow(dead_code)]
    REDIS_RUN_STEPS = ["query_async", "invoke_async", "exec_async"];
    /// `AsyncCommands` / `Commands` methods that claim a key atomically (`set_options` only
    /// with an `NX` argument).
    REDIS_CLAIM_METHODS = ["set_nx", "hset_nx", "set_options"];
    /// `AsyncCommands` / `Commands` methods that write.
    REDIS_WRITE_METHODS = [
        "del", "unlink", "hdel", "get_del", "getdel", "set", "set_ex", "pset_ex", "hset",
        "hset_multiple", "incr", "decr", "expire", "sadd", "srem", "zadd", "lpush", "rpush",
        "mset", "set_options", "hincr", "zincr", "zrem", "lrem", "ltrim", "lset", "pexpire",
        "expire_at", "persist", "getset", "zadd_multiple", "xadd", "zrembyscore",
    ];
    /// `AsyncCommands` / `Commands` methods that read.
    REDIS_READ_METHODS = [
        "get", "exists", "hget", "hgetall", "mget", "sismember", "ttl", "hexists", "lrange",
        "lindex", "lpop", "rpop", "llen", "scard", "zcard", "hlen", "smembers", "zrange",
        "zrangebyscore", "zrevrange", "zscore", "zrank", "zcount", "hkeys", "hvals", "hmget",
        "strlen", "pttl",
    ];
    /// `AsyncCommands` methods that move an entry between lists (see
    /// [`REDIS_LIST_MOVE_COMMANDS`]).
    REDIS_LIST_MOVE_METHODS = ["rpoplpush", "brpoplpush", "lmove", "blmove"];
    // --- Remote calls (reqwest, hyper, tonic, aws-sdk, lapin, rdkafka, NATS) ---
    /// Steps that send a request: `.send()` of reqwest and aws-sdk builders and broker
    /// producers, blocking clients' `send_*` (only a trigger: the classifier reads the shape
    /// around `send`).
    #[allow(dead_code)]
    SEND_STEPS = ["send", "send_json", "send_string", "send_form", "send_bytes"];
    /// hyper's sending steps.
    HYPER_SEND_STEPS = ["send_request", "request"];
    /// Steps that publish a message to a broker.
    PUBLISH_STEPS = [
        "basic_publish", "publish", "publish_with_headers", "send_result", "produce",
    ];
}

// --- Lowering ---

/// Attributes that route a function at an HTTP path (actix-web, rocket, poem):
/// `#[post("/webhooks/stripe")]`.
pub(crate) const ROUTE_ATTRIBUTES: &[&str] =
    &["get", "post", "put", "patch", "delete", "route", "head"];

/// Router steps that register a handler at a path (axum `.route(path, post(h))`, actix
/// `web::resource(path).route(..)` / `.to(h)`): the path is the first argument.
pub(crate) const ROUTE_STEPS: &[&str] = &["route", "resource", "service", "at"];

/// Steps that register a function as the consumer of a queue or broker (apalis
/// `WorkerBuilder::build_fn(handler)`): every job or message it gets is a message.
pub(crate) const CONSUMER_REGISTRATION_STEPS: &[&str] = &["build_fn", "backend_fn"];

/// Types of a message received from a broker: lapin's `Delivery`, rdkafka's
/// `BorrowedMessage` / `OwnedMessage`, and a `Message` that comes from one of the
/// [`BROKER_CRATES`].
/// Awaited steps that subscribe to a broker and hand back a stream of its messages
/// (async-nats `subscribe` / `queue_subscribe`, lapin `basic_consume`, a JetStream consumer's
/// `messages()`, a Redis pub/sub `subscribe`).
pub(crate) const SUBSCRIBE_STEPS: &[&str] =
    &["subscribe", "queue_subscribe", "basic_consume", "messages"];

/// Steps that take the next message from such a subscription (`sub.next().await`).
pub(crate) const RECEIVE_STEPS: &[&str] = &["next", "recv", "try_next"];

/// Steps that fetch a batch of messages from a queue service (aws-sdk-sqs `receive_message()`).
pub(crate) const QUEUE_RECEIVE_STEPS: &[&str] = &["receive_message"];

pub(crate) const BROKER_MESSAGE_TYPES: &[&str] = &["Delivery", "BorrowedMessage", "OwnedMessage"];

/// Broker consumer types known by their own name (rdkafka's consumers).
pub(crate) const BROKER_CONSUMER_TYPES: &[&str] = &["StreamConsumer", "BaseConsumer"];

/// Steps that decode a message into its payload (what they return is still the message):
/// `serde_json::from_slice(&d.data)`, `request.into_inner()`, `msg.payload()`.
pub(crate) const DECODE_STEPS: &[&str] = &[
    "from_slice",
    "from_str",
    "from_value",
    "from_reader",
    "from_utf8",
    "from_utf8_lossy",
    "decode",
    "deserialize",
    "into_inner",
    "payload",
    "parse",
    "clone",
    "to_owned",
    "to_string",
    "unwrap",
    "expect",
    "ok",
];

/// Steps that acknowledge a message (its end: the broker forgets it): lapin's `ack`, rdkafka's
/// `commit_message` / `store_offset`, SQS `delete_message`, NATS `ack` (and JetStream's
/// `ack_with(kind)`, a redelivery when the kind is `Nak`).
pub(crate) const ACK_STEPS: &[&str] = &[
    "ack",
    "ack_with",
    "basic_ack",
    "commit_message",
    "commit_consumer_state",
    "store_offset",
    "delete_message",
    "double_ack",
];

/// Words of steps that hand a message back or schedule it again (`nack`, `requeue`,
/// `retry_later`, `reschedule`, `enqueue`, `schedule_retry`, `basic_reject`).
pub(crate) const RETRY_STEPS: &[&str] = &[
    "nack",
    "reject",
    "requeue",
    "retry",
    "reschedule",
    "enqueue",
    "schedule",
    "push_back",
    "defer",
    "dead_letter",
];

/// Crates whose `Message` is a message taken from a broker or a queue.
pub(crate) const BROKER_CRATES: &[&str] = &[
    "async_nats",
    "nats",
    "lapin",
    "rdkafka",
    "aws_sdk_sqs",
    "pulsar",
    "fluvio",
    "amqprs",
    "google_cloud_pubsub",
];

/// Attributes that mark test code (any path ending so; `cfg(test)` separately).
pub(crate) const TEST_ATTRIBUTES: &[&str] = &["test", "rstest", "test_case"];

/// Macros that never return.
pub(crate) const DIVERGING_MACROS: &[&str] =
    &["bail", "panic", "unreachable", "todo", "unimplemented"];

/// Macros of the standard library, logging and common crates that hold no code of the
/// program's own (format strings, conditions, templates): an unknown macro outside this list
/// may wrap the program's code (`db_run! { conn: { .. } }`, `with_conn!(pool, |c| ..)`), and
/// lowering looks into its `{..}` groups and closures.
pub(crate) const CODE_FREE_MACROS: &[&str] = &[
    "println",
    "eprintln",
    "print",
    "eprint",
    "info",
    "debug",
    "warn",
    "error",
    "trace",
    "event",
    "span",
    "info_span",
    "debug_span",
    "warn_span",
    "error_span",
    "trace_span",
    "instrument",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "matches",
    "cfg",
    "env",
    "option_env",
    "include",
    "include_str",
    "include_bytes",
    "line",
    "column",
    "file",
    "module_path",
    "stringify",
    "concat",
    "format",
    "format_args",
    "write",
    "writeln",
    "vec",
    "json",
    "quote",
    "quote_spanned",
    "parse_quote",
    "html",
    "view",
    "rsx",
    "bail",
    "anyhow",
    "eyre",
    "ensure",
    "hex",
    "lazy_static",
    "thread_local",
    "todo",
    "unimplemented",
    "unreachable",
    "panic",
    "compile_error",
    "macro_rules",
    "pin_mut",
    "ready",
    "try_join",
    "join",
    "select",
    "dbg",
    "map",
    "hashmap",
    "btreemap",
    "doc",
];

/// Redis commands whose calls keep their steps' source spans (`ir::Call::spans`), for the
/// fixes that rename them (`get` → `get_del`) or add arguments (`set_nx` → `SET .. NX EX`).
pub(crate) const REDIS_SPAN_STEPS: &[&str] = &[
    "get",
    "get_del",
    "set",
    "set_nx",
    "set_options",
    "expire",
    "pexpire",
    "del",
];

/// Macros that end a branch with a failure (a branch that runs one fails).
pub(crate) const FAILING_MACROS: &[&str] = &[
    "bail",
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
    "anyhow",
    "eyre",
];

/// HTTP error statuses, as `http::StatusCode` constants and as actix-web's `HttpResponse`
/// builders: a branch answering one fails.
pub(crate) const ERROR_STATUSES: &[&str] = &[
    "BAD_REQUEST",
    "UNAUTHORIZED",
    "FORBIDDEN",
    "NOT_FOUND",
    "CONFLICT",
    "GONE",
    "PRECONDITION_FAILED",
    "UNPROCESSABLE_ENTITY",
    "LOCKED",
    "TOO_MANY_REQUESTS",
    "INTERNAL_SERVER_ERROR",
    "BAD_GATEWAY",
    "SERVICE_UNAVAILABLE",
    "GATEWAY_TIMEOUT",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Gone",
    "PreconditionFailed",
    "UnprocessableEntity",
    "Locked",
    "TooManyRequests",
    "InternalServerError",
    "BadGateway",
    "ServiceUnavailable",
    "GatewayTimeout",
];

/// Constructors of an HTTP error answer named by their status in snake case
/// (`ApiResponse::internal_error(msg)`, `HttpResponse::service_unavailable()`): a branch that
/// answers one fails.
pub(crate) const ERROR_STATUS_BUILDERS: &[&str] = &[
    "bad_request",
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "precondition_failed",
    "unprocessable_entity",
    "too_many_requests",
    "internal_error",
    "internal_server_error",
    "bad_gateway",
    "service_unavailable",
    "gateway_timeout",
];

/// sqlx's query macros (`sqlx::query!("..", ..)`).
pub(crate) const QUERY_MACROS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_unchecked",
    "query_as_unchecked",
    "query_scalar_unchecked",
    "query_file",
    "query_file_as",
];

/// Macros whose first literal is a format string (its text is kept, `{name}` holes read).
pub(crate) const FORMAT_MACROS: &[&str] = &["format", "concat", "write", "writeln", "format_args"];

/// Macros whose arguments are plain expressions worth lowering (their calls are effects).
pub(crate) const EXPRESSION_MACROS: &[&str] = &[
    "join", "try_join", "vec", "dbg", "Ok", "Some", "pin", "json",
];

/// `tokio::select!` (each branch's future is awaited, its pattern binds the result).
pub(crate) const SELECT_MACROS: &[&str] = &["select"];

/// Macros that test a condition and leave when it fails (`ensure!(cond, err)`).
pub(crate) const ASSERTION_MACROS: &[&str] = &["ensure", "ensure_eq"];

/// Macros that drive every future they are given (`tokio::join!(a, b)`).
pub(crate) const JOIN_MACROS: &[&str] = &["join", "try_join"];

/// Functions that drive the future they are given (`tokio::time::timeout(d, fut)`).
pub(crate) const TIMEOUT_FNS: &[&str] = &["timeout", "timeout_at"];

/// ORM filter methods whose receiver is a column (`orders::status.eq(..)`,
/// `Column::Status.eq(..)`).
pub(crate) const COLUMN_TESTS: &[&str] = &[
    "eq",
    "ne",
    "gt",
    "lt",
    "ge",
    "le",
    "eq_any",
    "is_null",
    "is_not_null",
    "lte",
    "gte",
    "is_in",
    "like",
    "between",
];

/// Methods whose result is a prepared statement (its SQL is the local's).
pub(crate) const PREPARE_STEPS: &[&str] = &["prepare", "prepare_cached", "prepare_typed"];

/// Methods that append text to a string holding SQL (`query.push_str(" FOR UPDATE")`).
pub(crate) const SQL_APPEND_STEPS: &[&str] = &["push_str", "push"];

/// The steps of sqlx's `QueryBuilder` that turn its text into a query (`builder.build()`).
pub(crate) const QUERY_BUILDER_BUILD_STEPS: &[&str] = &[
    "build",
    "build_query_as",
    "build_query_scalar",
    "sql",
    "into_sql",
];

/// Methods whose result is their receiver's value (`Status::Paid.to_string()`).
pub(crate) const VALUE_PASSTHROUGH_STEPS: &[&str] = &[
    "to_string",
    "to_owned",
    "into",
    "as_str",
    "as_ref",
    "clone",
    "to_value",
];

/// Functions that wrap one value as it is (`Value::from(x)`, sea-orm's `Expr::value(x)` and
/// `ActiveValue::set(x)`; any `Type(x)` or `Variant(x)` does too).
pub(crate) const VALUE_WRAPPER_FNS: &[&str] = &["from", "value", "set"];

/// Methods that keep their receiver's text (`"UPDATE ..".to_string()`).
pub(crate) const TEXT_PASSTHROUGH_STEPS: &[&str] =
    &["to_string", "to_owned", "into", "as_str", "replace"];

/// Functions that wrap text as-is (`String::from(..)`, sqlx's `AssertSqlSafe(..)`).
pub(crate) const TEXT_WRAPPER_FNS: &[&str] = &["from", "AssertSqlSafe"];

/// Std methods that no rule or summary can use on a plain local (`x.clone()`,
/// `v.iter().map(..).collect()`): lowering drops such chains when they have no `.await`, no
/// `?`, no SQL and no closure.
pub(crate) const NOISE_STEPS: &[&str] = &[
    "clone",
    "cloned",
    "copied",
    "to_string",
    "to_owned",
    "into",
    "unwrap",
    "expect",
    "unwrap_or",
    "unwrap_or_default",
    "ok",
    "map_err",
    "iter",
    "into_iter",
    "collect",
    "len",
    "is_empty",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
    "as_ref",
    "as_str",
    "as_slice",
    "as_deref",
    "borrow",
    "deref",
    "to_vec",
    "trim",
    "parse",
    "starts_with",
    "ends_with",
    "eq",
    "ne",
    "cmp",
    "partial_cmp",
    "hash",
    "fmt",
    "into_inner",
    "as_bytes",
    "to_lowercase",
    "to_uppercase",
    "chars",
    "bytes",
    "lines",
    "rev",
    "enumerate",
    "zip",
    "skip",
    "take",
    "saturating_sub",
    "saturating_add",
    "checked_add",
    "checked_sub",
    "abs",
    "max",
    "min",
    "sum",
    "count",
    "display",
];

/// Constructors and conversions of [`STD_VALUE_TYPES`] that carry nothing (`Arc::new(..)`).
pub(crate) const NOISE_FNS: &[&str] = &[
    "Ok",
    "Some",
    "Err",
    "new",
    "from",
    "default",
    "with_capacity",
    "from_secs",
    "from_millis",
    "from_str",
    "to_string",
    "format",
    "into",
    "clone",
    "len",
    "min",
    "max",
    "drop_in_place",
];

/// Std containers and value types whose constructors carry nothing (a crate or client type
/// may matter, so only these).
pub(crate) const STD_VALUE_TYPES: &[&str] = &[
    "Arc",
    "Rc",
    "Box",
    "Vec",
    "Name",
    "HashMap",
    "HashSet",
    "BTreeMap",
    "BTreeSet",
    "VecDeque",
    "Duration",
    "Instant",
    "Cell",
    "RefCell",
    "PathBuf",
    "Cow",
    "Ok",
    "Some",
    "Default",
    "Wrapping",
    "AtomicBool",
    "AtomicUsize",
    "AtomicU64",
    "Uuid",
    "Utc",
    "SystemTime",
];

/// Variant constructors that wrap a value (`Ok(x)`, `Some(x)`).
pub(crate) const WRAPPING_VARIANTS: &[&str] = &["Ok", "Some", "Err"];

// --- Locks and guarded state ---

/// Steps after a lock step that only unwrap the guard (`lock().unwrap()`, `.await` is a
/// step-less suffix).
pub(crate) const AFTER_LOCK_NOISE: &[&str] = &[
    "unwrap",
    "expect",
    "map_err",
    "ok",
    "ok_or",
    "ok_or_else",
    "context",
    "with_context",
    "unwrap_or_else",
];

/// Lookups whose answer is only whether something is there (`map.contains_key(&k)`,
/// `found.is_some()`, `rows.is_empty()`).
pub(crate) const PRESENCE_ANSWERS: &[&str] = &[
    "contains",
    "contains_key",
    "is_some",
    "is_none",
    "is_empty",
    "exists",
];

/// Methods that read the value behind a guard (`guard.get(k)`, `m.lock().unwrap().len()`).
pub(crate) const GUARDED_READS: &[&str] = &[
    "get",
    "contains_key",
    "contains",
    "len",
    "is_empty",
    "cloned",
    "clone",
    "iter",
    "values",
    "keys",
    "first",
    "last",
    "copied",
    "status",
    "state",
];

/// Methods that change the value behind a guard.
pub(crate) const GUARDED_WRITES: &[&str] = &[
    "insert",
    "remove",
    "push",
    "push_back",
    "push_front",
    "and_modify",
    "or_insert",
    "or_insert_with",
    "extend",
    "clear",
    "retain",
    "pop",
    "truncate",
    "swap",
    "replace",
    "take",
    "get_mut",
    "set",
    "drain",
    "append",
];

/// Guarded writes that take one entry out by its key (an in-memory map, set or list).
pub(crate) const GUARDED_REMOVALS: &[&str] = &[
    "remove",
    "remove_entry",
    "swap_remove",
    "shift_remove",
    "remove_if",
];

/// Lock steps that hand out a read guard, and those that hand out a write guard.
pub(crate) const READ_GUARD_STEPS: &[&str] = &["read", "read_owned", "upgradable_read"];
pub(crate) const WRITE_GUARD_STEPS: &[&str] = &["write", "write_owned", "try_write"];

/// A mutex's lock steps (one kind of guard: a method called on it reads or writes).
pub(crate) const MUTEX_LOCK_STEPS: &[&str] = &["lock", "blocking_lock"];

/// Steps before a lock step that reach a per-key lock (`locks.entry(k).or_default().lock()`).
pub(crate) const PER_KEY_LOCK_STEPS: &[&str] = &["entry", "or_default", "or_insert_with"];

/// Concurrent maps (`DashMap`, `scc::HashMap`): reads under a short shard lock, write guards,
/// and writes.
pub(crate) const CONCURRENT_MAP_READS: &[&str] =
    &["get", "contains_key", "contains", "len", "is_empty", "iter"];
pub(crate) const CONCURRENT_MAP_GUARDS: &[&str] = &["get_mut", "entry", "alter"];
pub(crate) const CONCURRENT_MAP_WRITES: &[&str] = &[
    "insert",
    "remove",
    "retain",
    "clear",
    "remove_if",
    "alter_all",
    // A cache's removal (moka's `invalidate`).
    "invalidate",
];
/// Types that control tasks, not credentials: a map of them named `*_tokens` holds no
/// one-time tokens.
pub(crate) const TASK_CONTROL_TYPES: &[&str] = &[
    "CancellationToken",
    "DropGuard",
    "JoinHandle",
    "AbortHandle",
    "Sender",
    "Notify",
];
/// The steps that take one entry out of an in-memory map or cache.
pub(crate) const ENTRY_REMOVAL_STEPS: &[&str] = &[
    "remove",
    "remove_entry",
    "take",
    "invalidate",
    "swap_remove",
    "shift_remove",
    "pop",
];

/// Distributed lock managers' acquire steps (awaited: `locks.lock(resource, ttl).await`).
pub(crate) const DIST_LOCK_STEPS: &[&str] = &[
    "lock",
    "acquire",
    "acquire_no_guard",
    "try_lock",
    "try_acquire",
    // kube-leader-election's `LeaseLock::try_acquire_or_renew()`.
    "try_acquire_or_renew",
];

/// Steps that end a guard's life early (`locks.unlock(&guard)`, `lease.release(guard)`, sqlx's
/// `guard.release_now()`).
pub(crate) const GUARD_RELEASE_STEPS: &[&str] =
    &["unlock", "release", "release_lock", "release_now"];

/// Words of a return type that hands a lock back to the caller.
pub(crate) const GUARD_RETURN_WORDS: &[&str] = &["guard", "lock", "lease", "permit"];

/// Runtime handle methods that spawn (`rt.spawn(fut)`, `set.spawn_local(fut)`).
pub(crate) const SPAWN_METHODS: &[&str] = &["spawn", "spawn_local"];

/// Path segments that resolve a spawn to a runtime (`tokio::spawn`, `task::spawn`,
/// `std::thread::spawn`, `rt.spawn`, `async_std::task::spawn`).
pub(crate) const SPAWN_PATH_WORDS: &[&str] = &["tokio", "task", "thread", "rt", "async_std"];

/// Path segments that resolve a sleep to a timer (`tokio::time::sleep`, `thread::sleep`).
pub(crate) const SLEEP_PATH_WORDS: &[&str] = &["time", "tokio", "thread"];

// --- Databases ---

/// diesel statement steps (`.set(..)`, `.values(..)`, `.execute(conn)`).
pub(crate) const DIESEL_STATEMENT_STEPS: &[&str] = &[
    "execute",
    "get_result",
    "get_results",
    "returning",
    "set",
    "values",
];

/// diesel's assignment step (`.set(status.eq(..))`).
pub(crate) const DIESEL_SET_STEPS: &[&str] = &["set"];

/// sea-orm's assignment steps (`.col_expr(Column::Status, Expr::value(..))`, `.set(model)`).
pub(crate) const SEA_ORM_SET_STEPS: &[&str] = &["col_expr"];

/// diesel's filter steps.
pub(crate) const DIESEL_FILTER_STEPS: &[&str] = &["filter", "or_filter"];

/// sea-orm's filter step.
pub(crate) const SEA_ORM_FILTER_STEPS: &[&str] = &["filter"];

/// diesel's row locks (`.for_update()`).
pub(crate) const DIESEL_ROW_LOCKS: &[&str] = &["for_update", "for_no_key_update", "for_share"];

/// sea-orm steps that run a select (`.one(db)`, `.all(db)`).
pub(crate) const SEA_ORM_READ_RUNS: &[&str] = &["one", "all", "stream", "count", "paginate"];

/// sea-orm's row locks (`.lock_exclusive()`).
pub(crate) const SEA_ORM_ROW_LOCKS: &[&str] = &[
    "lock_exclusive",
    "lock_shared",
    "lock",
    "lock_with_behavior",
];

/// sea-orm steps that run a write.
pub(crate) const SEA_ORM_EXEC_STEPS: &[&str] =
    &["exec", "exec_with_returning", "exec_without_returning"];

/// Steps that read many rows (a batch over a snapshot, not one row's read-modify-write).
pub(crate) const MANY_ROWS_STEPS: &[&str] = &[
    "all",
    "fetch_all",
    "load",
    "fetch",
    "query",
    "get_results",
    "paginate",
    "stream",
];

/// Steps that fetch at most one row (the result is the row, or its absence).
pub(crate) const ONE_ROW_STEPS: &[&str] = &[
    "fetch_one",
    "fetch_optional",
    "get_result",
    "one",
    "query_one",
    "query_opt",
];

/// Steps that check a statement's result in the chain (`rows_affected()`, `ok_or(..)`).
/// Steps that only adapt a query's result (`.get_result(conn).ok()`, `.optional()`).
pub(crate) const RESULT_ADAPTER_STEPS: &[&str] = &[
    "ok",
    "ok_or",
    "ok_or_else",
    "optional",
    "map_err",
    "unwrap_or_else",
    "unwrap",
    "expect",
    "unwrap_or_default",
    "context",
    "with_context",
];

/// Methods that test a database error for a unique-key conflict.
pub(crate) const UNIQUE_VIOLATION_CHECKS: &[&str] = &[
    "is_unique_violation",
    "is_unique_constraint_violation",
    "is_duplicate_key",
    "is_duplicate_entry",
];

// --- Timeouts (tokio::time, reqwest, hyper, tonic, aws-sdk, std::io) ---
/// Methods that tell a timeout apart from other errors.
pub(crate) const TIMEOUT_CHECKS: &[&str] = &[
    "is_timeout",
    "is_elapsed",
    "is_timed_out",
    "timed_out",
    "is_deadline_exceeded",
];
/// Error variants and codes of a timeout (by last segment): tokio's `Elapsed`, tonic's
/// `Code::DeadlineExceeded`, `io::ErrorKind::TimedOut`, aws-sdk's `TimeoutError`.
pub(crate) const TIMEOUT_VALUES: &[&str] = &[
    "Elapsed",
    "DeadlineExceeded",
    "TimedOut",
    "Timeout",
    "TimeoutError",
    "OperationTimedOut",
];
/// HTTP builder steps of a request that changes nothing on the remote side.
pub(crate) const READ_ONLY_HTTP_STEPS: &[&str] = &["get", "head"];
/// Request builder steps that change something (`post`, `put`, .., `request(Method::POST, ..)`).
pub(crate) const WRITING_HTTP_STEPS: &[&str] = &["post", "put", "patch", "delete", "request"];

pub(crate) const RESULT_CHECK_STEPS: &[&str] = &[
    "rows_affected",
    "ok_or",
    "ok_or_else",
    "ensure_one",
    "expect_one",
];

/// diesel's `.serializable()` transaction builder step.
pub(crate) const SERIALIZABLE_STEPS: &[&str] = &["serializable"];

// --- Redis ---

/// Redis commands that claim a key atomically (`SET .. NX` is decided by its flag).
pub(crate) const REDIS_CLAIM_COMMANDS: &[&str] = &["EVAL", "EVALSHA", "SETNX", "HSETNX"];
pub(crate) const REDIS_WRITE_COMMANDS: &[&str] = &[
    "DEL",
    "GETDEL",
    "UNLINK",
    "HDEL",
    "SET",
    "HSET",
    "INCR",
    "DECR",
    "INCRBY",
    "EXPIRE",
    "LPUSH",
    "RPUSH",
    "SADD",
    "SREM",
    "ZADD",
    "MSET",
    "HINCRBY",
    "INCRBYFLOAT",
    "DECRBY",
    "ZREM",
    "LREM",
    "LTRIM",
    "LSET",
    "PEXPIRE",
    "EXPIREAT",
    "PERSIST",
    "GETSET",
    "HMSET",
    "ZINCRBY",
    "SETEX",
    "PSETEX",
    "XADD",
    "ZREMRANGEBYSCORE",
];
/// Commands that move an entry from one list to another (`BRPOPLPUSH queue processing 0`): the
/// reliable-queue claim, whose entry stays in the second list until someone takes it out.
pub(crate) const REDIS_LIST_MOVE_COMMANDS: &[&str] =
    &["RPOPLPUSH", "BRPOPLPUSH", "LMOVE", "BLMOVE"];
pub(crate) const REDIS_READ_COMMANDS: &[&str] = &[
    "GET",
    "EXISTS",
    "HGET",
    "HGETALL",
    "MGET",
    "SISMEMBER",
    "TTL",
    "LRANGE",
    "LINDEX",
    "LPOP",
    "RPOP",
    "LLEN",
    "SCARD",
    "ZCARD",
    "HLEN",
    "SMEMBERS",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGE",
    "ZSCORE",
    "ZRANK",
    "ZCOUNT",
    "HKEYS",
    "HVALS",
    "HMGET",
    "STRLEN",
    "PTTL",
];
/// Redis steps whose integer literal arguments lowering keeps (`expire(&key, 300)`,
/// `.arg(300)`): fixes that move an expiry into the claim need its text.
pub(crate) const REDIS_INT_ARG_STEPS: &[&str] = &["expire", "pexpire", "arg"];
/// Commands that count a collection's members (`LLEN jobs:waiting`): a count, as SQL's
/// `count(*)` is one.
pub(crate) const REDIS_COUNT_COMMANDS: &[&str] = &["LLEN", "SCARD", "ZCARD", "HLEN", "ZCOUNT"];
/// Commands that add a member to a collection (`LPUSH`, `SADD`): an insert of one more entry,
/// not the rewrite of a value.
pub(crate) const REDIS_ADD_COMMANDS: &[&str] = &["LPUSH", "RPUSH", "SADD", "ZADD"];
/// Commands and methods that delete.
pub(crate) const REDIS_DELETE_COMMANDS: &[&str] = &["DEL", "UNLINK", "HDEL", "GETDEL"];
pub(crate) const REDIS_DELETE_METHODS: &[&str] = &["del", "unlink", "hdel", "get_del", "getdel"];
/// Steps of a command chain that are not commands (`.arg(..)`, `.query_async(..)`).
pub(crate) const REDIS_CHAIN_STEPS: &[&str] = &[
    "query_async",
    "query",
    "exec_async",
    "ignore",
    "arg",
    "expire",
];
/// Methods that are strong enough on a receiver of unknown type (`x.del(k).await`).
pub(crate) const REDIS_UNTYPED_METHODS: &[&str] = &["del", "exists", "get_del"];
/// Steps that run a script (`Script::new(..).invoke_async(..)`, `eval`).
pub(crate) const REDIS_SCRIPT_STEPS: &[&str] = &["invoke", "invoke_async", "eval"];
/// Steps that open a redis connection (`client.get_multiplexed_async_connection()`).
pub(crate) const REDIS_CONNECTION_STEPS: &[&str] = &[
    "get_multiplexed_async_connection",
    "get_async_connection",
    "get_multiplexed_tokio_connection",
    "get_connection_manager",
];

// --- MongoDB (a collection's methods) ---

/// Collection methods that read documents.
pub(crate) const MONGO_READ_METHODS: &[&str] = &["find_one", "distinct"];
/// Collection methods that count documents.
pub(crate) const MONGO_COUNT_METHODS: &[&str] = &["count_documents"];
/// Collection methods that insert documents.
pub(crate) const MONGO_INSERT_METHODS: &[&str] = &["insert_one", "insert_many"];
/// Collection methods that delete documents (`find_one_and_delete` hands the one it took).
pub(crate) const MONGO_DELETE_METHODS: &[&str] =
    &["delete_one", "delete_many", "find_one_and_delete"];
/// Collection methods that update documents by a filter.
pub(crate) const MONGO_UPDATE_METHODS: &[&str] = &[
    "update_one",
    "update_many",
    "replace_one",
    "find_one_and_update",
    "find_one_and_replace",
];

// --- Remote calls ---

/// Future adapters that hand the future's output through (`fut.instrument(span).await` awaits
/// `fut`): tracing's and futures' wrappers.
pub(crate) const FUTURE_ADAPTER_STEPS: &[&str] = &[
    "instrument",
    "in_current_span",
    "with_current_subscriber",
    "boxed",
    "boxed_local",
];

/// reqwest builder verbs (`client.post(url)`).
pub(crate) const HTTP_VERBS: &[&str] =
    &["get", "post", "put", "patch", "delete", "head", "request"];

/// Crates of a remote service's API, whose awaited calls are requests to it
/// (`stripe::Customer::create(&client, ..).await`, `octocrab::instance().repos(..)..`).
pub(crate) const REMOTE_API_CRATES: &[&str] = &[
    "stripe",
    "async_stripe",
    "octocrab",
    "paypal_rs",
    "sendgrid",
    "twilio",
    "mollie_api",
];

/// Blocking HTTP crates (`ureq::post(url).call()`).
pub(crate) const BLOCKING_HTTP_CRATES: &[&str] = &["ureq", "minreq", "attohttpc"];

/// Steps of a blocking HTTP crate that send (`.call()`, `.send_json(..)`).
pub(crate) const BLOCKING_SEND_STEPS: &[&str] = &[
    "call",
    "send",
    "send_json",
    "send_string",
    "send_form",
    "send_bytes",
];

/// Functions of `reqwest::blocking` that send (`reqwest::blocking::get(url)`).
pub(crate) const REQWEST_BLOCKING_FNS: &[&str] = &["get", "post"];

/// tonic's request constructor (`Request::new(msg)` as an argument).
pub(crate) const GRPC_REQUEST_FNS: &[&str] = &["Request::new", "tonic::Request::new"];

/// Database-shaped methods: on a receiver named `client` they are a database client, not a
/// remote API.
pub(crate) const DATABASE_METHODS: &[&str] = &[
    "query",
    "query_one",
    "query_opt",
    "query_raw",
    "execute",
    "prepare",
    "prepare_cached",
    "batch_execute",
    "simple_query",
    "transaction",
    "fetch",
    "fetch_one",
    "fetch_all",
    "fetch_optional",
    "get",
    "set",
    "del",
    "exists",
    "clone",
    "lock",
    "read",
    "write",
];

// --- Receivers and results ---

/// Calls that hand back (a handle to) their receiver: `pool.get()`, `client.clone()`.
pub(crate) const HANDLE_STEPS: &[&str] = &[
    "get",
    "get_connection",
    "acquire",
    "get_conn",
    "connect",
    "get_owned",
    "clone",
    "as_ref",
    "begin",
    "deref",
];

/// Steps that hand on the value they are called on, re-borrowed (`txn.deref_mut()`,
/// `tx.as_mut()`, a pooled connection's `acquire()`): the call is an argument of the call that
/// uses it.
pub(crate) const REBORROW_STEPS: &[&str] = &[
    "deref",
    "deref_mut",
    "as_ref",
    "as_mut",
    "borrow_mut",
    "acquire",
];

/// Steps a chain of only handle-passing steps is made of (`self.db.clone().get().unwrap()`).
pub(crate) const HANDLE_CHAIN_STEPS: &[&str] =
    &["clone", "as_ref", "get", "acquire", "unwrap", "expect"];

/// Constructors that make a value of their type (`Client::new()`, `Pool::connect(..)`).
pub(crate) const CONSTRUCTOR_FNS: &[&str] = &[
    "new",
    "default",
    "builder",
    "connect",
    "open",
    "from_env",
    "from_conf",
];

/// Method names too common to resolve to the one crate method of that name when the receiver
/// is not known.
pub(crate) const COMMON_METHODS: &[&str] = &[
    "new", "get", "set", "insert", "remove", "send", "clone", "run", "call", "handle", "process",
    "execute", "update", "save", "delete", "load", "find", "len", "push", "into", "from", "build",
    "start", "stop", "next", "poll", "write", "read", "lock", "fmt", "eq", "default", "drop",
    "map", "iter", "parse",
];

/// Steps that take the next expired entry of a delay queue (its consumer).
pub(crate) const QUEUE_POLL_STEPS: &[&str] = &["next", "poll_expired", "try_next", "poll_next"];

/// Wrapper types seen through when classifying a type (`Arc<Mutex<T>>` is a mutex).
pub(crate) const TYPE_WRAPPERS: &[&str] = &[
    "Arc",
    "Rc",
    "Box",
    "Option",
    "Pin",
    "RefCell",
    "Cell",
    "Cow",
    "State",
    "Data",
    "Extension",
    "Weak",
    "OnceCell",
    "OnceLock",
    "Lazy",
    "LazyLock",
    "ManuallyDrop",
];

/// Words of a resolved type path (lowercase) and the class they give, tried in this order by
/// `kb::types`.
/// Concurrent maps and caches, each call atomic on its own (moka's and quick_cache's caches too).
pub(crate) const CONCURRENT_MAP_TYPES: &[&str] = &[
    "dashmap",
    "dashset",
    "scc::",
    "moka::",
    "mini_moka::",
    "quick_cache::",
];
pub(crate) const DIST_LOCK_TYPES: &[&str] = &[
    "lockmanager",
    "redlock",
    "rslock",
    "distributedlock",
    // sqlx's session advisory lock: `PgAdvisoryLock::new(key).acquire(conn)`.
    "pgadvisorylock",
    // staleguard's own lease stores (`SqliteLeaseStore`, `PgLeaseStore`, `LeaseGuard`).
    "leasestore",
    "leaseguard",
    // etcd's lock service (`etcd_client::Client::lock(name, LockOptions::with_lease(..))`).
    "etcd_client::",
    // kube-leader-election's lease on a Kubernetes `Lease` object.
    "kube_leader_election::",
];
pub(crate) const MAP_TYPES: &[&str] = &[
    "dashmap", "hashmap", "btreemap", "lrucache", "indexmap", "scc::",
];
/// Collections recognised by the end of their path.
pub(crate) const LIST_TYPE_ENDINGS: &[&str] = &["vec", "hashset", "btreeset", "vecdeque"];
pub(crate) const CHANNEL_TYPES: &[&str] = &[
    "mpsc",
    "broadcast",
    "watch",
    "oneshot",
    "flume",
    "crossbeam",
    "async_channel",
    "kanal",
];
pub(crate) const CHANNEL_TYPE_NAMES: &[&str] = &[
    "Sender",
    "UnboundedSender",
    "SyncSender",
    "Receiver",
    "UnboundedReceiver",
];
pub(crate) const REDIS_TYPE_NAMES: &[&str] = &["MultiplexedConnection", "ConnectionManager"];
pub(crate) const HTTP_TYPES: &[&str] = &["reqwest", "hyper", "octocrab"];
/// The first step of an octocrab call (`octo.issues(owner, repo)`, `octo.pulls(..)`, the raw
/// `octo._post(..)`): each hands out the handler for one part of the GitHub API.
pub(crate) const OCTOCRAB_HANDLERS: &[&str] = &[
    "issues",
    "pulls",
    "repos",
    "checks",
    "actions",
    "orgs",
    "teams",
    "users",
    "commits",
    "current",
    "apps",
    "installation",
    "gists",
    "search",
    "projects",
    "ratelimit",
    "graphql",
    "_get",
    "_post",
    "_put",
    "_patch",
    "_delete",
    "get",
    "post",
    "put",
    "patch",
    "delete",
];
/// Steps of an octocrab call that only read (`.get(n)`, `.list()`, `.list_commits()`).
pub(crate) const OCTOCRAB_READ_STEPS: &[&str] = &["get", "_get", "list", "search", "ratelimit"];
pub(crate) const HTTP_TYPE_NAMES: &[&str] = &["HttpClient", "SendRequest"];
pub(crate) const BROKER_TYPES: &[&str] = &["lapin", "rdkafka", "async_nats"];
pub(crate) const DATABASE_TYPES: &[&str] = &[
    "sqlx",
    "pgpool",
    "mysqlpool",
    "sqlitepool",
    "anypool",
    "diesel",
    "sea_orm",
    "databaseconnection",
    "pgconnection",
    "mysqlconnection",
    "sqliteconnection",
    "tokio_postgres",
    "deadpool",
    "bb8",
    "r2d2",
    "pooledconnection",
    "mongodb",
];
pub(crate) const DATABASE_TYPE_NAMES: &[&str] = &[
    "PgPool",
    "MySqlPool",
    "SqlitePool",
    "DbPool",
    "DbConn",
    "Pool",
    "PgConn",
    "DatabaseConnection",
];

/// Crates whose `Transaction` types are database transactions (the first segment of a
/// resolved path). A `Transaction` from any other library (`bitcoin::Transaction`, a
/// blockchain SDK's signed transaction) is a domain value, not an open database transaction.
pub(crate) const DB_TRANSACTION_CRATES: &[&str] = &[
    "sqlx",
    "sea_orm",
    "diesel",
    "diesel_async",
    "tokio_postgres",
    "postgres",
    "deadpool_postgres",
    "deadpool_diesel",
    "bb8_postgres",
    "rusqlite",
    "mysql_async",
    "mysql",
    "tiberius",
    "libsql",
    "surrealdb",
    "mongodb",
    "duckdb",
    "redb",
    "heed",
    "sled",
    "rocksdb",
    "foundationdb",
    "tikv_client",
    "scylla",
];

/// Words in a type's fields that say the crate's own `Transaction` / `Tx` wraps a database
/// transaction (`struct Tx { inner: sqlx::Transaction<'static, Postgres> }`).
pub(crate) const DB_WRAPPER_WORDS: &[&str] = &[
    "sqlx",
    "postgres",
    "sqlite",
    "mysql",
    "sea_orm",
    "diesel",
    "rusqlite",
    "databasetransaction",
    "pgconnection",
    "sqliteconnection",
    "mongodb",
    "clientsession",
];

/// Words in a type's own name that say it is a database's (`SqlTransaction`, `DbTx`).
pub(crate) const DB_NAME_WORDS: &[&str] = &[
    "sql", "db", "database", "pg", "postgres", "sqlite", "mysql", "conn", "mongo", "diesel", "orm",
];

/// Functions whose result is a channel end (lowercase resolved path words).
pub(crate) const CHANNEL_FN_WORDS: &[&str] = &["mpsc", "broadcast", "flume"];

/// Steps that turn a query builder held by a local into SQL text, or hand the builder on
/// (sea-query's `statement.build_sqlx(PostgresQueryBuilder)`, `.to_string(..)`).
pub(crate) const STATEMENT_FINISH_STEPS: &[&str] = &[
    "build",
    "build_sqlx",
    "build_any",
    "build_any_sqlx",
    "build_rusqlite",
    "build_postgres",
    "to_string",
    "to_owned",
    "clone",
];

/// The last step of a call that reads the clock (`clock.now()`, `Utc::now()`,
/// `OffsetDateTime::now_utc()`).
pub(crate) const CLOCK_STEPS: &[&str] = &["now", "now_utc", "now_local", "utc_now"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_union_is_every_trigger_list() {
        for (list, steps) in TRIGGERS {
            for step in *steps {
                assert!(is_trigger_step(step), "{list}: `{step}`");
            }
        }
        assert!(!is_trigger_step("clone") && !is_trigger_step("map"));
    }

    #[test]
    fn no_trigger_is_dropped_as_noise() {
        for (list, steps) in TRIGGERS {
            for step in *steps {
                assert!(
                    !NOISE_STEPS.contains(step),
                    "{list}: `{step}` is also noise"
                );
            }
        }
    }
}
