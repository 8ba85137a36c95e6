//! Helpers for end-to-end tests: temporary projects and runs of the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The binary under test, in an environment that does not depend on the caller's (see
/// [`hermetic`]).
pub fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-staleguard"));
    hermetic(&mut cmd);
    cmd
}

/// Removes what the caller's environment could change about a run: `NO_COLOR`, git's
/// repository variables, and every `CARGO_*` variable but `CARGO_HOME` (cargo sets many for a test run, and a caller's
/// `CARGO_TARGET_DIR` would change which folder the linted project's `target/` is). Standard
/// input is closed.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    cmd.env_remove("NO_COLOR").stdin(Stdio::null());
    // A caller inside a git hook would point git at its own repository.
    for key in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
        cmd.env_remove(key);
    }
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" {
            cmd.env_remove(&*key);
        }
    }
    cmd
}

/// The repository root (where `fixtures/`, `docs/` and `examples/` live).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(cmd: &mut Command) -> Run {
        let out = cmd.output().expect("the binary runs");
        Run {
            code: out.status.code().expect("exited, not killed by a signal"),
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }

    /// Asserts the exit code, showing the output when it differs.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Run {
        assert_eq!(
            self.code, expected,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// A temporary directory holding a project.
pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    /// An empty directory.
    pub fn empty() -> Project {
        Project {
            dir: tempfile::Builder::new()
                .prefix("staleguard-it-")
                .tempdir()
                .expect("temp dir"),
        }
    }

    /// A one-package workspace named `name` (its own `[workspace]`, so no parent claims it).
    pub fn package(name: &str) -> Project {
        let p = Project::empty();
        p.write(
            "Cargo.toml",
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
        );
        p
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a file, creating its directories.
    pub fn write(&self, rel: &str, text: &str) -> &Project {
        self.write_bytes(rel, text.as_bytes())
    }

    pub fn write_bytes(&self, rel: &str, bytes: &[u8]) -> &Project {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("create dirs");
        std::fs::write(&path, bytes).expect("write file");
        self
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).expect("read file")
    }

    /// Runs the binary in the project directory.
    pub fn run(&self, args: &[&str]) -> Run {
        Run::of(bin().current_dir(self.root()).args(args))
    }
}

/// A file that does not parse.
pub const BROKEN: &str = "pub fn broken() {\n    let x = ;\n}\n";

/// A clean file.
pub const CLEAN: &str =
    "//! Nothing to see.\n\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

impl Project {
    /// Runs git in the project directory (an identity and no system or global configuration
    /// of the caller's), panicking on failure; returns its standard output.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(self.root(), args)
    }

    /// Makes the project a git repository with everything committed.
    pub fn git_init(&self) -> &Project {
        self.git(&["init", "-q", "-b", "main"]);
        self.commit_all("initial");
        self
    }

    /// Commits every file.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
    }
}

/// Runs git in `dir` (see [`Project::git`]).
pub fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .args([
            "-c",
            "user.name=staleguard tests",
            "-c",
            "user.email=tests@staleguard.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("git output is UTF-8")
}

/// A `lib.rs` declaring the given modules (`"a"`, or `#[path = ".."] mod x` forms given whole
/// when they contain a space).
pub fn lib_with(mods: &[&str]) -> String {
    let mut text = String::from("//! Crate root.\n\n");
    for m in mods {
        if m.contains(' ') {
            text.push_str(m);
            text.push('\n');
        } else {
            text.push_str(&format!("mod {m};\n"));
        }
    }
    text
}
