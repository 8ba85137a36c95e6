//! `par_map`: the one helper that spreads per-body (and per-file) work of checking over the
//! threads of a rayon pool.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// Items per unit of work. Bodies are numbered file by file, so a run of neighbours mostly
/// shares a file (and that file's type memo entries, see [`par_map_with`]); runs are small
/// enough that the threads finish together.
const RUN: usize = 32;

/// Maps `f` over `items` on up to `threads` threads of the rayon pool the caller runs in (else of
/// rayon's global pool, the caller waiting) and returns the results in `items` order. Used for
/// each per-body stage of checking (classification, call-site effects, rules): bodies are
/// independent within a stage.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    par_map_with(items, threads, || (), |_, x| f(x))
}

/// [`par_map`] where each thread also owns a scratch state made by `init` (a memo, say), passed
/// to every call on that thread and dropped when the thread is done.
///
/// Threads take runs of [`RUN`] neighbouring items from a shared counter until none are left,
/// so a slow run does not hold the others up, and neighbours (which share a file) mostly meet
/// the same thread's state. A caller inside the pool works too. A caller outside it waits
/// instead: when it worked beside a pool thread, three threads were awake on two cores (the idle
/// pool thread spins before it sleeps), and on qdrant the caller classified 9,108 bodies while
/// its helper did 5,216 in the same 46 ms; two pool threads split them evenly. Helpers come from
/// the pool rather than new threads: a new thread gets a fresh malloc arena, while a pool thread
/// reuses the memory its lowering freed (peak memory).
pub fn par_map_with<T: Sync, S, R: Send>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, 64).min(items.len() / (2 * RUN) + 1);
    if threads == 1 {
        let mut state = init();
        return items.iter().map(|x| f(&mut state, x)).collect();
    }
    let next = AtomicUsize::new(0);
    // Each run's results go straight to their place in the output, so no second copy of all
    // results is ever alive (the classified effects of a large crate are megabytes).
    let out: Mutex<Vec<Option<R>>> =
        Mutex::new(std::iter::repeat_with(|| None).take(items.len()).collect());
    let work = || {
        let mut state = init();
        loop {
            let run = next.fetch_add(1, Ordering::Relaxed);
            let lo = run.saturating_mul(RUN);
            if lo >= items.len() {
                return;
            }
            let hi = (lo + RUN).min(items.len());
            let results: Vec<R> = items[lo..hi].iter().map(|x| f(&mut state, x)).collect();
            let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
            for (slot, r) in out[lo..hi].iter_mut().zip(results) {
                *slot = Some(r);
            }
        }
    };
    rayon::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| work());
        }
        work();
    });
    out.into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .into_iter()
        .map(|r| r.expect("every run was done"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_item_order_on_any_thread_count() {
        let items: Vec<usize> = (0..1000).collect();
        for threads in [1, 2, 3, 8] {
            let out = par_map(&items, threads, |x| x * 2);
            assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        }
        assert!(par_map(&[] as &[u8], 4, |x| *x).is_empty());
    }

    #[test]
    fn each_thread_keeps_its_own_state() {
        // The state counts the calls made on its thread; a call that sees 1 is the first on a
        // fresh state. One state per thread that worked: one or two, never one per run.
        let items: Vec<u32> = (0..500).collect();
        let seen = par_map_with(
            &items,
            2,
            || 0usize,
            |n, _| {
                *n += 1;
                *n
            },
        );
        assert_eq!(seen.len(), 500);
        let firsts = seen.iter().filter(|&&n| n == 1).count();
        assert!((1..=2).contains(&firsts), "{firsts} states started");
    }
}
