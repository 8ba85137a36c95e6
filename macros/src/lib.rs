//! `#[staleguard::fenced]` and `#[staleguard::idempotent]`: thin entry points; parsing lives in
//! `staleguard-grammar`, validation and expansion in their own modules.

mod fenced;
mod idempotent;

use proc_macro::TokenStream;

/// Runs an async handler on the *current* round of a resource: take the lease (or lock), open
/// the transaction, check the fencing token, re-read the persisted state under them, verify the
/// operation's identity, run the body with the fresh state (and the fencing token), commit,
/// release. When the identity no longer matches, or a newer lease holder has already written,
/// the handler returns the `stale` value and writes nothing.
///
/// See `docs/macros.md` for when to use it and what it does not guarantee.
///
/// # Arguments
///
/// | argument | required | meaning |
/// | --- | --- | --- |
/// | `lease = <expr>` | this or `lock` | a `staleguard::lease::LeaseStore` (cloned; stores are cheap handles) |
/// | `resource = <expr>` | with `lease` | the resource's key, `impl Into<String>` |
/// | `ttl = <expr>` | with `lease` | the lease's `Duration` |
/// | `owner = <expr>` | no | the lease owner; a unique one per call by default |
/// | `lock = <expr>` | this or `lease` | an in-process `staleguard::lease::Lock` (`tokio::sync::Mutex`, `Arc<Mutex>`); no token |
/// | `begin = <expr>` | no | awaited to open a transaction (`pool.begin()`); committed when the body returns `Ok`, rolled back otherwise |
/// | `tx = <name>` | with `begin` | the transaction's name in `reread` and the body |
/// | `state = [mut] <name>` | yes | the re-read state's name in `verify` and the body |
/// | `reread = <expr>` | yes | reads the state under the guard; `.await` and `?` allowed |
/// | `verify = <expr>` | yes | a `bool`: the operation's identity still matches the state |
/// | `stale = <expr>` | yes | returned, with nothing written, when the call is stale |
/// | `token = <name>` | with a `lease` and no `begin` | the lease's `FencingToken` in the body |
///
/// With a `lease` and `begin`, the fence check is the transaction's first statement, before the
/// re-read: a holder whose lease expired and was taken over gets `stale`. A `lease` without
/// `begin` must bind `token` and pass it to its writes. Lease and store failures are returned as
/// `Err(From::from(staleguard::Error))`, so the function must return a `Result` then.
/// Parameters cannot share a name with `state`, `tx` or `token`: the body only sees the state
/// read under the guard.
///
/// # Example: a late payment callback after a cancel
///
/// The callback carries the payment attempt it belongs to. Under the lease, it re-reads the
/// order and only pays an order that is still awaiting that very attempt. An address edit in
/// between does not make it stale (it checks the identity, not the whole row's version); a
/// cancel does, and a cancelled order is never paid.
///
/// ```
/// use std::time::Duration;
/// use sqlx::{Row, SqliteConnection, SqlitePool};
/// use staleguard::lease::SqliteLeaseStore;
///
/// #[derive(Debug)]
/// enum AppError { Db(sqlx::Error), Guard(staleguard::Error) }
/// impl From<sqlx::Error> for AppError { fn from(e: sqlx::Error) -> Self { AppError::Db(e) } }
/// impl From<staleguard::Error> for AppError { fn from(e: staleguard::Error) -> Self { AppError::Guard(e) } }
///
/// #[derive(Debug, PartialEq)]
/// enum Callback { Paid, Stale }
///
/// struct Order { status: String, attempt: i64 }
///
/// async fn load_order(db: &mut SqliteConnection, id: i64) -> Result<Order, sqlx::Error> {
///     let row = sqlx::query("SELECT status, attempt FROM orders WHERE id = ?")
///         .bind(id).fetch_one(db).await?;
///     Ok(Order { status: row.try_get(0)?, attempt: row.try_get(1)? })
/// }
///
/// struct Payments { db: SqlitePool, leases: SqliteLeaseStore }
///
/// impl Payments {
///     #[staleguard::fenced(
///         lease = self.leases, resource = format!("order:{order_id}"), ttl = Duration::from_secs(10),
///         begin = self.db.begin(), tx = tx,
///         state = order, reread = load_order(&mut tx, order_id).await?,
///         verify = order.status == "awaiting_payment" && order.attempt == attempt,
///         stale = Ok(Callback::Stale),
///     )]
///     async fn on_payment_succeeded(&self, order_id: i64, attempt: i64) -> Result<Callback, AppError> {
///         sqlx::query("UPDATE orders SET status = 'paid' WHERE id = ?")
///             .bind(order_id).execute(&mut *tx).await?;
///         Ok(Callback::Paid)
///     }
///
///     #[staleguard::fenced(
///         lease = self.leases, resource = format!("order:{order_id}"), ttl = Duration::from_secs(10),
///         begin = self.db.begin(), tx = tx,
///         state = order, reread = load_order(&mut tx, order_id).await?,
///         verify = order.status == "awaiting_payment",
///         stale = Ok(false),
///     )]
///     async fn cancel(&self, order_id: i64) -> Result<bool, AppError> {
///         sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ?")
///             .bind(order_id).execute(&mut *tx).await?;
///         Ok(true)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), AppError> {
/// let db = SqlitePool::connect("sqlite::memory:").await?;
/// let leases = SqliteLeaseStore::new(db.clone());
/// leases.migrate().await.map_err(staleguard::Error::from)?;
/// sqlx::raw_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, attempt INTEGER);
///                INSERT INTO orders VALUES (1, 'awaiting_payment', 3);").execute(&db).await?;
/// let payments = Payments { db, leases };
///
/// assert!(payments.cancel(1).await?);                       // the user cancels...
/// let late = payments.on_payment_succeeded(1, 3).await?;    // ...then the callback lands
/// assert_eq!(late, Callback::Stale);                         // stale: nothing written
/// # Ok(())
/// # }
/// ```
///
/// # Example: an old release timer after the seat was re-reserved (ABA)
///
/// Reservation A's ten-minute "release seat" timer carries A's reservation id. When it fires
/// after A ended and B reserved the same seat, the seat is "reserved" again, but not by A: the
/// timer exits stale and B keeps the seat. This one uses an in-process lock and an in-memory
/// table to show the shape; the same works with a lease and a database.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Arc;
/// use tokio::sync::Mutex;
///
/// #[derive(Debug, PartialEq)]
/// enum Released { Released, Stale }
///
/// #[derive(Default)]
/// struct Seats { lock: Mutex<()>, reserved_by: Arc<std::sync::Mutex<HashMap<u32, u64>>> }
///
/// impl Seats {
///     fn reservation(&self, seat: u32) -> Option<u64> {
///         self.reserved_by.lock().unwrap().get(&seat).copied()
///     }
///
///     fn reserve(&self, seat: u32, reservation: u64) {
///         self.reserved_by.lock().unwrap().insert(seat, reservation);
///     }
///
///     #[staleguard::fenced(
///         lock = self.lock,
///         state = holder, reread = self.reservation(seat),
///         verify = holder == Some(reservation),
///         stale = Released::Stale,
///     )]
///     async fn release_timer_fired(&self, seat: u32, reservation: u64) -> Released {
///         self.reserved_by.lock().unwrap().remove(&seat);
///         Released::Released
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let seats = Seats::default();
/// seats.reserve(12, 1001);                 // reservation A; its timer is scheduled
/// seats.reserved_by.lock().unwrap().remove(&12); // A is cancelled early
/// seats.reserve(12, 1002);                 // B takes the seat
/// assert_eq!(seats.release_timer_fired(12, 1001).await, Released::Stale); // A's timer fires
/// assert_eq!(seats.reservation(12), Some(1002)); // B keeps the seat
/// # }
/// ```
#[proc_macro_attribute]
pub fn fenced(args: TokenStream, item: TokenStream) -> TokenStream {
    fenced::expand(args.into(), item.into()).into()
}

