//! What to lint: workspaces found with `cargo metadata --no-deps` and plain paths, walked with
//! `ignore` (honours `.gitignore`, skips `target/`), grouped into units that are checked together.
//! A unit's files are its `.rs` sources and its schema files (`.sql` migrations, read for the
//! tables' unique keys).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cargo_metadata::MetadataCommand;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::config::{self, Config, ConfigError, Section};
use crate::settings::{Settings, Target};
use crate::suggest::did_you_mean;

/// A set of files checked together (crate-wide facts are computed over all of them).
#[derive(Debug)]
pub struct Unit {
    /// Paths in diagnostics are relative to this directory.
    pub root: PathBuf,
    /// Workspace-level configuration (or the plain paths' `staleguard.toml`).
    pub config: Config,
    /// `[package.metadata.staleguard]` of member packages, which override `config` for their
    /// files.
    pub packages: Vec<PackageScope>,
    pub files: Vec<SourcePath>,
    /// The packages of a Cargo workspace (empty for plain paths, whose files are all linted):
    /// only the files their targets' module trees reach are linted.
    pub crates: Vec<Crate>,
    /// How the workspace was read when `cargo metadata` could not read it as asked (a
    /// toolchain that is not installed, a nightly-only `cargo-features` entry). Nothing is
    /// compiled, so that does not stop the lint; the run says so in a warning.
    pub fallback: Option<String>,
    /// Paths of a workspace that could not be walked (a symlink loop, an unreadable
    /// directory): warnings, since only files a target compiles matter.
    pub notices: Vec<InputError>,
}

/// A package of the workspace.
#[derive(Debug)]
pub struct Crate {
    /// cargo's package id.
    pub id: String,
    pub manifest: PathBuf,
    pub targets: Vec<TargetRoot>,
}

/// A target of a package: the root file of its module tree.
#[derive(Debug, Clone)]
pub struct TargetRoot {
    pub name: String,
    /// cargo's kinds (`lib`, `bin`, `test`, ..).
    pub kind: Vec<String>,
    pub src_path: PathBuf,
    pub edition: String,
}

/// A member package with its own configuration.
#[derive(Debug)]
pub struct PackageScope {
    /// The package directory, relative to the unit root, `/`-separated, ending in `/` (or empty).
    pub prefix: String,
    pub config: Config,
}

/// One file to lint.
#[derive(Debug, Clone)]
pub struct SourcePath {
    pub abs: PathBuf,
    /// Relative to the unit root, `/`-separated (absolute when outside it).
    pub rel: String,
    /// The package (index in [`Unit::crates`]) whose directory holds it.
    pub krate: Option<usize>,
}

impl SourcePath {
    /// A schema file (`.sql`), read for the tables' unique keys, not linted.
    pub fn is_schema(&self) -> bool {
        staleguard_rules::is_schema_path(&self.rel)
    }
}

/// A path that could not be linted; the run goes on without it.
#[derive(Debug, Clone)]
pub struct InputError {
    /// Absolute (shown through [`crate::paths::Paths`]), or empty when unknown.
    pub path: String,
    pub message: String,
}

/// A problem that stops the run (exit code 2).
#[derive(Debug)]
pub enum Fatal {
    Config(Box<ConfigError>),
    Message(String),
}

impl From<ConfigError> for Fatal {
    fn from(err: ConfigError) -> Self {
        Fatal::Config(Box::new(err))
    }
}

