//! Throughput benchmark: the full analysis (read + lower + check) as a ratio of the floor
//! (read + `syn::parse_file` only) on the same files in the same run, on 1 and 2 threads.
//!
//! `STALEGUARD_BENCH_DIRS=/work/bench-src/tokio:/work/bench-src/axum cargo bench -p staleguard-rules`
//! (each directory is checked as one crate). Run it under `/usr/bin/time -v` for the peak RSS.

#[path = "../examples/support/walk.rs"]
mod walk;

use staleguard_rules::{Analyzer, Knowledge, LoweredFile, STACK_SIZE};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Runs `work(path)` for every file on `threads` workers with the documented stack.
fn parallel<T: Send + 'static>(
    files: &Arc<Vec<PathBuf>>,
    threads: usize,
    work: fn(&Analyzer, &Path) -> Option<T>,
) -> Vec<T> {
    let next = Arc::new(AtomicUsize::new(0));
    let out = Arc::new(Mutex::new(Vec::with_capacity(files.len())));
    let analyzer = Arc::new(Analyzer::new(Knowledge::default()));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (files, next, out, analyzer) =
                (files.clone(), next.clone(), out.clone(), analyzer.clone());
            std::thread::Builder::new()
                .stack_size(STACK_SIZE)
                .spawn(move || {
                    let mut local = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(p) = files.get(i) else { break };
                        if let Some(x) = work(&analyzer, p) {
                            local.push(x);
                        }
                    }
                    out.lock().expect("lock").extend(local);
                })
                .expect("spawn")
        })
        .collect();
    for h in handles {
        h.join().expect("worker");
    }
    Arc::try_unwrap(out)
        .ok()
        .expect("sole owner")
        .into_inner()
        .expect("lock")
}

fn floor_one(_: &Analyzer, p: &Path) -> Option<()> {
    let text = std::fs::read_to_string(p).ok()?;
    let parsed = syn::parse_file(&text);
    drop(parsed);
    // Same span hygiene as the analyzer, so the floor is not slowed by a growing source map.
    proc_macro2::extra::invalidate_current_thread_spans();
    Some(())
}

fn lower_one(a: &Analyzer, p: &Path) -> Option<LoweredFile> {
    let text = std::fs::read_to_string(p).ok()?;
    Some(a.lower(&p.display().to_string(), &text))
}

/// Process CPU time (user + system) from `/proc/self/stat`, in seconds; 0 where unavailable.
/// Wall-clock figures on a shared machine include other processes' load; CPU time does not.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let Some(rest) = stat.rsplit(')').next() else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of the whole line are the 12th and 13th after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Read + parse one set: wall time and process CPU time.
fn floor(files: &Arc<Vec<PathBuf>>, threads: usize) -> (f64, f64) {
    let (t, c) = (Instant::now(), cpu_seconds());
    parallel(files, threads, floor_one);
    (t.elapsed().as_secs_f64(), cpu_seconds() - c)
}

/// Full analysis of one set (read + lower + check, and freeing the results): wall time, process
/// CPU time, time spent in `check`, findings.
fn full(files: &Arc<Vec<PathBuf>>, threads: usize) -> (f64, f64, f64, usize) {
    let (t, c) = (Instant::now(), cpu_seconds());
    let analyzer = Analyzer::new(Knowledge::default()).with_threads(threads);
    let lowered = parallel(files, threads, lower_one);
    let k = Instant::now();
    let findings = analyzer.check(&lowered, &|_| true).len();
    let checking = k.elapsed().as_secs_f64();
    // The driver frees the results on its threads, as the CLI does on its pool.
    free(lowered, threads);
    (
        t.elapsed().as_secs_f64(),
        cpu_seconds() - c,
        checking,
        findings,
    )
}

/// Drops `items` on `threads` threads.
fn free<T: Send>(mut items: Vec<T>, threads: usize) {
    let share = items.len().div_ceil(threads.max(1)).max(1);
    let mut parts = Vec::new();
    while items.len() > share {
        parts.push(items.split_off(items.len() - share));
    }
    parts.push(items);
    std::thread::scope(|s| {
        for part in parts {
            s.spawn(move || drop(part));
        }
    });
}

/// One round's totals over every set.
#[derive(Default, Clone, Copy)]
struct Round {
    floor: f64,
    full: f64,
    check: f64,
    cpu_floor: f64,
    cpu_full: f64,
    findings: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[allow(clippy::print_stdout)]
fn main() {
    let dirs = std::env::var("STALEGUARD_BENCH_DIRS").unwrap_or_default();
    let mut sets = Vec::new();
    let (mut nfiles, mut nlines, mut nbytes) = (0usize, 0usize, 0usize);
    for d in dirs.split(':').filter(|d| !d.is_empty()) {
        let files = walk::rust_files(Path::new(d), true);
        for f in &files {
            if let Ok(t) = std::fs::read_to_string(f) {
                nlines += t.lines().count();
                nbytes += t.len();
            }
        }
        nfiles += files.len();
        sets.push(Arc::new(files));
    }
    if sets.is_empty() {
        println!("set STALEGUARD_BENCH_DIRS to colon-separated source directories");
        return;
    }
    println!(
        "{nfiles} files, {nlines} lines, {:.1} MB",
        nbytes as f64 / 1e6
    );
    let rounds: usize = std::env::var("STALEGUARD_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    // Warm the page cache.
    for files in &sets {
        floor(files, 2);
    }
    // The machine's speed drifts (shared host): each set's floor and full runs are paired and
    // their order alternates between rounds, and each round's ratio compares the two sums, so
    // drift slower than a set cancels out. Reported: the median of the rounds' ratios, and the
    // best (smallest) totals.
    let mut rows = Vec::new();
    for threads in [1, 2] {
        let mut rounds_out = Vec::new();
        for r in 0..rounds {
            let mut round = Round::default();
            for files in &sets {
                let (f, u) = if r % 2 == 0 {
                    let f = floor(files, threads);
                    (f, full(files, threads))
                } else {
                    let u = full(files, threads);
                    (floor(files, threads), u)
                };
                round.floor += f.0;
                round.cpu_floor += f.1;
                round.full += u.0;
                round.cpu_full += u.1;
                round.check += u.2;
                round.findings += u.3;
            }
            rounds_out.push(round);
        }
        rows.push((threads, rounds_out));
    }
    println!();
    println!(
        "| threads | floor wall | full wall | check wall | wall ratio | floor CPU | full CPU | CPU ratio | findings |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (threads, rs) in rows {
        let best = |f: fn(&Round) -> f64| rs.iter().map(f).fold(f64::MAX, f64::min);
        let wall_ratio = median(rs.iter().map(|r| r.full / r.floor).collect());
        let cpu_ratio = if rs.iter().all(|r| r.cpu_floor > 0.0) {
            format!(
                "{:.3}",
                median(rs.iter().map(|r| r.cpu_full / r.cpu_floor).collect())
            )
        } else {
            "n/a".to_string()
        };
        println!(
            "| {threads} | {:.2}s | {:.2}s | {:.2}s | {wall_ratio:.3} | {:.2}s | {:.2}s | {cpu_ratio} | {} |",
            best(|r| r.floor),
            best(|r| r.full),
            best(|r| r.check),
            best(|r| r.cpu_floor),
            best(|r| r.cpu_full),
            rs[0].findings
        );
    }
    println!(
        "({rounds} rounds; ratios: median over rounds of full / floor, each set's runs paired; times: best round; run under `/usr/bin/time -v` for the peak RSS)"
    );
}
