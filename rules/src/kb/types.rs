//! What a receiver is, from its declared type (fields, params, `let x: T`) or how it was made.

use super::has;
use crate::apis::{
    BROKER_TYPES, CHANNEL_TYPE_NAMES, CHANNEL_TYPES, CONCURRENT_MAP_TYPES, DATABASE_TYPE_NAMES,
    DATABASE_TYPES, DB_NAME_WORDS, DB_TRANSACTION_CRATES, DB_WRAPPER_WORDS, DIST_LOCK_TYPES,
    HTTP_TYPE_NAMES, HTTP_TYPES, LIST_TYPE_ENDINGS, MAP_TYPES, REDIS_TYPE_NAMES, TYPE_WRAPPERS,
};
use crate::facts::Facts;
use crate::fxhash::FxHashMap;
use crate::name::Name;
use std::cell::RefCell;

/// The kind of value a receiver holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// A database pool or connection (sqlx, diesel, sea-orm, tokio-postgres, deadpool, bb8).
    Db,
    /// An open database transaction.
    DbTx,
    Http,
    Grpc,
    Aws,
    /// A mail transport (lettre's SMTP or sendmail transports): sending is a remote call.
    Mail,
    /// AMQP channel or Kafka / NATS producer.
    Broker,
    Redis,
    Mutex,
    RwLock,
    /// A map of per-key locks (`DashMap<Id, Arc<Mutex<()>>>`).
    LockMap,
    /// A lock guard.
    Guard,
    /// mpsc / broadcast / watch / oneshot / flume channel ends.
    Channel,
    /// Plain in-memory collection.
    Collection,
    /// A concurrent map with per-shard locks (`DashMap`, `DashSet`, `scc::HashMap`): `get` reads
    /// under a short read lock, `get_mut` / `entry` hand out a write guard.
    ConcurrentMap,
    /// A distributed lock manager (`rslock::LockManager`, redlock): `lock(..)` takes a lease.
    DistLock,
    /// A Kubernetes client for `Lease` objects (kube's `Api<Lease>`): leader election's lease.
    KubeLeases,
    DelayQueue,
    /// A struct of the crate.
    User(Name),
    /// A trait of the crate (`dyn PaymentGateway`, `impl Notifier`, a generic bound).
    Trait(Name),
    /// Unknown; the type's last name, if any, for name heuristics.
    Unknown(Name),
}

/// The last segment of a path (`a::b::C` is `C`); a char pattern, which is cheaper to search
/// for than `"::"` (paths hold no single colons).
pub(crate) fn last(s: &str) -> &str {
    s.rsplit(':').next().unwrap_or(s)
}

/// The name of a type as written, without its reference and path (`&mut db::Store` is
/// `Store`).
pub(crate) fn named_type(t: &str) -> &str {
    last(t.trim_start_matches('&').trim_start_matches("mut "))
}

/// Memos of [`class_of`], one per classifying thread (a shared memo behind a lock made two
/// threads classify no faster than one). Dropped when classification ends. Its maps are
/// `RefCell`s so that classifying code can share it through `&self`; no borrow is held across
/// a call.
#[derive(Default)]
pub struct Memo {
    /// By file and a 64-bit SipHash of the type as written: the class is a pure function of
    /// the crate facts, and the same field and parameter types are classified again and again.
    /// The hash keeps the memo small (a copy of every type was 1.4 MB on qdrant); a collision,
    /// about 1 in 10^11 for a crate's types, would only give one type another's class.
    by_type: RefCell<FxHashMap<(u32, u64), Class>>,
    /// By resolved shape (prefix, head as written, resolved head, generic arguments): what a
    /// type means does not depend on the file once its names are resolved.
    by_shape: RefCell<FxHashMap<Box<str>, Class>>,
    /// By file and self type: whether the type holds a transaction in a field (every method of
    /// a type asks the same question).
    holds_tx: RefCell<FxHashMap<(u32, Name), bool>>,
}