/// Finds every unit to lint. Per-path problems come back as [`InputError`]s.
pub fn discover(settings: &Settings) -> Result<(Vec<Unit>, Vec<InputError>), Fatal> {
    let cwd = std::env::current_dir()
        .map_err(|e| Fatal::Message(format!("cannot read current directory: {e}")))?;
    let mut units = Vec::new();
    let mut errors = Vec::new();
    let mut loose: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    for target in &settings.targets {
        match target {
            Target::Workspace { manifest, narrow } => {
                match workspace(settings, manifest.as_deref(), *narrow) {
                    Ok(unit) => units.push(unit),
                    Err(WorkspaceError::Fatal(f)) => return Err(f),
                    Err(WorkspaceError::Input(e)) => errors.push(e),
                }
            }
            Target::Path(path) => {
                let meta = std::fs::metadata(path);
                if let Err(err) = meta {
                    errors.push(InputError {
                        path: cwd.join(path).display().to_string(),
                        message: format!("cannot read path: {err}"),
                    });
                    continue;
                }
                let config = match &settings.config {
                    Some(explicit) => Some(explicit.clone()),
                    None => find_config_upwards(&cwd.join(path)),
                };
                loose.push((path.clone(), config));
            }
        }
    }
    // Plain paths sharing a configuration are one unit.
    let mut groups: Vec<(Option<PathBuf>, Vec<PathBuf>)> = Vec::new();
    for (path, config) in loose {
        match groups.iter_mut().find(|(c, _)| *c == config) {
            Some((_, paths)) => paths.push(path),
            None => groups.push((config, vec![path])),
        }
    }
    for (config_path, paths) in groups {
        let config = match &config_path {
            Some(p) => config::load(p, Section::Root)?.unwrap_or_default(),
            None => Config::default(),
        };
        let base = config_path
            .as_ref()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .map(|p| cwd.join(p))
            .unwrap_or_else(|| cwd.clone());
        let exclude = Exclude::new(&base, &config.exclude);
        let mut files = Vec::new();
        let mut seen = HashSet::new();
        for path in paths {
            walk(
                &path,
                &cwd,
                false,
                false,
                None,
                &[&exclude],
                &mut seen,
                &mut files,
                &mut errors,
            );
        }
        units.push(Unit {
            root: cwd.clone(),
            config,
            packages: Vec::new(),
            crates: Vec::new(),
            files,
            fallback: None,
            notices: Vec::new(),
        });
    }
    Ok((units, errors))
}

enum WorkspaceError {
    Fatal(Fatal),
    Input(InputError),
}

