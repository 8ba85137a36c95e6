//! Whether the request being served was answered by a replay: a task-local flag the macro's
//! replay path sets and an HTTP layer (the axum `mark_replays` middleware) reads, so that
//! the handler's response type does not change.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static REPLAYED: Cell<bool>;
}

/// Marks the current request as replayed; does nothing outside [`watch`].
pub(crate) fn note() {
    let _ = REPLAYED.try_with(|flag| flag.set(true));
}

/// Runs `serve` and tells whether an idempotent handler in it answered with a replay.
#[cfg_attr(not(feature = "axum"), allow(dead_code))]
pub(crate) async fn watch<T>(serve: impl Future<Output = T>) -> (bool, T) {
    REPLAYED
        .scope(Cell::new(false), async {
            let out = serve.await;
            (REPLAYED.with(Cell::get), out)
        })
        .await
}