impl Memo {
    /// Whether type `ty` (named in `file`) holds a transaction in one of its fields.
    pub fn holds_tx(&self, ty: &Name, facts: &Facts, file: u32) -> bool {
        if let Some(&known) = self.holds_tx.borrow().get(&(file, ty.clone())) {
            return known;
        }
        let holds = facts.structs.get(ty.as_str()).is_some_and(|fields| {
            fields
                .iter()
                .any(|(_, t)| class_of(t, facts, file, self) == Class::DbTx)
        });
        self.holds_tx.borrow_mut().insert((file, ty.clone()), holds);
        holds
    }
}

/// Classifies a declared type.
pub fn class_of(ty: &[Name], facts: &Facts, file: u32, memo: &Memo) -> Class {
    let key = (file, {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ty.hash(&mut h);
        h.finish()
    });
    if let Some(c) = memo.by_type.borrow().get(&key) {
        return c.clone();
    }
    let c = class_of_at(ty, facts, file, 0, memo);
    memo.by_type.borrow_mut().insert(key, c.clone());
    c
}

fn class_of_at(ty: &[Name], facts: &Facts, file: u32, depth: u32, memo: &Memo) -> Class {
    let mut i = 0;
    while i < ty.len() && TYPE_WRAPPERS.contains(&last(&ty[i])) {
        i += 1;
    }
    let Some(head) = ty.get(i) else {
        return Class::Unknown(Name::EMPTY);
    };
    let (prefix, bare) = match head.split_once(' ') {
        Some((p, b)) if p == "dyn" || p == "impl" => (p, b),
        _ => ("", head.as_str()),
    };
    if let Some(target) = facts.aliases.get(last(bare))
        && depth < 8
    {
        return class_of_at(target, facts, file, depth + 1, memo);
    }
    let full = facts.resolve(file, bare);
    // The generic arguments, as written and resolved, lowercased.
    let mut rest = String::new();
    for s in &ty[i + 1..] {
        rest.push_str(&s.to_ascii_lowercase());
        rest.push(' ');
        rest.push_str(&facts.resolve(file, s).to_ascii_lowercase());
        rest.push(' ');
    }
    // Once resolved, the class no longer depends on the file: the same resolved shape seen from
    // another file is looked up, not classified again.
    // A path's first segment is the workspace's own or a library's depending on the package
    // it is written in, so the package is part of the shape.
    let package = facts.package_of(file);
    let mut key = String::with_capacity(prefix.len() + bare.len() + full.len() + rest.len() + 8);
    for part in [prefix, bare, &full, &rest] {
        key.push_str(part);
        key.push('\u{1}');
    }
    key.push_str(&package.to_string());
    if let Some(c) = memo.by_shape.borrow().get(key.as_str()) {
        return c.clone();
    }
    let c = class_of_shape(prefix, bare, &full, &rest, facts, package);
    memo.by_shape
        .borrow_mut()
        .insert(key.into_boxed_str(), c.clone());
    c
}