fn workspace(
    settings: &Settings,
    manifest: Option<&Path>,
    narrow: bool,
) -> Result<Unit, WorkspaceError> {
    let shown = manifest.map_or_else(
        || "the current directory".to_string(),
        |m| m.display().to_string(),
    );
    let (metadata, warning) = match metadata(manifest) {
        Ok(found) => found,
        Err(detail) => {
            // No build is needed: a manifest cargo cannot read still has its sources next to it.
            if let Some(root) = manifest_dir(manifest).filter(|_| settings.packages.is_empty()) {
                let why = format!(
                    "cannot read the Cargo workspace of {shown} ({}); linting the packages found under {} by their `Cargo.toml` files instead",
                    root_cause(&detail),
                    root.display()
                );
                return directory_unit(settings, root, why);
            }
            let message = format!("cannot read the Cargo workspace of {shown}: {detail}");
            return Err(
                if manifest.is_some()
                    && settings.manifest_path.is_none()
                    && settings.targets.len() > 1
                {
                    WorkspaceError::Input(InputError {
                        path: manifest
                            .map(|m| cwd_join(m).display().to_string())
                            .unwrap_or_default(),
                        message,
                    })
                } else {
                    WorkspaceError::Fatal(Fatal::Message(message))
                },
            );
        }
    };
    let root: PathBuf = metadata.workspace_root.clone().into();
    let root_manifest = canonical(&root.join("Cargo.toml"));
    let members = metadata.workspace_packages();
    let selected: Vec<bool> = if !settings.packages.is_empty() {
        let mut chosen = vec![false; members.len()];
        for name in &settings.packages {
            match members
                .iter()
                .position(|p| p.name.as_str() == name.as_str())
            {
                Some(i) => chosen[i] = true,
                None => {
                    let hint = did_you_mean(name, members.iter().map(|p| p.name.as_str()))
                        .map(|c| format!(", did you mean `{c}`?"))
                        .unwrap_or_default();
                    return Err(WorkspaceError::Fatal(Fatal::Message(format!(
                        "package `{name}` is not a member of the workspace at {}{hint}",
                        root.display()
                    ))));
                }
            }
        }
        chosen
    } else {
        // As cargo: the package of the given manifest, or of the nearest `Cargo.toml` above the
        // working directory; the workspace root's manifest (or `--workspace`) means every member.
        let own = narrow
            .then(|| manifest.map(canonical).or_else(nearest_manifest))
            .flatten()
            .filter(|m| *m != root_manifest);
        let position = own.and_then(|m| {
            members
                .iter()
                .position(|p| canonical(p.manifest_path.as_std_path()) == m)
        });
        match position {
            Some(i) => (0..members.len()).map(|j| j == i).collect(),
            None => vec![true; members.len()],
        }
    };

    let mut notices = Vec::new();
    let config = workspace_config(settings, &root, &mut notices)?;
    let ws_exclude = workspace_exclude(&config, &root);
    let target_dir: PathBuf = metadata.target_directory.clone().into();

    let mut crates = Vec::new();
    let mut acc = Collected::default();
    // Only the selected members are read: the analyzer sees the files it is given as one crate,
    // and a member's dependency read as the same crate would blur what resolves to what.
    let selected_members = members
        .iter()
        .zip(&selected)
        .filter(|(_, s)| **s)
        .map(|(p, _)| *p);
    for (index, package) in selected_members.enumerate() {
        let manifest_path = package.manifest_path.as_std_path();
        let dir = manifest_path.parent().unwrap_or(&root).to_path_buf();
        walk_package(
            &mut acc,
            &root,
            &target_dir,
            &ws_exclude,
            manifest_path,
            index,
        )?;
        let (files, seen) = (&mut acc.files, &mut acc.seen);
        // A target root outside the package directory (`[lib] path = "../shared/lib.rs"`).
        for target in &package.targets {
            let src = target.src_path.as_std_path();
            if !src.starts_with(&dir) && src.is_file() {
                push_file(src, &root, seen, files);
                if let Some(f) = files.last_mut().filter(|f| f.krate.is_none()) {
                    f.krate = Some(index);
                }
            }
        }
        crates.push(Crate {
            id: package.id.repr.clone(),
            manifest: manifest_path.to_path_buf(),
            targets: package
                .targets
                .iter()
                .map(|t| TargetRoot {
                    name: t.name.clone(),
                    kind: t.kind.iter().map(|k| k.to_string()).collect(),
                    src_path: t.src_path.clone().into(),
                    edition: t.edition.as_str().to_string(),
                })
                .collect(),
        });
    }
    // Schema files outside every package (a virtual workspace's `migrations/`) describe the
    // same database. What the walk cannot read was reported by the package walks, or is
    // outside every package (not linted).
    walk(
        &root,
        &root,
        false,
        true,
        Some(&target_dir),
        &[&ws_exclude],
        &mut acc.seen,
        &mut acc.files,
        &mut Vec::new(),
    );
    notices.append(&mut acc.notices);
    Ok(Unit {
        root,
        config,
        packages: acc.packages,
        crates,
        files: acc.files,
        fallback: warning,
        notices,
    })
}

/// `cargo metadata --no-deps --offline` for `manifest` (else the working directory). When it
/// fails, it is tried again with the toolchain rustup would pick outside the project (a
/// `rust-toolchain.toml` may pin one that is not installed; listing packages needs no
/// particular toolchain), which comes back with a warning. The error is cargo's message.
fn metadata(manifest: Option<&Path>) -> Result<(cargo_metadata::Metadata, Option<String>), String> {
    let command = |manifest: Option<&Path>| {
        let mut cmd = MetadataCommand::new();
        cmd.no_deps().other_options(vec!["--offline".to_string()]);
        if let Some(m) = manifest {
            cmd.manifest_path(m);
        }
        cmd
    };
    let detail = |err: cargo_metadata::Error| match &err {
        cargo_metadata::Error::CargoMetadata { stderr } => {
            stderr.trim().trim_start_matches("error: ").to_string()
        }
        other => other.to_string(),
    };
    let first = match command(manifest).exec() {
        Ok(metadata) => return Ok((metadata, None)),
        Err(err) => detail(err),
    };
    // Again from a directory outside the project, so no toolchain file applies, with the
    // manifest named by its absolute path.
    let Some(abs) = manifest
        .map(cwd_join)
        .or_else(|| manifest_dir(None).map(|d| d.join("Cargo.toml")))
        .filter(|m| m.is_file())
    else {
        return Err(first);
    };
    let mut retry = command(Some(&abs)).cargo_command();
    retry.current_dir(std::env::temp_dir());
    let output = retry.output().map_err(|_| first.clone())?;
    if !output.status.success() {
        return Err(first);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let json = text
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| first.clone())?;
    let metadata = MetadataCommand::parse(json).map_err(|_| first.clone())?;
    let warning = format!(
        "`cargo metadata` failed in the project ({}); read the workspace with the toolchain rustup uses outside it instead",
        root_cause(&first)
    );
    Ok((metadata, Some(warning)))
}

