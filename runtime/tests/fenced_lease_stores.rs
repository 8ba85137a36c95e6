//! The `LeaseStore` contract and the fenced-write check, against every store: memory, SQLite
//! and PostgreSQL (when configured). Expiry is covered by the paused-worker tests.

mod fenced_support;

use std::time::Duration;

use fenced_support::sqlite_pool;
use staleguard::FencingToken;
use staleguard::fence::{FenceCheck, FenceError};
use staleguard::lease::{LeaseError, LeaseStore, MemoryLeaseStore, SqliteLeaseStore};

const TTL: Duration = Duration::from_secs(30);

async fn lease_contract(store: &impl LeaseStore) {
    let a = store.acquire("res:1", "a", TTL).await.unwrap();
    assert_eq!((a.resource(), a.owner()), ("res:1", "a"));

    // Held by A: B cannot take it; another resource is independent.
    assert!(matches!(
        store.acquire("res:1", "b", TTL).await,
        Err(LeaseError::Held(held)) if held.resource == "res:1"
    ));
    let other = store.acquire("res:2", "b", TTL).await.unwrap();
    assert_eq!(other.token().get(), 1, "tokens are counted per resource");

    // The same owner acquiring again gets a newer token: its older incarnation is fenced.
    let a2 = store.acquire("res:1", "a", TTL).await.unwrap();
    assert!(a2.token() > a.token());
    assert!(matches!(
        store.renew(&a, TTL).await,
        Err(LeaseError::Lost(lost)) if lost.token == a.token()
    ));

    // Renew keeps the token and does not shorten the lease.
    let renewed = store.renew(&a2, TTL).await.unwrap();
    assert_eq!(renewed.token(), a2.token());
    assert!(renewed.expires_at_ms() >= a2.expires_at_ms());

    // Release frees it; the next holder still gets a larger token; the old lease is lost.
    store.release(&renewed).await.unwrap();
    let b = store.acquire("res:1", "b", TTL).await.unwrap();
    assert!(b.token() > a2.token());
    assert!(matches!(store.release(&a2).await, Err(LeaseError::Lost(_))));
    assert!(matches!(
        store.renew(&a2, TTL).await,
        Err(LeaseError::Lost(_))
    ));
    store.release(&b).await.unwrap();
    store.release(&other).await.unwrap();
}

/// The fence check in a connection: a new resource is accepted, the same or a larger token is
/// accepted, a smaller one is `Fenced` (with the current token) and changes nothing, and a
/// rolled-back acceptance is undone.
macro_rules! fence_contract {
    ($pool:expr) => {{
        let pool = $pool;
        let t = FencingToken::new;

        let mut tx = pool.begin().await.unwrap();
        tx.check_fence("res:f", t(5)).await.unwrap();
        tx.check_fence("res:f", t(5)).await.unwrap();
        tx.commit().await.unwrap();

        let mut tx = pool.begin().await.unwrap();
        match tx.check_fence("res:f", t(4)).await {
            Err(FenceError::Fenced(fenced)) => {
                assert_eq!(fenced.resource, "res:f");
                assert_eq!((fenced.token, fenced.current), (t(4), Some(t(5))));
            }
            other => panic!("a smaller token was not fenced: {other:?}"),
        }
        drop(tx);

        let mut tx = pool.begin().await.unwrap();
        tx.check_fence("res:f", t(9)).await.unwrap();
        drop(tx); // rolled back: 9 was never accepted

        let mut tx = pool.begin().await.unwrap();
        tx.check_fence("res:f", t(6)).await.unwrap();
        tx.commit().await.unwrap();

        let mut tx = pool.begin().await.unwrap();
        assert!(matches!(
            tx.check_fence("res:f", t(5)).await,
            Err(FenceError::Fenced(f)) if f.current == Some(t(6))
        ));
        // Another resource has its own fence.
        tx.check_fence("res:g", t(1)).await.unwrap();
    }};
}

#[tokio::test(start_paused = true)]
async fn memory_store_keeps_the_lease_contract() {
    lease_contract(&MemoryLeaseStore::new()).await;
}

#[tokio::test]
async fn sqlite_store_keeps_the_lease_contract() {
    let store = SqliteLeaseStore::new(sqlite_pool().await);
    store.migrate().await.unwrap();
    store.migrate().await.unwrap(); // idempotent
    lease_contract(&store).await;
}