/// Classifies a resolved type: `full` is the head's path after `use` resolution, `bare` the
/// head as written, `rest` the lowercased generic arguments (as written and resolved).
fn class_of_shape(
    prefix: &str,
    bare: &str,
    full: &str,
    rest: &str,
    facts: &Facts,
    package: u32,
) -> Class {
    let lower = full.to_ascii_lowercase();
    let name = Name::new(last(bare));
    let rest_has = |w: &str| has(rest, w);

    if has(&lower, "delayqueue") || rest_has("delayqueue") {
        return Class::DelayQueue;
    }
    if has(&lower, "mutex") {
        return Class::Mutex;
    }
    if has(&lower, "rwlock") {
        return Class::RwLock;
    }
    if has(&lower, "delayqueue") {
        return Class::DelayQueue;
    }
    if CONCURRENT_MAP_TYPES.iter().any(|w| has(&lower, w))
        && !rest_has("mutex")
        && !rest_has("rwlock")
    {
        return Class::ConcurrentMap;
    }
    // kube's `Api<Lease>`: the API server's Lease objects, which leader elections hold.
    if name == "Api"
        && (lower == "api" || lower.starts_with("kube"))
        && rest
            .split(' ')
            .next()
            .is_some_and(|g| g.rsplit(':').next() == Some("lease"))
    {
        return Class::KubeLeases;
    }
    // By name only a library's: the crate's own `LockManager` (a mutex per key, say) is known
    // by its methods.
    if DIST_LOCK_TYPES.iter().any(|w| has(&lower, w))
        && !is_own_type(full, name.as_str(), facts, package)
    {
        return Class::DistLock;
    }
    if MAP_TYPES.iter().any(|w| has(&lower, w)) {
        return if rest_has("mutex") || rest_has("rwlock") {
            Class::LockMap
        } else {
            Class::Collection
        };
    }
    if LIST_TYPE_ENDINGS.iter().any(|w| lower.ends_with(w)) {
        return Class::Collection;
    }
    if CHANNEL_TYPES.iter().any(|w| has(&lower, w)) || CHANNEL_TYPE_NAMES.contains(&name.as_str()) {
        return Class::Channel;
    }
    if has(&lower, "guard") {
        return Class::Guard;
    }
    // A bound naming the ability to begin transactions (sea-orm's `C: TransactionTrait`) is a
    // connection, not an open transaction (`dyn MintTransaction` is one).
    let can_begin = (prefix == "dyn" || prefix == "impl") && name.ends_with("Trait");
    // A transaction that only reads (redb's `ReadTransaction`, a `StoreReaderTransaction`
    // snapshot) writes nothing a rollback could take back.
    let reads_only = crate::kb::names::words(name.as_str())
        .any(|w| matches!(w.as_str(), "read" | "reader" | "readonly" | "snapshot"));
    // The name's head noun (its last word) says what the value is: a `TransitionTransactionState`
    // or a `TransactionId` is data about a transaction. Such a name is a transaction only as the
    // crate's struct that holds one.
    let head_noun = crate::kb::names::words(name.as_str())
        .last()
        .is_some_and(|w| matches!(w.as_str(), "transaction" | "tx" | "txn"));
    if (has(&lower, "transaction") || name == "Tx")
        && !can_begin
        && !reads_only
        && (head_noun || wraps_db_transaction(name.as_str(), facts, 2))
        && is_db_transaction(full, name.as_str(), facts, package)
    {
        return Class::DbTx;
    }
    // A library's connection type by its bare name (`ConnectionManager`), not the crate's own
    // type or trait of that name.
    if has(&lower, "redis")
        || REDIS_TYPE_NAMES.contains(&name.as_str())
            && !is_own_type(full, name.as_str(), facts, package)
    {
        return Class::Redis;
    }
    if has(&lower, "aws_sdk") {
        return Class::Aws;
    }
    if is_mail_transport(full, name.as_str()) {
        return Class::Mail;
    }
    if HTTP_TYPES.iter().any(|w| has(&lower, w)) || HTTP_TYPE_NAMES.contains(&name.as_str()) {
        return Class::Http;
    }
    if BROKER_TYPES.iter().any(|w| has(&lower, w)) || name.ends_with("Producer") {
        return Class::Broker;
    }
    // tonic's generated clients live in a `<service>_client` module; the crate's own struct in
    // such a module (`email_client::EmailClient` wrapping reqwest) is one only if a field holds
    // a tonic client.
    let generated_module = || {
        has(&lower, "_client::")
            && !(is_own_type(full, name.as_str(), facts, package)
                && facts.structs.get(name.as_str()).is_some_and(|fields| {
                    !fields.iter().flat_map(|(_, ty)| ty.iter()).any(|t| {
                        let t = t.to_ascii_lowercase();
                        has(&t, "tonic") || has(&t, "grpc")
                    })
                }))
    };
    if has(&lower, "tonic")
        || (name.ends_with("Client") && (rest_has("channel") || generated_module()))
    {
        return Class::Grpc;
    }
    if DATABASE_TYPES.iter().any(|w| has(&lower, w)) || DATABASE_TYPE_NAMES.contains(&name.as_str())
    {
        return Class::Db;
    }
    if prefix == "dyn" || prefix == "impl" {
        return Class::Trait(name);
    }
    // A library's type (`hiqlite::Client`) is not the crate's struct of the same name.
    let own = || is_own_type(full, name.as_str(), facts, package);
    if facts.structs.contains_key(name.as_str()) && own() {
        return Class::User(name);
    }
    if facts.trait_impls.contains_key(&name) && own() {
        return Class::Trait(name);
    }
    Class::Unknown(name)
}