/// The canonical path of the nearest `Cargo.toml` in the working directory or above, as cargo
/// finds the current package.
fn nearest_manifest() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|d| d.join("Cargo.toml"))
        .find(|m| m.is_file())
        .map(|m| canonical(&m))
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The workspace's configuration: `--config`, else `staleguard.toml` at the root, else the
/// root manifest's `[workspace.metadata.staleguard]`.
fn workspace_config(
    settings: &Settings,
    root: &Path,
    notices: &mut Vec<InputError>,
) -> Result<Config, WorkspaceError> {
    let file = root.join("staleguard.toml");
    let manifest = root.join("Cargo.toml");
    let in_manifest = || {
        std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
            .is_some_and(|t| {
                t.get("workspace")
                    .and_then(|w| w.get("metadata"))
                    .and_then(|m| m.get("staleguard"))
                    .is_some()
            })
    };
    let mut shadowed = |by: &Path, what: String| {
        notices.push(InputError {
            path: by.display().to_string(),
            message: format!("this configuration shadows {what}, which is not read"),
        });
    };
    if let Some(explicit) = &settings.config {
        if file.is_file() {
            shadowed(explicit, format!("`{}`", file.display()));
        } else if in_manifest() {
            shadowed(
                explicit,
                format!(
                    "`[workspace.metadata.staleguard]` in `{}`",
                    manifest.display()
                ),
            );
        }
        return Ok(config::load(explicit, Section::Root)
            .map_err(fatal)?
            .unwrap_or_default());
    }
    let loaded = if file.is_file() {
        if in_manifest() {
            shadowed(
                &file,
                format!(
                    "`[workspace.metadata.staleguard]` in `{}`",
                    manifest.display()
                ),
            );
        }
        config::load(&file, Section::Root)
    } else {
        config::load(&manifest, Section::WorkspaceMetadata)
    };
    Ok(loaded.map_err(fatal)?.unwrap_or_default())
}

/// The innermost cause of a cargo error: the first line after its last `Caused by:` (cargo's
/// first line is only "failed to parse manifest at ..").
fn root_cause(detail: &str) -> &str {
    let tail = detail.rsplit_once("Caused by:").map_or(detail, |(_, t)| t);
    tail.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(detail)
}

/// The workspace configuration's exclude globs, anchored at the file that set them (the
/// workspace root when none did).
fn workspace_exclude(config: &Config, root: &Path) -> Exclude {
    let base = config
        .source
        .as_ref()
        .and_then(|p| p.parent())
        .unwrap_or(root);
    Exclude::new(base, &config.exclude)
}

/// The directory of the manifest `cargo metadata` was asked about (`--manifest-path`, else the
/// nearest `Cargo.toml` above the working directory, or the `[workspace]` one above it, as cargo
/// would find it), when that manifest exists.
fn manifest_dir(manifest: Option<&Path>) -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    match manifest {
        Some(m) => {
            let m = cwd.join(m);
            m.is_file()
                .then(|| m.parent().map(Path::to_path_buf))
                .flatten()
        }
        None => {
            let mut manifests = cwd
                .ancestors()
                .filter(|dir| dir.join("Cargo.toml").is_file());
            let nearest = manifests.next()?;
            let declares_workspace = |dir: &Path| {
                std::fs::read_to_string(dir.join("Cargo.toml"))
                    .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
            };
            if declares_workspace(nearest) {
                return Some(nearest.to_path_buf());
            }
            let root = manifests.find(|d| declares_workspace(d)).unwrap_or(nearest);
            Some(root.to_path_buf())
        }
    }
}