#[tokio::test]
async fn sqlite_fence_check_rejects_smaller_tokens() {
    let store = SqliteLeaseStore::new(sqlite_pool().await);
    store.migrate().await.unwrap();
    fence_contract!(store.pool());
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_store_keeps_the_lease_contract_and_fences() {
    let Some(pg) =
        fenced_support::pg::PgDb::connect("postgres_store_keeps_the_lease_contract_and_fences")
            .await
    else {
        return;
    };
    let store = staleguard::lease::PgLeaseStore::new(pg.pool.clone());
    store.migrate().await.unwrap();
    store.migrate().await.unwrap(); // idempotent
    lease_contract(&store).await;
    fence_contract!(store.pool());
    pg.finish().await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_keeps_the_lease_contract_and_fences() {
    use staleguard::lease::RedisLeaseStore;
    let Some(url) = fenced_support::redis_url("redis_store_keeps_the_lease_contract_and_fences")
    else {
        return;
    };
    let prefix = fenced_support::unique_name("sg_lease");
    let store = RedisLeaseStore::connect(&url, &prefix).await.unwrap();
    lease_contract(&store).await;

    // A value written with a token is refused as soon as a newer holder has acquired, before
    // that holder writes anything.
    let short = Duration::from_millis(50);
    let target = format!("{prefix}:value");
    let old = store.acquire("res:v", "old", short).await.unwrap();
    store
        .fenced_set("res:v", old.token(), &target, "from old")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let new = store.acquire("res:v", "new", TTL).await.unwrap();
    match store
        .fenced_set("res:v", old.token(), &target, "late")
        .await
    {
        Err(FenceError::Fenced(f)) => assert_eq!(f.current, Some(new.token())),
        other => panic!("the expired holder was not fenced: {other:?}"),
    }
    store
        .fenced_set("res:v", new.token(), &target, "from new")
        .await
        .unwrap();
    fenced_support::drop_redis_prefix(&url, &prefix).await;
}

/// Workers race for one resource for a while, never releasing (each lease ends at its ttl), on
/// one or several handles to the store (pools). By the store's clock, every grant's interval
/// `[expiry - ttl, expiry)` ends before the next grant starts: no two holders overlap; and the
/// tokens grow with the grants.
async fn holders_never_overlap<S: LeaseStore + Clone + Send + Sync + 'static>(stores: &[S]) {
    const RACE_TTL: Duration = Duration::from_millis(40);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(700);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..6 {
        let store = stores[worker % stores.len()].clone();
        tasks.spawn(async move {
            let mut grants = Vec::new();
            let mut n = 0;
            while tokio::time::Instant::now() < deadline {
                n += 1;
                match store
                    .acquire("res:overlap", &format!("w{worker}-{n}"), RACE_TTL)
                    .await
                {
                    Ok(lease) => {
                        let end = lease.expires_at_ms();
                        grants.push((lease.token().get(), end - RACE_TTL.as_millis() as i64, end));
                    }
                    Err(LeaseError::Held(_)) => {}
                    Err(other) => panic!("{other}"),
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            grants
        });
    }
    let mut grants = Vec::new();
    while let Some(done) = tasks.join_next().await {
        grants.extend(done.unwrap());
    }
    grants.sort_unstable();
    assert!(grants.len() >= 5, "too few grants to race: {grants:?}");
    for pair in grants.windows(2) {
        let ((t1, _, end1), (t2, start2, _)) = (pair[0], pair[1]);
        assert!(t2 > t1, "a token was granted twice: {grants:?}");
        assert!(
            start2 >= end1,
            "token {t2} was granted at {start2}, while token {t1} held the lease until {end1}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_holders_never_overlap() {
    holders_never_overlap(&[MemoryLeaseStore::new()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_holders_on_two_pools_never_overlap() {
    let first = SqliteLeaseStore::new(sqlite_pool().await);
    first.migrate().await.unwrap();
    let options = (*first.pool().connect_options()).clone();
    let second = SqliteLeaseStore::new(sqlx::SqlitePool::connect_with(options).await.unwrap());
    holders_never_overlap(&[first, second]).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holders_never_overlap() {
    let Some(pg) = fenced_support::pg::PgDb::connect("postgres_holders_never_overlap").await else {
        return;
    };
    let store = staleguard::lease::PgLeaseStore::new(pg.pool.clone());
    store.migrate().await.unwrap();
    holders_never_overlap(&[store]).await;
    pg.finish().await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holders_never_overlap() {
    let Some(url) = fenced_support::redis_url("redis_holders_never_overlap") else {
        return;
    };
    let prefix = fenced_support::unique_name("sg_lease");
    let first = staleguard::lease::RedisLeaseStore::connect(&url, &prefix)
        .await
        .unwrap();
    let second = staleguard::lease::RedisLeaseStore::connect(&url, &prefix)
        .await
        .unwrap();
    holders_never_overlap(&[first, second]).await;
    fenced_support::drop_redis_prefix(&url, &prefix).await;
}

/// Many owners racing for one resource: at most one holds it at a time, and each grant's
/// token is new.
async fn racing_owners_never_share_a_token(store: &(impl LeaseStore + Clone + 'static)) {
    let mut tasks = Vec::new();
    for owner in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut granted = Vec::new();
            for _ in 0..10 {
                if let Ok(lease) = store.acquire("res:race", &format!("o{owner}"), TTL).await {
                    granted.push(lease.token().get());
                    store.release(&lease).await.unwrap();
                }
                tokio::task::yield_now().await;
            }
            granted
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count, "a token was granted twice");
    assert!(count > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_racing_owners_get_distinct_tokens() {
    racing_owners_never_share_a_token(&MemoryLeaseStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_racing_owners_get_distinct_tokens() {
    let store = SqliteLeaseStore::new(sqlite_pool().await);
    store.migrate().await.unwrap();
    racing_owners_never_share_a_token(&store).await;
}
