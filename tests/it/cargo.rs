//! Cargo conventions: only the files a target compiles are linted (module trees through `mod`,
//! `#[path]`, inline modules and `include!`), a workspace `cargo metadata` cannot read under
//! the project's pinned toolchain is read with another, and packages are chosen as cargo
//! chooses them (see also `cli::a_member_directory_lints_its_package_and_workspace_lints_all`).

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{BROKEN, CLEAN, Project, Run, bin, lib_with};

#[test]
fn only_files_a_target_compiles_are_linted() {
    let p = Project::package("demo");
    p.write(
        "src/lib.rs",
        &lib_with(&[
            "store",
            "#[path = \"generated/api.rs\"] mod api;",
            "mod outer { pub mod inner; }",
        ]),
    )
    .write("src/store/mod.rs", "//! Store.\n\npub mod orders;\n")
    .write("src/store/orders.rs", CHECK_BEFORE_LOCK)
    .write("src/generated/api.rs", CLEAN)
    .write("src/outer/inner.rs", CLEAN)
    .write("src/main.rs", "//! Binary.\n\nfn main() {}\n")
    .write("tests/smoke.rs", CLEAN)
    .write("build.rs", "fn main() {}\n")
    // Nothing compiles these: a syntax sample, a non-UTF-8 fixture, a stray module file.
    .write("assets/invalid_syntax.rs", BROKEN)
    .write("src/orphan.rs", BROKEN);
    p.write_bytes("tests/data/latin1.rs", b"// caf\xe9\n");
    let run = p.run(&["--format", "json"]);
    run.code(1);
    let json = run.json();
    assert_eq!(json["summary"]["files"], 8, "{json:#}");
    assert_eq!(json["summary"]["unreached"], 3, "{json:#}");
    assert_eq!(json["summary"]["skipped"], 0, "{json:#}");
    let files: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["src/store/orders.rs"], "{json:#}");
    assert!(run.stderr.is_empty(), "{}", run.stderr);

    // Never exit 2 for them, even with --exit-zero.
    p.write("src/store/orders.rs", CLEAN);
    let human = p.run(&["--exit-zero", "--color", "never"]);
    human.code(0);
    assert!(
        human
            .stdout
            .contains("3 files that no target compiles skipped"),
        "{}",
        human.stdout
    );

    // Declared, the same file is linted.
    p.write("src/lib.rs", &lib_with(&["orphan"]));
    p.run(&[]).code(2);
}

#[test]
fn include_and_module_files_of_test_modules_are_reached() {
    let p = Project::package("demo");
    p.write(
        "src/lib.rs",
        "//! Root.\n\ninclude!(\"parts/extra.rs\");\n\n#[cfg(test)]\nmod tests {\n    mod helpers;\n}\n",
    )
    .write("src/parts/extra.rs", BROKEN)
    .write("src/tests/helpers.rs", CLEAN);
    let json = p.run(&["--format", "json"]).json();
    assert_eq!(json["summary"]["files"], 3, "{json:#}");
    assert_eq!(json["findings"][0]["file"], "src/parts/extra.rs");
}

#[test]
fn a_pinned_toolchain_that_is_not_installed_does_not_stop_cargo_metadata() {
    // A standalone run (not through `cargo`, which already runs under a toolchain): cargo
    // metadata in the project fails under rustup, and is tried again outside it.
    let p = Project::empty();
    p.write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"shop\", \"tools\"]\nresolver = \"2\"\n",
    )
    .write("rust-toolchain.toml", "[toolchain]\nchannel = \"1.2.3\"\n")
    .write(
        "shop/Cargo.toml",
        "[package]\nname = \"shop\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write("shop/src/lib.rs", "//! Shop.\n\npub mod ship;\n")
    .write("shop/src/ship.rs", CHECK_BEFORE_LOCK)
    .write(
        "tools/Cargo.toml",
        "[package]\nname = \"tools\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .write("tools/src/lib.rs", CLEAN);
    let mut cmd = bin();
    cmd.current_dir(p.root())
        .env("RUSTUP_AUTO_INSTALL", "0")
        .env_remove("RUSTUP_TOOLCHAIN")
        // Run standalone: under `cargo staleguard`, `CARGO` names the running toolchain's cargo,
        // which ignores toolchain files.
        .env_remove("CARGO")
        .env(
            "PATH",
            path_with_cargo_that_honours_toolchain_files(p.root()),
        )
        .args(["--format", "json", "-p", "shop"]);
    let run = Run::of(&mut cmd);
    run.code(1);
    // The packages were read by cargo (so `-p` works), with a warning that says why.
    assert!(
        run.stderr
            .contains("warning: `cargo metadata` failed in the project")
            && run.stderr.contains("1.2.3"),
        "{}",
        run.stderr
    );
    let json = run.json();
    assert_eq!(json["findings"][0]["file"], "shop/src/ship.rs");
    assert_eq!(json["summary"]["files"], 2, "{json:#}");

    // Run as `cargo staleguard`, cargo names itself in `CARGO`: the running toolchain's cargo
    // reads the workspace at once.
    let running = std::env::var("CARGO").expect("cargo runs the tests");
    cmd.env("CARGO", running);
    let run = Run::of(&mut cmd);
    run.code(1);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
}

/// A `PATH` whose `cargo` picks the toolchain from the project's `rust-toolchain.toml`, as a
/// user's does: rustup's proxy (cargo runs tests with its toolchain's own `cargo` first on the
/// `PATH`). Without rustup, a `cargo` that does what rustup's proxy does with a toolchain that
/// is not installed: fail inside the project, run the real cargo elsewhere.
fn path_with_cargo_that_honours_toolchain_files(project: &std::path::Path) -> std::ffi::OsString {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")));
    let proxies = home
        .map(|h| h.join("bin"))
        .filter(|bin| bin.join("rustup").is_file() && bin.join("cargo").is_file());
    let dir = match proxies {
        Some(dir) => dir,
        None => {
            let dir = project.join(".fake-rustup");
            std::fs::create_dir_all(&dir).unwrap();
            let real = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
            let script = format!(
                "#!/bin/sh\ncase \"$PWD/\" in\n  \"{}\"/*) echo \"error: toolchain '1.2.3' is not installed\" >&2; exit 1;;\nesac\nexec \"{real}\" \"$@\"\n",
                project.display()
            );
            let path = dir.join("cargo");
            std::fs::write(&path, script).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            dir
        }
    };
    let mut paths = vec![dir];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}