/// A workspace `cargo metadata` could not read: the packages under the manifest's directory,
/// found by their `Cargo.toml` files (`target/` and `.gitignore`d directories skipped), each
/// with the targets cargo would infer (`src/lib.rs`, `src/main.rs`, `src/bin/`, `tests/`,
/// `examples/`, `benches/`, `build.rs`) and those its manifest names by path.
fn directory_unit(settings: &Settings, root: PathBuf, why: String) -> Result<Unit, WorkspaceError> {
    let mut notices = Vec::new();
    let config = workspace_config(settings, &root, &mut notices)?;
    let exclude = workspace_exclude(&config, &root);
    let target_dir = root.join("target");
    let mut manifests = Vec::new();
    let walker = ignore::WalkBuilder::new(&root)
        .require_git(false)
        .filter_entry({
            let target_dir = target_dir.clone();
            move |e| e.path() != target_dir && !e.path().join("CACHEDIR.TAG").is_file()
        })
        .build();
    for entry in walker.flatten() {
        if entry.file_name() == "Cargo.toml" && entry.file_type().is_some_and(|t| t.is_file()) {
            manifests.push(entry.into_path());
        }
    }
    manifests.sort();
    let mut crates = Vec::new();
    let mut acc = Collected::default();
    for manifest in manifests {
        let Some(table) = std::fs::read_to_string(&manifest)
            .ok()
            .and_then(|t| t.parse::<toml::Table>().ok())
        else {
            continue;
        };
        let Some(name) = table
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
        else {
            continue;
        };
        let dir = manifest.parent().unwrap_or(&root).to_path_buf();
        walk_package(
            &mut acc,
            &root,
            &target_dir,
            &exclude,
            &manifest,
            crates.len(),
        )?;
        let edition = table
            .get("package")
            .and_then(|p| p.get("edition"))
            .and_then(|e| e.as_str())
            .unwrap_or("2015")
            .to_string();
        crates.push(Crate {
            id: format!("path+file://{}#{name}", dir.display()),
            manifest: manifest.clone(),
            targets: inferred_targets(&dir, name, &table, &edition),
        });
    }
    walk(
        &root,
        &root,
        false,
        true,
        Some(&target_dir),
        &[&exclude],
        &mut acc.seen,
        &mut acc.files,
        &mut Vec::new(),
    );
    notices.append(&mut acc.notices);
    Ok(Unit {
        root,
        config,
        packages: acc.packages,
        crates,
        files: acc.files,
        fallback: Some(why),
        notices,
    })
}

/// What the package walks of a workspace collect.
#[derive(Default)]
struct Collected {
    files: Vec<SourcePath>,
    seen: HashSet<PathBuf>,
    notices: Vec<InputError>,
    packages: Vec<PackageScope>,
}

/// Walks one package's directory (nested packages and the target directory skipped, the
/// workspace's and the package's excludes applied): its files, marked with the package's
/// `index`, its walk problems sorted out, its own configuration.
fn walk_package(
    acc: &mut Collected,
    root: &Path,
    target_dir: &Path,
    ws_exclude: &Exclude,
    manifest: &Path,
    index: usize,
) -> Result<(), WorkspaceError> {
    let dir = manifest.parent().unwrap_or(root).to_path_buf();
    let package_config = config::load(manifest, Section::PackageMetadata).map_err(fatal)?;
    let pkg_exclude = package_config
        .as_ref()
        .map(|c| Exclude::new(&dir, &c.exclude));
    let mut excludes = vec![ws_exclude];
    if let Some(e) = &pkg_exclude {
        excludes.push(e);
    }
    let first = acc.files.len();
    let mut problems = Vec::new();
    walk(
        &dir,
        root,
        true,
        false,
        Some(target_dir),
        &excludes,
        &mut acc.seen,
        &mut acc.files,
        &mut problems,
    );
    let sorted = sort_out(problems.into_iter(), root, &mut acc.seen, &mut acc.files);
    acc.notices.extend(sorted);
    for f in &mut acc.files[first..] {
        f.krate = Some(index);
    }
    if let Some(c) = package_config {
        let mut prefix = relative(&dir, root);
        if !prefix.is_empty() {
            prefix.push('/');
        }
        acc.packages.push(PackageScope { prefix, config: c });
    }
    Ok(())
}

