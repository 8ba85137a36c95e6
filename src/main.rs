//! `cargo staleguard`: the command-line shell around `staleguard-rules`. Parse → run → exit
//! code; everything else lives in the modules below.

mod analyze;
mod args;
mod baseline;
mod commands;
mod config;
mod diff;
mod discover;
mod edit;
mod modtree;
mod paths;
mod report;
mod run;
mod settings;
mod show;
mod suggest;

fn main() -> std::process::ExitCode {
    let (args, levels) = args::parse();
    run::run(args, levels)
}
