//! Dev tool for profiling (`valgrind --tool=callgrind`, `perf`): lowers every `.rs` file under
//! the given directories on one thread, checks each directory as one crate, and prints the time
//! of each phase and the peak resident set.
//!
//! `cargo run --release -p staleguard-rules --example profile -- [--floor] DIR [DIR..]`
//!
//! With `--floor` it only reads and parses (`syn::parse_file`, with the same span hygiene as the
//! analyzer), so `valgrind --tool=callgrind` on both runs gives the instruction ratio of the full
//! analysis to the parse floor: a figure that machine load does not move.
//!
//! With `--check N` it lowers once and checks each directory `N` times on one thread, then on
//! two, and prints the fastest check of each: the check's own cost, with the lowering's noise
//! left out.

#[path = "support/walk.rs"]
mod walk;

use staleguard_rules::{Analyzer, Knowledge, STACK_SIZE};
use std::path::Path;
use std::time::{Duration, Instant};

#[allow(clippy::print_stdout)]
fn run(dirs: Vec<String>) {
    if dirs.first().is_some_and(|d| d == "--floor") {
        let t = Instant::now();
        for d in &dirs[1..] {
            for p in walk::rust_files(Path::new(d), true) {
                let Ok(text) = std::fs::read_to_string(&p) else {
                    continue;
                };
                drop(syn::parse_file(&text));
                proc_macro2::extra::invalidate_current_thread_spans();
            }
        }
        println!("read+parse {:.2}s", t.elapsed().as_secs_f64());
        return;
    }
    if dirs.first().is_some_and(|d| d == "--check") {
        let rounds: usize = dirs.get(1).and_then(|n| n.parse().ok()).unwrap_or(5);
        let analyzer = Analyzer::new(Knowledge::default());
        let sets: Vec<Vec<_>> = dirs[2..]
            .iter()
            .map(|d| {
                walk::rust_files(Path::new(d), true)
                    .iter()
                    .filter_map(|p| {
                        let text = std::fs::read_to_string(p).ok()?;
                        Some(analyzer.lower(&p.display().to_string(), &text))
                    })
                    .collect()
            })
            .collect();
        for threads in [1, 2] {
            let analyzer = Analyzer::new(Knowledge::default()).with_threads(threads);
            let best = (0..rounds.max(1))
                .map(|_| {
                    let t = Instant::now();
                    for set in &sets {
                        drop(analyzer.check(set, &|_| true));
                    }
                    t.elapsed()
                })
                .min()
                .unwrap_or_default();
            println!(
                "check on {threads} thread(s): best of {rounds} {:.1}ms",
                best.as_secs_f64() * 1e3
            );
        }
        return;
    }
    let analyzer = Analyzer::new(Knowledge::default());
    let (mut lowering, mut checking) = (Duration::ZERO, Duration::ZERO);
    let mut findings = 0;
    for d in dirs {
        let files = walk::rust_files(Path::new(&d), true);
        let t = Instant::now();
        let lowered: Vec<_> = files
            .iter()
            .filter_map(|p| {
                let text = std::fs::read_to_string(p).ok()?;
                Some(analyzer.lower(&p.display().to_string(), &text))
            })
            .collect();
        lowering += t.elapsed();
        let t = Instant::now();
        findings += analyzer.check(&lowered, &|_| true).len();
        checking += t.elapsed();
    }
    println!(
        "read+lower {:.2}s, check {:.2}s, {findings} findings",
        lowering.as_secs_f64(),
        checking.as_secs_f64()
    );
}

/// The process's peak resident set (`VmHWM`), as printed in `/proc/self/status`.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| "n/a".to_string())
}

#[allow(clippy::print_stdout)]
fn main() {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    std::thread::Builder::new()
        .stack_size(STACK_SIZE)
        .spawn(move || run(dirs))
        .expect("spawn")
        .join()
        .expect("worker");
    println!("peak RSS {}", peak_rss());
}