/// A type named for a transaction (`Transaction`, `Tx`, `PgTransaction`), resolved to `full`:
/// a database transaction when it comes from a database crate, or is written bare with no
/// import (a glob import or a prelude, `Transaction<'_, Postgres>`), or is the crate's own type
/// (a crate path, or a struct of the crate) holding one in a field. Not a library's domain
/// value (`bitcoin::Transaction`, `ethers::types::Transaction`), and not the crate's own record
/// or manager named for transactions (`AccountTransaction`, `ExitTransactionManager`).
fn is_db_transaction(full: &str, name: &str, facts: &Facts, package: u32) -> bool {
    // The crate's own type: a struct is judged by its fields; a trait of the crate named for
    // transactions (an associated `Transaction<'a>` type) stays a transaction.
    let own = || {
        !facts.structs.contains_key(name)
            || names_db_transaction(name)
            || wraps_db_transaction(name, facts, 2)
    };
    match full.split_once("::") {
        // A module of the crate named like a library (`mod bitcoin`), when the crate declares
        // no such type: the path names the library's (`bitcoin::Transaction`, written in a
        // module the crate's `bitcoin` is not in scope of).
        Some((head, _))
            if !matches!(head, "crate" | "self" | "super")
                && facts.is_crate_module(package, head)
                && !facts.structs.contains_key(name)
                && !facts.trait_impls.contains_key(name)
                && !names_db_transaction(name) =>
        {
            DB_TRANSACTION_CRATES.contains(&head)
        }
        // The crate's paths, and associated types of a type or generic parameter
        // (`Self::Transaction`, `C::Transaction`): library crates are lowercase.
        Some((head, _))
            if facts.is_crate_module(package, head)
                || head.starts_with(|c: char| c.is_ascii_uppercase()) =>
        {
            own()
        }
        Some((head, _)) => DB_TRANSACTION_CRATES.contains(&head),
        None => own(),
    }
}

/// A type of the crate itself: a path through the crate's modules, or a bare name the crate
/// declares a struct for or implements as a trait.
pub(super) fn is_own_type(full: &str, name: &str, facts: &Facts, package: u32) -> bool {
    match full.split_once("::") {
        Some((head, _)) => facts.is_crate_module(package, head),
        None => facts.structs.contains_key(name) || facts.trait_impls.contains_key(name),
    }
}

/// A name that says both "transaction" and "database" (`SqlTransaction`, `DbTx`,
/// `ConnectionWithTransaction`, `PgTx`).
fn names_db_transaction(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let lower = last(&lower);
    (has(lower, "transaction") || lower.ends_with("tx"))
        && DB_NAME_WORDS.iter().any(|w| has(lower, w))
}

/// A collection type, by the words the classification of types knows them by (`Vec`,
/// `VecDeque`, `HashMap`, `DashMap`, ..; `lower` is lowercase).
fn names_collection(lower: &str) -> bool {
    MAP_TYPES.iter().any(|w| has(lower, w))
        || CONCURRENT_MAP_TYPES.iter().any(|w| has(lower, w))
        || LIST_TYPE_ENDINGS.iter().any(|w| lower.ends_with(w))
}

