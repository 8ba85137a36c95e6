//! `cargo staleguard`: the command-line shell around `staleguard-rules` (placeholder until the CLI lands).

fn main() {
    let rules = staleguard_rules::registry::all();
    for rule in rules {
        println!("{}", rule.name);
    }
}
