//! The dev tools' file walk (shared by the examples and the throughput bench through
//! `#[path]`): every `.rs` file under a directory, sorted.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, sorted. With `skip_build`, directories named `target` or
/// `.git` are skipped (a project checkout); a registry cache keeps them (crates have source
/// folders named `target`).
pub fn rust_files(dir: &Path, skip_build: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, skip_build, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, skip_build: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            if skip_build && p.file_name().is_some_and(|n| n == "target" || n == ".git") {
                continue;
            }
            walk(&p, skip_build, out);
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