/// Does the crate struct `name` hold a database transaction or session in a field, directly or
/// through `depth` levels of the crate's own structs (`TransactionSession(Arc<Mutex<Inner>>)`,
/// `Inner { session: mongodb::ClientSession }`)? A pool or a collection is not one, and a
/// struct of the crate in a field is judged by its own fields (past `depth`, it is not one).
fn wraps_db_transaction(name: &str, facts: &Facts, depth: u32) -> bool {
    facts.structs.get(name).is_some_and(|fields| {
        fields.iter().any(|(_, ty)| {
            // A pool hands out connections of its own (`sqlx::PgPool`, `Pool<PgConnection>`):
            // the struct holds no open transaction in that field.
            // Nor is a collection (`Mutex<Vec<DbTransaction>>`): rows kept as data, not open
            // transactions.
            if ty.iter().any(|seg| {
                let l = last(seg);
                l.ends_with("Pool") || names_collection(&l.to_ascii_lowercase())
            }) {
                return false;
            }
            ty.iter().any(|seg| {
                let lower = seg.to_ascii_lowercase();
                // The crate's own struct (`db: PostgresClient`) is judged by its fields, not by
                // the words of its name.
                let own = seg.as_str() != "Transaction" && facts.structs.contains_key(last(seg));
                !own && DB_WRAPPER_WORDS.iter().any(|w| has(&lower, w))
                    // A bare `Transaction` is a database's unless the struct's file imports it
                    // from another library (`use bitcoin::Transaction`); a path says whose.
                    || lower == "transaction" && !facts.foreign_transaction_field(name)
                    || lower.ends_with("::transaction")
                        && seg.split("::").next().is_some_and(|h| {
                            DB_TRANSACTION_CRATES.contains(&h) || facts.is_any_crate_module(h)
                        })
                    || !own && names_db_transaction(seg)
                    || depth > 0
                        && seg.as_str() != name
                        && facts.structs.contains_key(last(seg))
                        && wraps_db_transaction(last(seg), facts, depth - 1)
            })
        })
    })
}

/// A parameter type that hands in a connection or an executor rather than a pool: the caller's
/// transaction may be behind it (`&mut PgConnection`, `impl PgExecutor<'_>`,
/// `&impl ConnectionTrait`, `&mut AsyncPgConnection`).
pub fn hands_in_connection(ty: &[Name]) -> bool {
    // Asked for every parameter of every body: no allocation, and the short scans of `has`.
    // The outer type decides: a pool of connections (`Pool<AsyncPgConnection>`, bb8's
    // `Pool<ConnectionManager<PgConnection>>`) hands out connections of its own.
    for t in ty {
        let t = last(t);
        let t = t.strip_prefix("impl ").unwrap_or(t);
        let t = t.strip_prefix("dyn ").unwrap_or(t);
        if super::has(t, "Pool") {
            return false;
        }
        if (super::has(t, "Executor")
            || super::has(t, "Connection")
            || super::has(t, "connection")
            || t.ends_with("Conn")
            || t.ends_with("conn"))
            && t != "DatabaseConnection"
        {
            return true;
        }
    }
    false
}

/// lettre's transports that hand a message to a mail server (`AsyncSmtpTransport<Tokio1Executor>`,
/// `SmtpTransport`, the sendmail ones), by the crate's path or the type's name. The file and
/// stub transports deliver nothing anywhere.
pub(crate) fn is_mail_transport(full: &str, name: &str) -> bool {
    matches!(
        name,
        "AsyncSmtpTransport" | "SmtpTransport" | "AsyncSendmailTransport" | "SendmailTransport"
    ) || has(&full.to_ascii_lowercase(), "lettre::transport::smtp")
}

#[cfg(test)]
mod tests {
    use super::hands_in_connection;
    use crate::name::Name;

    #[test]
    fn connections_and_executors_are_handed_in_pools_are_not() {
        let ty = |names: &[&str]| names.iter().map(|n| Name::from(*n)).collect::<Vec<_>>();
        for t in [
            &["PgConnection"][..],
            &["impl PgExecutor"],
            &["sqlx::SqliteConnection"],
            &["AsyncPgConnection"],
            &["DbConn"],
            &["impl ConnectionTrait"],
        ] {
            assert!(hands_in_connection(&ty(t)), "{t:?}");
        }
        for t in [
            &["PgPool"][..],
            &["PooledConnection", "Pool"],
            &["Pool", "AsyncPgConnection"],
            &["Arc", "Pool", "ConnectionManager", "PgConnection"],
            &["DatabaseConnection"],
            &["Client"],
        ] {
            assert!(!hands_in_connection(&ty(t)), "{t:?}");
        }
    }
}
