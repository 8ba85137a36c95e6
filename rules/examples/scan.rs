//! Dev tool: walks a directory, lowers and checks every `.rs` file on N threads (each file is
//! its own crate, so summaries stay per file), catches panics, and prints files / seconds /
//! panics / parse errors / findings per rule.
//!
//! `cargo run --release -p staleguard-rules --example scan -- ~/.cargo/registry/src [THREADS]`

#[path = "support/walk.rs"]
mod walk;

use staleguard_rules::{Analyzer, Knowledge, STACK_SIZE};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Default)]
struct Totals {
    files: usize,
    bytes: usize,
    not_utf8: usize,
    parse_errors: usize,
    panics: Vec<String>,
    findings: BTreeMap<&'static str, usize>,
    examples: Vec<String>,
}

#[allow(clippy::print_stdout)]
fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().unwrap_or_else(|| ".".to_string()));
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    // A registry cache: crates have source folders named `target`, so nothing is skipped.
    let files = Arc::new(walk::rust_files(&root, false));
    let next = Arc::new(AtomicUsize::new(0));
    let totals = Arc::new(Mutex::new(Totals::default()));
    let analyzer = Arc::new(Analyzer::new(Knowledge::default()));
    std::panic::set_hook(Box::new(|_| {}));
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (files, next, totals, analyzer) = (
                files.clone(),
                next.clone(),
                totals.clone(),
                analyzer.clone(),
            );
            std::thread::Builder::new()
                .stack_size(STACK_SIZE)
                .spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(path) = files.get(i) else { break };
                        let Ok(bytes) = std::fs::read(path) else {
                            continue;
                        };
                        let name = path.display().to_string();
                        let Ok(text) = String::from_utf8(bytes) else {
                            totals.lock().expect("lock").not_utf8 += 1;
                            continue;
                        };
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            let lowered = analyzer.lower(&name, &text);
                            let parse_error = lowered.has_parse_error();
                            let diags = analyzer.check(std::slice::from_ref(&lowered), &|_| true);
                            (parse_error, diags)
                        }));
                        let mut t = totals.lock().expect("lock");
                        t.files += 1;
                        t.bytes += text.len();
                        match result {
                            Ok((parse_error, diags)) => {
                                t.parse_errors += usize::from(parse_error);
                                for d in diags {
                                    if d.rule == "parse-error" {
                                        continue;
                                    }
                                    *t.findings.entry(d.rule).or_default() += 1;
                                    if t.examples.len() < 400 {
                                        t.examples.push(format!(
                                            "{}:{}: [{}] {}",
                                            d.primary.file, d.primary.start.line, d.rule, d.message
                                        ));
                                    }
                                }
                            }
                            Err(_) => t.panics.push(name),
                        }
                    }
                })
                .expect("spawn worker")
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    let secs = start.elapsed().as_secs_f64();
    let t = totals.lock().expect("lock");
    if std::env::var_os("SCAN_SHOW").is_some() {
        for e in &t.examples {
            println!("{e}");
        }
    }
    println!("files: {}", t.files);
    println!("bytes: {}", t.bytes);
    println!("seconds: {secs:.2} ({threads} threads)");
    println!("panics: {}", t.panics.len());
    for p in &t.panics {
        println!("  panic: {p}");
    }
    println!("parse errors: {}", t.parse_errors);
    println!("not utf-8: {}", t.not_utf8);
    for (rule, n) in &t.findings {
        println!("findings {rule}: {n}");
    }
}
