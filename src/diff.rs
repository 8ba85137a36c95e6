//! `--diff-base REV`: the lines added or changed since REV (`git diff REV`, the working tree
//! against REV, plus untracked files), so only findings on them are reported. The analysis
//! still reads every file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::paths::git_toplevel;

/// Added or changed lines per file (absolute, canonical paths), as sorted ranges.
#[derive(Debug, Default)]
pub struct Changed {
    lines: HashMap<PathBuf, Vec<(u32, u32)>>,
    /// Untracked files: every line is new.
    whole: Vec<PathBuf>,
}

impl Changed {
    /// Whether `line` of `file` (absolute) was added or changed.
    pub fn contains(&self, file: &Path, line: u32) -> bool {
        let file = canonical(file);
        self.whole.contains(&file)
            || self
                .lines
                .get(&file)
                .is_some_and(|ranges| ranges.iter().any(|(a, b)| *a <= line && line <= *b))
    }
}

/// Reads the changes of the repository holding `dir` since `rev`. The error says why it
/// cannot (not a repository, an unknown revision, git missing).
pub fn changed(dir: &Path, rev: &str) -> Result<Changed, String> {
    let top = git_toplevel(dir).ok_or_else(|| {
        format!(
            "`--diff-base` needs a git repository, and {} is not in one",
            dir.display()
        )
    })?;
    let verify = git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )?;
    if !verify.0 {
        return Err(format!(
            "unknown revision `{rev}` for `--diff-base` (in the repository at {})",
            top.display()
        ));
    }
    let (ok, text) = git(
        &top,
        &[
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--unified=0",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            rev,
            "--",
        ],
    )?;
    if !ok {
        return Err(format!("`git diff {rev}` failed in {}", top.display()));
    }
    let mut changed = parse(&top, &text);
    let (ok, untracked) = git(&top, &["ls-files", "-z", "--others", "--exclude-standard"])?;
    if ok {
        changed.whole = untracked
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(|p| canonical(&top.join(p)))
            .collect();
    }
    Ok(changed)
}

/// The added lines of a `--unified=0` diff: `+++ b/path` names the file, each `@@ -a,b +c,d @@`
/// adds lines `c..c+d`.
fn parse(top: &Path, diff: &str) -> Changed {
    let mut changed = Changed::default();
    let mut current: Option<PathBuf> = None;
    for line in diff.lines() {
        if let Some(path) = line.strip_prefix("+++ ") {
            current = path
                .strip_prefix("b/")
                .map(|p| canonical(&top.join(p.trim_end_matches('\t'))));
        } else if let (Some(hunk), Some(file)) = (line.strip_prefix("@@ "), &current) {
            let Some(new) = hunk.split_whitespace().find(|w| w.starts_with('+')) else {
                continue;
            };
            let mut parts = new[1..].splitn(2, ',');
            let start: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let count: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(1);
            if count > 0 {
                changed
                    .lines
                    .entry(file.clone())
                    .or_default()
                    .push((start, start + count - 1));
            }
        }
    }
    changed
}

/// Runs git in `dir`: (success, standard output).
fn git(dir: &Path, args: &[&str]) -> Result<(bool, String), String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git for `--diff-base`: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// The canonical path of a file (its directory resolved; the file may be gone).
fn canonical(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .unwrap_or_else(|_| dir.to_path_buf())
            .join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::parse;

    #[test]
    fn hunks_give_the_added_lines() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -3 +3,2 @@ fn f() {\n-old\n+new\n+more\n@@ -10,2 +11,0 @@\n-gone\n-gone\n@@ -20 +20 @@\n-x\n+y\n--- a/src/b.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n";
        let top = Path::new("/nonexistent-top");
        let changed = parse(top, diff);
        let a = top.join("src/a.rs");
        assert!(changed.contains(&a, 3) && changed.contains(&a, 4) && changed.contains(&a, 20));
        assert!(!changed.contains(&a, 5) && !changed.contains(&a, 11));
        assert!(!changed.contains(&top.join("src/b.rs"), 1));
    }
}
