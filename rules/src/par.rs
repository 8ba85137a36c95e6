//! `par_map`: the one helper that spreads per-body (and per-file) work of checking over scoped
//! threads.

/// Maps `f` over `items` on up to `threads` scoped threads and returns the results in `items`
/// order. Used for each per-body stage of checking (classification, call-site effects, rules):
/// bodies are independent within a stage. Item `i` goes to thread `i % threads`, which spreads
/// big and small files evenly.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let one = &f;
    let ids = items;
    let threads = threads.clamp(1, 64).min(ids.len() / 64 + 1);
    if threads == 1 {
        return ids.iter().map(one).collect();
    }
    let parts: Vec<Vec<R>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                std::thread::Builder::new()
                    .stack_size(crate::STACK_SIZE)
                    .spawn_scoped(scope, move || {
                        ids.iter().skip(t).step_by(threads).map(one).collect()
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                // No thread: this share is redone below.
                Err(_) => Vec::new(),
            })
            .collect()
    });
    // A share whose thread could not start is empty; redo everything on this thread then.
    if parts.iter().map(Vec::len).sum::<usize>() != ids.len() {
        return ids.iter().map(one).collect();
    }
    let mut parts: Vec<_> = parts.into_iter().map(Vec::into_iter).collect();
    (0..ids.len())
        .map(|i| {
            parts[i % threads]
                .next()
                .expect("each share has its bodies")
        })
        .collect()
}
