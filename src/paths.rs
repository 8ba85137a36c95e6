//! How paths are shown in every output: relative to the repository root (git's top level of
//! the linted workspace), else to the working directory, with `--path-prefix` in front.
//! Findings keep paths relative to their unit's root (the analyzer's and the baseline's view);
//! the formats ask [`Paths`] for what to print.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::discover::relative;

/// The base shown paths are relative to, and the prefix put before them.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The repository root, else the working directory (absolute).
    pub base: PathBuf,
    /// `--path-prefix`, `/`-terminated (or empty).
    prefix: String,
}

impl Paths {
    /// The git top level of `dir`, else `cwd`.
    pub fn new(dir: Option<&Path>, cwd: &Path, prefix: Option<&str>) -> Paths {
        let base = dir.and_then(git_toplevel).unwrap_or_else(|| canonical(cwd));
        let prefix = match prefix.map(|p| p.trim_end_matches('/')) {
            None | Some("") => String::new(),
            Some(p) => format!("{p}/"),
        };
        Paths { base, prefix }
    }

    /// The shown form of a path relative to a unit's `root` (or absolute).
    pub fn shown(&self, root: Option<&Path>, rel: &str) -> String {
        if rel.is_empty() {
            return String::new();
        }
        let given = Path::new(rel);
        let abs = match root {
            _ if given.is_absolute() => given.to_path_buf(),
            Some(root) => root.join(given),
            None => return format!("{}{rel}", self.prefix),
        };
        let abs = canonical_parent(&abs);
        let shown = relative(&abs, &self.base);
        if Path::new(&shown).is_absolute() {
            shown
        } else {
            format!("{}{shown}", self.prefix)
        }
    }

    /// A message or note with every `path.rs:LINE` in it (a unit-relative path) shown as
    /// [`Paths::shown`] shows it.
    pub fn text(&self, root: Option<&Path>, text: &str) -> String {
        if !text.contains(".rs:") {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut rest = text;
        while let Some(at) = rest.find(".rs:") {
            let end = at + 3;
            // The path starts after the last delimiter before `.rs`.
            let start = rest[..at]
                .rfind(|c: char| c.is_whitespace() || matches!(c, '(' | '`' | '"' | '\''))
                .map_or(0, |i| i + 1);
            let digits = rest[end + 1..].starts_with(|c: char| c.is_ascii_digit());
            out.push_str(&rest[..start]);
            let path = &rest[start..end];
            if digits && !path.is_empty() {
                out.push_str(&self.shown(root, path));
            } else {
                out.push_str(path);
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }
}

/// `git rev-parse --show-toplevel` run in `dir` (`None` outside git, or without git).
pub fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let top = text.trim_end_matches(['\n', '\r']);
    (!top.is_empty()).then(|| canonical(Path::new(top)))
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `path` with its directory resolved (symlinks, `..`), so it compares with the base; the file
/// name is kept as given.
fn canonical_parent(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => canonical(dir).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::Paths;

    #[test]
    fn notes_and_paths_are_shown_from_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        let paths = Paths::new(None, dir.path(), Some("mono/"));
        assert_eq!(paths.shown(Some(&root), "src/a.rs"), "mono/ws/src/a.rs");
        assert_eq!(
            paths.text(
                Some(&root),
                "`f` calls `g` at src/a.rs:12 (src/a.rs:3), not x.rs or `y.rs:`"
            ),
            "`f` calls `g` at mono/ws/src/a.rs:12 (mono/ws/src/a.rs:3), not x.rs or `y.rs:`"
        );
        let outside = Paths::new(None, &root, None);
        let elsewhere = dir.path().join("other.rs");
        assert!(Path::new(&outside.shown(None, elsewhere.to_str().unwrap())).is_absolute());
    }
}