/// The targets of a package as cargo infers them, plus those its manifest names by `path`.
fn inferred_targets(
    dir: &Path,
    name: &str,
    manifest: &toml::Table,
    edition: &str,
) -> Vec<TargetRoot> {
    let mut out: Vec<TargetRoot> = Vec::new();
    let mut add = |name: &str, kind: &str, path: PathBuf| {
        if path.is_file() && !out.iter().any(|t| t.src_path == path) {
            out.push(TargetRoot {
                name: name.to_string(),
                kind: vec![kind.to_string()],
                src_path: path,
                edition: edition.to_string(),
            });
        }
    };
    let crate_name = name.replace('-', "_");
    let explicit = |key: &str| -> Vec<(String, PathBuf)> {
        let entries: Vec<&toml::Value> = match manifest.get(key) {
            Some(toml::Value::Array(items)) => items.iter().collect(),
            Some(v @ toml::Value::Table(_)) => vec![v],
            _ => Vec::new(),
        };
        entries
            .into_iter()
            .filter_map(|t| {
                let path = t.get("path")?.as_str()?;
                let name = t.get("name").and_then(|n| n.as_str()).unwrap_or(path);
                Some((name.to_string(), dir.join(path)))
            })
            .collect()
    };
    for (n, p) in explicit("lib") {
        add(&n, "lib", p);
    }
    add(&crate_name, "lib", dir.join("src/lib.rs"));
    for (n, p) in explicit("bin") {
        add(&n, "bin", p);
    }
    add(name, "bin", dir.join("src/main.rs"));
    for (key, folder, kind) in [
        ("bin", "src/bin", "bin"),
        ("test", "tests", "test"),
        ("example", "examples", "example"),
        ("bench", "benches", "bench"),
    ] {
        if key != "bin" {
            for (n, p) in explicit(key) {
                add(&n, kind, p);
            }
        }
        let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let stem = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if path.extension().is_some_and(|e| e == "rs") {
                add(&stem, kind, path);
            } else if path.join("main.rs").is_file() {
                add(&stem, kind, path.join("main.rs"));
            }
        }
    }
    let build = manifest
        .get("package")
        .and_then(|p| p.get("build"))
        .and_then(|b| b.as_str())
        .unwrap_or("build.rs");
    add("build-script-build", "custom-build", dir.join(build));
    out
}

/// Sorts out the problems of a workspace walk: a `.rs` path that could not be read (a dangling
/// symlink) stays a file, so it is an error only when a target compiles it; the others are
/// returned as notices.
fn sort_out(
    problems: impl Iterator<Item = InputError>,
    root: &Path,
    seen: &mut HashSet<PathBuf>,
    files: &mut Vec<SourcePath>,
) -> Vec<InputError> {
    let mut notices = Vec::new();
    for p in problems {
        if p.path.ends_with(".rs") {
            push_file(Path::new(&p.path), root, seen, files);
        } else {
            notices.push(p);
        }
    }
    notices
}

fn fatal(err: ConfigError) -> WorkspaceError {
    WorkspaceError::Fatal(err.into())
}

/// Exclude globs anchored at a directory.
#[derive(Clone)]
struct Exclude {
    base: PathBuf,
    set: GlobSet,
}

impl Exclude {
    fn new(base: &Path, patterns: &[String]) -> Self {
        let mut builder = GlobSetBuilder::new();
        for p in patterns {
            // Patterns were validated with the config; `*` stays within one path component.
            if let Ok(glob) = GlobBuilder::new(p.trim_start_matches("./").trim_end_matches('/'))
                .literal_separator(true)
                .build()
            {
                builder.add(glob);
            }
        }
        Exclude {
            base: base.to_path_buf(),
            set: builder.build().unwrap_or_else(|_| GlobSet::empty()),
        }
    }

    /// Whether `path` or one of its ancestors (below the base) matches.
    fn matches(&self, path: &Path) -> bool {
        if self.set.is_empty() {
            return false;
        }
        let Ok(rel) = path.strip_prefix(&self.base) else {
            return false;
        };
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.set.is_match(a))
    }
}

