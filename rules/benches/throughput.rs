//! Throughput benchmark: the full analysis (read + lower + check) as a ratio of the floor
//! (read + `syn::parse_file` only) on the same files in the same run, on 1 and 2 threads.
//!
//! `STALEGUARD_BENCH_DIRS=/work/bench-src/tokio:/work/bench-src/axum cargo bench -p staleguard-rules`
//! (each directory is checked as one crate). Run it under `/usr/bin/time -v` for the peak RSS.

use staleguard_rules::{Analyzer, Knowledge, LoweredFile, STACK_SIZE};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == ".git") {
                continue;
            }
            walk(&p, out);
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

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

fn floor(sets: &[Arc<Vec<PathBuf>>], threads: usize) -> Duration {
    let t = Instant::now();
    for files in sets {
        parallel(files, threads, floor_one);
    }
    t.elapsed()
}

/// Full analysis: total time, time spent in `check`, findings.
fn full(sets: &[Arc<Vec<PathBuf>>], threads: usize) -> (Duration, Duration, usize) {
    let t = Instant::now();
    let analyzer = Analyzer::new(Knowledge::default()).with_threads(threads);
    let mut findings = 0;
    let mut checking = Duration::ZERO;
    for files in sets {
        let lowered = parallel(files, threads, lower_one);
        let c = Instant::now();
        findings += analyzer.check(&lowered, &|_| true).len();
        checking += c.elapsed();
    }
    (t.elapsed(), checking, findings)
}

#[allow(clippy::print_stdout)]
fn main() {
    let dirs = std::env::var("STALEGUARD_BENCH_DIRS").unwrap_or_default();
    let mut sets = Vec::new();
    let (mut nfiles, mut nlines, mut nbytes) = (0usize, 0usize, 0usize);
    for d in dirs.split(':').filter(|d| !d.is_empty()) {
        let mut files = Vec::new();
        walk(Path::new(d), &mut files);
        files.sort();
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
    floor(&sets, 2);
    let mut rows = Vec::new();
    for threads in [1, 2] {
        let mut best_floor = Duration::MAX;
        let mut best_full = Duration::MAX;
        let mut findings = 0;
        let mut check_part = Duration::ZERO;
        let (mut cpu_floor, mut cpu_full) = (f64::MAX, f64::MAX);
        for _ in 0..rounds {
            // Interleave so both see the same machine load.
            let c0 = cpu_seconds();
            best_floor = best_floor.min(floor(&sets, threads));
            let c1 = cpu_seconds();
            let (t, c, n) = full(&sets, threads);
            let c2 = cpu_seconds();
            cpu_floor = cpu_floor.min(c1 - c0);
            cpu_full = cpu_full.min(c2 - c1);
            if t < best_full {
                best_full = t;
                check_part = c;
            }
            findings = n;
        }
        rows.push((
            threads,
            best_floor.as_secs_f64(),
            best_full.as_secs_f64(),
            check_part.as_secs_f64(),
            cpu_floor,
            cpu_full,
            findings,
        ));
    }
    // One table: wall-clock and process CPU time, best of the rounds. On a shared machine the
    // CPU ratio is the steadier figure (other processes' load is not in it).
    println!();
    println!(
        "| threads | floor wall | full wall | check wall | wall ratio | floor CPU | full CPU | CPU ratio | findings |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (threads, floor, full, check, cpu_floor, cpu_full, findings) in rows {
        let cpu_ratio = if cpu_floor > 0.0 {
            format!("{:.3}", cpu_full / cpu_floor)
        } else {
            "n/a".to_string()
        };
        println!(
            "| {threads} | {floor:.2}s | {full:.2}s | {check:.2}s | {:.3} | {cpu_floor:.2}s | {cpu_full:.2}s | {cpu_ratio} | {findings} |",
            full / floor
        );
    }
    println!("({rounds} rounds; run under `/usr/bin/time -v` for the peak RSS)");
}