/// Makes an `async fn` handler idempotent: its effect happens once per key, duplicates get the
/// stored response or "in progress", and a late owner is fenced out.
///
/// ```text
/// #[staleguard::idempotent(store = state.idempotency, key = req.idempotency_key, claim = claim)]
/// async fn charge(state: &AppState, req: ChargeRequest) -> Result<Receipt, PayError> {
///     // `claim.record_id()` is the same for every owner of this key: pass it downstream.
///     state.gateway.charge(claim.record_id(), req.amount).await
/// }
/// ```
///
/// Arguments (parsed by `staleguard_grammar::idempotent`, the grammar the analyzer shares):
///
/// | argument | meaning |
/// | --- | --- |
/// | `store = expr` | required: an `Idempotency<S>` (or a reference or `Arc` of one) |
/// | `key = expr` | required: the key — `&str`, `String`, an integer, `Option<_>` (`None` is a missing key), or the axum `IdempotencyKeyHeader` |
/// | `tenant = expr` | scopes the key by tenant |
/// | `fingerprint(expr, ..)` | the request fields hashed to detect a reused key (default: every serializable argument binding) |
/// | `name = "..."` | the key scope (default: the function's name) |
/// | `lease = "30s"` | how long a claim is exclusive before another request may take it over |
/// | `wait = "2s"` | a duplicate in flight waits up to this long for the first outcome instead of answering "in progress" at once |
/// | `retention = "24h"` | how long outcomes are replayed |
/// | `failed = replay` / `retry` | what a duplicate of a permanently failed call gets |
/// | `claim = ident` | binds a `ClaimHandle` (fence, record id, heartbeat) in the body |
/// | `tx = ident` | the one-transaction mode (a `PostgresStore` or `SqliteStore` in the database of the body's writes): binds the transaction the claim was made in; the body writes through it (`&mut *tx`), and the outcome commits with them; an error rolls everything back |
///
/// The function must be `async` and return `Result<T, E>` with `T: Serialize +
/// DeserializeOwned` (or axum's `Json<U>` with such a `U`, stored as `U`) and `E: Classify +
/// Serialize + DeserializeOwned + From<IdempotencyError>`. See the `#[idempotent]` part of
/// `docs/macros.md` for the state machine, the HTTP mapping and the guarantees.
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    idempotent::expand(args.into(), item.into()).into()
}
