//! `#[fenced]` on a free function with lifetimes, type parameters and a `where` clause.

use std::fmt::Debug;
use std::time::Duration;

use staleguard::fence::FencedCell;
use staleguard::lease::{LeaseStore, MemoryLeaseStore};

#[staleguard::fenced(
    lease = store, resource = key, ttl = Duration::from_secs(5),
    state = mut current, reread = cell.get(),
    verify = current.len() < limit,
    stale = Ok(None),
    token = token,
)]
async fn push<'a, S, T>(
    store: &'a S,
    key: &'a str,
    cell: &'a FencedCell<Vec<T>>,
    item: T,
    limit: usize,
) -> Result<Option<usize>, staleguard::Error>
where
    S: LeaseStore,
    T: Clone + Debug + Send + Sync,
{
    current.push(item);
    let len = current.len();
    cell.write(token, current)?;
    Ok(Some(len))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let store = MemoryLeaseStore::new();
    let cell = FencedCell::new("list", Vec::new());
    assert_eq!(push(&store, "list", &cell, 'a', 1).await.unwrap(), Some(1));
    assert_eq!(push(&store, "list", &cell, 'b', 1).await.unwrap(), None);
}
