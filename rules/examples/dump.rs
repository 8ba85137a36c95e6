//! Dev tool: prints the lowered effect traces of the given files and the findings of every rule;
//! with `--effects DIR`, what classification and the summaries made of every body of the crate
//! under DIR (each event's effects, own then gained from callees, its callees, the summary).
//!
//! `cargo run -p staleguard-rules --example dump -- src/pay.rs` (`DUMP_FN=charge` keeps the
//! bodies whose name contains `charge`), `cargo run -p staleguard-rules --example dump --
//! --effects fixtures/check-before-lock`.

#[path = "support/walk.rs"]
mod walk;

use staleguard_rules::{Analyzer, Knowledge, LoweredFile, STACK_SIZE};

#[allow(clippy::print_stdout)]
fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let effects = args.first().is_some_and(|a| a == "--effects");
    if effects {
        args.remove(0);
    }
    let paths: Vec<String> = if effects {
        let dir = args.first().expect("--effects DIR");
        walk::rust_files(std::path::Path::new(dir), true)
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    } else {
        args
    };
    let analyzer = Analyzer::new(Knowledge::default());
    let files: Vec<LoweredFile> = std::thread::Builder::new()
        .stack_size(STACK_SIZE)
        .spawn(move || {
            let analyzer = Analyzer::new(Knowledge::default());
            paths
                .iter()
                .filter_map(|p| {
                    let text = std::fs::read_to_string(p).ok()?;
                    Some(analyzer.lower(p, &text))
                })
                .collect()
        })
        .expect("spawn")
        .join()
        .expect("lowering does not panic");
    if effects {
        print!("{}", analyzer.dump_effects(&files));
        return;
    }
    let filter = std::env::var("DUMP_FN").unwrap_or_default();
    for f in &files {
        for b in &f.ir().bodies {
            if !filter.is_empty() && !b.name().to_string().contains(&filter) {
                continue;
            }
            println!("fn {} ({}:{})", b.name(), f.path, b.sp.line);
            for (i, e) in b.events.iter().enumerate() {
                println!("  {i:3} L{:<4} {:?}", e.sp.line, e.kind);
            }
        }
    }
    for d in analyzer.check(&files, &|_| true) {
        println!(
            "{}:{}: {} [{}]",
            d.primary.file, d.primary.start.line, d.message, d.rule
        );
    }
}
