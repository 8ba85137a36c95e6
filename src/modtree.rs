//! Which files a target compiles: its root file and every file reached from it through `mod
//! name;` declarations (with `#[path]`, inline modules and `mod.rs` / non-`mod.rs` files as
//! rustc resolves them) and item-level `include!("..")`. Files no target reaches are not
//! linted, as rustc and clippy never see them.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use staleguard_rules::ModDecl;

/// The files a module declaration may live in, most likely first. `file` is the declaring
/// file; `mod_rs` says whether it owns its directory (a crate root, a `mod.rs`, or a file
/// loaded through `#[path]`). Each candidate comes with whether it is itself a `mod_rs` file.
pub fn candidates(file: &Path, mod_rs: bool, decl: &ModDecl) -> Vec<(PathBuf, bool)> {
    let parent = file.parent().unwrap_or(Path::new(""));
    if let (Some(path), true) = (&decl.path, decl.inline.is_empty()) {
        // Relative to the declaring file's directory, whatever the file.
        return vec![(parent.join(path), true)];
    }
    let mut dir = if mod_rs {
        parent.to_path_buf()
    } else {
        let stem = file.file_stem().unwrap_or_default();
        parent.join(stem)
    };
    for (name, path) in &decl.inline {
        dir.push(path.as_deref().unwrap_or(name));
    }
    match &decl.path {
        Some(path) => vec![(dir.join(path), true)],
        None => vec![
            (dir.join(format!("{}.rs", decl.name)), false),
            (dir.join(&decl.name).join("mod.rs"), true),
        ],
    }
}

/// A file of the module tree: the file's index among the candidates, and the target (by
/// index) that reached it first.
pub type Reached = HashMap<usize, usize>;

/// Follows the module trees of `roots` (one per target, by index) over `files` (absolute,
/// canonical paths; `edges` gives a file's declarations once it is read, `None` when it could
/// not be read or parsed). Returns the files reached, each with the first target reaching it.
pub fn reach<'a>(
    roots: &[PathBuf],
    files: &[PathBuf],
    edges: impl Fn(usize) -> Option<(&'a [ModDecl], &'a [String])>,
) -> Reached {
    let index: HashMap<&Path, usize> = files
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_path(), i))
        .collect();
    let mut reached = Reached::new();
    let mut queue = VecDeque::new();
    for (target, root) in roots.iter().enumerate() {
        if let Some(&i) = index.get(root.as_path())
            && !reached.contains_key(&i)
        {
            reached.insert(i, target);
            queue.push_back((i, true, target));
        }
    }
    while let Some((i, mod_rs, target)) = queue.pop_front() {
        let Some((decls, includes)) = edges(i) else {
            continue;
        };
        let file = &files[i];
        let mut next: Vec<(PathBuf, bool)> = Vec::new();
        for decl in decls {
            // The first candidate that exists is the module's file (as rustc picks).
            if let Some(found) = candidates(file, mod_rs, decl)
                .into_iter()
                .map(|(p, m)| (normalize(&p), m))
                .find(|(p, _)| index.contains_key(p.as_path()))
            {
                next.push(found);
            }
        }
        let parent = file.parent().unwrap_or(Path::new(""));
        for include in includes {
            // An included file is part of the including module.
            next.push((normalize(&parent.join(include)), mod_rs));
        }
        for (path, m) in next {
            if let Some(&j) = index.get(path.as_path())
                && !reached.contains_key(&j)
            {
                reached.insert(j, target);
                queue.push_back((j, m, target));
            }
        }
    }
    reached
}

/// Resolves `.` and `..` without touching the file system; symlinked directories are matched
/// through the canonical paths the caller gives.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use staleguard_rules::ModDecl;

    use super::{candidates, reach};

    fn decl(inline: &[(&str, Option<&str>)], name: &str, path: Option<&str>) -> ModDecl {
        ModDecl {
            inline: inline
                .iter()
                .map(|(n, p)| (n.to_string(), p.map(str::to_string)))
                .collect(),
            name: name.to_string(),
            path: path.map(str::to_string),
        }
    }

    fn first(file: &str, mod_rs: bool, d: &ModDecl) -> PathBuf {
        candidates(Path::new(file), mod_rs, d)[0].0.clone()
    }

    #[test]
    fn resolves_as_rustc_does() {
        let plain = decl(&[], "db", None);
        assert_eq!(
            first("/c/src/lib.rs", true, &plain),
            Path::new("/c/src/db.rs")
        );
        assert_eq!(
            candidates(Path::new("/c/src/lib.rs"), true, &plain)[1].0,
            Path::new("/c/src/db/mod.rs")
        );
        // A non-mod-rs file's children live in the directory named after it.
        assert_eq!(
            first("/c/src/db.rs", false, &plain),
            Path::new("/c/src/db/db.rs")
        );
        // `#[path]` outside inline modules: relative to the file's own directory.
        let pathed = decl(&[], "x", Some("gen/x.rs"));
        assert_eq!(
            first("/c/src/db.rs", false, &pathed),
            Path::new("/c/src/gen/x.rs")
        );
        // Inside inline modules: from the module's directory, the inline names (or their
        // `#[path]`) as directories.
        let nested = decl(&[("a", None), ("b", Some("bee"))], "c", None);
        assert_eq!(
            first("/c/src/lib.rs", true, &nested),
            Path::new("/c/src/a/bee/c.rs")
        );
        assert_eq!(
            first("/c/src/m.rs", false, &nested),
            Path::new("/c/src/m/a/bee/c.rs")
        );
        let nested_path = decl(&[("a", None)], "c", Some("z.rs"));
        assert_eq!(
            first("/c/src/m.rs", false, &nested_path),
            Path::new("/c/src/m/a/z.rs")
        );
    }

    #[test]
    fn only_declared_files_are_reached() {
        let files: Vec<PathBuf> = [
            "/c/src/lib.rs",
            "/c/src/a.rs",
            "/c/src/a/b.rs",
            "/c/assets/bad.rs",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let lib = [decl(&[], "a", None)];
        let a = [decl(&[], "b", None)];
        let none: [ModDecl; 0] = [];
        let reached = reach(&[PathBuf::from("/c/src/lib.rs")], &files, |i| {
            Some(match i {
                0 => (&lib[..], &[][..]),
                1 => (&a[..], &[][..]),
                _ => (&none[..], &[][..]),
            })
        });
        let mut got: Vec<usize> = reached.keys().copied().collect();
        got.sort();
        assert_eq!(got, [0, 1, 2]);
    }
}
