//! Dev tool: prints the lowered effect traces of the given files and the findings of every rule.

use staleguard_rules::{Analyzer, Knowledge};

#[allow(clippy::print_stdout)]
fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let analyzer = Analyzer::new(Knowledge::default());
    let files: Vec<_> = paths
        .iter()
        .map(|p| analyzer.lower(p, &std::fs::read_to_string(p).expect("readable file")))
        .collect();
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