/// Walks `start` (a file or directory) for `.rs` files and `.sql` schema files (with
/// `only_schema`, those alone). In a package walk, directories holding their own `Cargo.toml`
/// (other packages) and the target directory are skipped.
#[allow(clippy::too_many_arguments)]
fn walk(
    start: &Path,
    root: &Path,
    package_walk: bool,
    only_schema: bool,
    target_dir: Option<&Path>,
    excludes: &[&Exclude],
    seen: &mut HashSet<PathBuf>,
    files: &mut Vec<SourcePath>,
    errors: &mut Vec<InputError>,
) {
    let cwd = std::env::current_dir().unwrap_or_default();
    let start_abs = cwd.join(start);
    if start_abs.is_file() {
        // A file named explicitly is linted whatever its extension.
        push_file(&start_abs, root, seen, files);
        return;
    }
    let target_dir = target_dir.map(Path::to_path_buf);
    let excluded: Vec<Exclude> = excludes.iter().map(|e| (*e).clone()).collect();
    let start_for_filter = start_abs.clone();
    let walker = ignore::WalkBuilder::new(&start_abs)
        .follow_links(true)
        .require_git(false)
        .filter_entry(move |entry| {
            let path = entry.path();
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if excluded.iter().any(|e| e.matches(path)) {
                return false;
            }
            if !is_dir || path == start_for_filter {
                return true;
            }
            if target_dir.as_deref() == Some(path) || path.join("CACHEDIR.TAG").is_file() {
                return false;
            }
            !(package_walk && path.join("Cargo.toml").is_file())
        })
        .build();
    for entry in walker {
        match entry {
            Ok(entry) => {
                let is_file = entry.file_type().is_some_and(|t| t.is_file());
                let rust = !only_schema && entry.path().extension().is_some_and(|e| e == "rs");
                if is_file && (rust || is_schema_file(&entry)) {
                    push_file(entry.path(), root, seen, files);
                }
            }
            Err(err) => errors.push(walk_error(err)),
        }
    }
}

/// A `.sql` file the analyzer reads for the tables' unique keys (migrations, `schema.sql`), not a
/// data dump (over 1 MiB).
fn is_schema_file(entry: &ignore::DirEntry) -> bool {
    entry
        .path()
        .to_str()
        .is_some_and(staleguard_rules::is_schema_path)
        && entry.metadata().is_ok_and(|m| m.len() <= 1 << 20)
}

fn push_file(path: &Path, root: &Path, seen: &mut HashSet<PathBuf>, files: &mut Vec<SourcePath>) {
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if seen.insert(key) {
        files.push(SourcePath {
            abs: path.to_path_buf(),
            rel: relative(path, root),
            krate: None,
        });
    }
}

fn walk_error(err: ignore::Error) -> InputError {
    match err {
        ignore::Error::WithPath { path, err } => {
            let mut inner = walk_error(*err);
            inner.path = path.display().to_string();
            inner
        }
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            walk_error(*err)
        }
        ignore::Error::Loop { ancestor, child } => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let ancestor = relative(&ancestor, &cwd);
            InputError {
                path: child.display().to_string(),
                message: format!(
                    "symlink loop: points back to `{}`",
                    if ancestor.is_empty() { "." } else { &ancestor }
                ),
            }
        }
        ignore::Error::Io(err) => InputError {
            path: String::new(),
            message: if err.kind() == std::io::ErrorKind::NotFound {
                "cannot read: the file (or the symlink's target) does not exist".to_string()
            } else {
                format!("cannot read: {}", err.kind())
            },
        },
        other => InputError {
            path: String::new(),
            message: other.to_string(),
        },
    }
}

/// `path` relative to `root`, `/`-separated; absolute when outside it.
pub fn relative(path: &Path, root: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let text = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    if rel.is_absolute() {
        path.display().to_string()
    } else {
        text
    }
}

/// `path` made absolute against the working directory.
fn cwd_join(path: &Path) -> PathBuf {
    std::env::current_dir().unwrap_or_default().join(path)
}

/// The nearest `staleguard.toml` in `path`'s directory or above.
fn find_config_upwards(path: &Path) -> Option<PathBuf> {
    let start = if path.is_dir() { path } else { path.parent()? };
    start
        .ancestors()
        .map(|dir| dir.join("staleguard.toml"))
        .find(|candidate| candidate.is_file())
}
