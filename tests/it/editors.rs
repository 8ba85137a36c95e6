//! `--message-format json`: cargo's compiler-message JSON, read back with cargo_metadata's own
//! parser, as rust-analyzer and tools that read clippy's output read it.

use std::io::Cursor;

use cargo_metadata::diagnostic::{DiagnosticLevel, DiagnosticSpan};
use cargo_metadata::{CompilerMessage, Message};

use crate::cli_rules::CHECK_BEFORE_LOCK;
use crate::support::{BROKEN, Project, Run, bin, lib_with};

fn messages(stdout: &str) -> (Vec<CompilerMessage>, Option<bool>) {
    let mut compiler = Vec::new();
    let mut finished = None;
    for message in Message::parse_stream(Cursor::new(stdout.as_bytes())) {
        match message.expect("each line parses") {
            Message::CompilerMessage(m) => compiler.push(m),
            Message::BuildFinished(b) => finished = Some(b.success),
            other => panic!("unexpected message {other:?}"),
        }
    }
    (compiler, finished)
}

/// The text a span covers, by its byte offsets.
fn covered<'a>(text: &'a str, span: &DiagnosticSpan) -> &'a str {
    &text[span.byte_start as usize..span.byte_end as usize]
}

#[test]
fn message_format_json_is_cargos_compiler_messages() {
    let p = Project::package("shop");
    p.write("src/lib.rs", &lib_with(&["ship"]))
        .write("src/ship.rs", CHECK_BEFORE_LOCK);
    let run = p.run(&["--message-format=json"]);
    run.code(1);
    let (compiler, finished) = messages(&run.stdout);
    assert_eq!(finished, Some(false));
    assert_eq!(compiler.len(), 1, "{}", run.stdout);
    let m = &compiler[0];
    assert!(m.package_id.repr.contains("shop"), "{:?}", m.package_id);
    assert_eq!(m.target.name, "shop");
    assert_eq!(
        std::fs::canonicalize(&m.target.src_path).unwrap(),
        std::fs::canonicalize(p.path("src/lib.rs")).unwrap()
    );
    let d = &m.message;
    assert_eq!(d.level, DiagnosticLevel::Error);
    assert_eq!(
        d.code.as_ref().unwrap().code,
        "staleguard::check-before-lock"
    );
    assert!(
        d.rendered
            .as_deref()
            .unwrap()
            .contains("error[check-before-lock]")
    );
    let primary: Vec<&DiagnosticSpan> = d.spans.iter().filter(|s| s.is_primary).collect();
    assert_eq!(primary.len(), 1);
    let s = primary[0];
    assert_eq!(s.file_name, "src/ship.rs");
    assert!(
        covered(CHECK_BEFORE_LOCK, s).starts_with("sqlx::query(\"UPDATE orders"),
        "{:?}",
        covered(CHECK_BEFORE_LOCK, s)
    );
    assert_eq!(s.label.as_deref(), Some("written here without re-reading"));
    // Lines and columns agree with the byte offsets, and `text` holds the lines.
    let line = CHECK_BEFORE_LOCK.lines().nth(s.line_start - 1).unwrap();
    assert_eq!(s.text[0].text, line);
    assert!(line[s.column_start - 1..].starts_with("sqlx::query(\"UPDATE"));
    let start_of_line: usize = CHECK_BEFORE_LOCK
        .lines()
        .take(s.line_start - 1)
        .map(|l| l.len() + 1)
        .sum();
    assert_eq!(s.byte_start as usize, start_of_line + s.column_start - 1);
    // The evidence as secondary spans.
    let read = d
        .spans
        .iter()
        .find(|s| s.label.as_deref() == Some("state read here"))
        .expect("a state-read span");
    assert!(!read.is_primary);
    assert!(covered(CHECK_BEFORE_LOCK, read).starts_with("sqlx::query_scalar(\"SELECT status"));
    // Help and the documentation pointer as children.
    assert!(
        d.children
            .iter()
            .any(|c| c.level == DiagnosticLevel::Help && !c.message.is_empty())
    );
    assert!(d.children.iter().any(|c| {
        c.message
            .contains("cargo staleguard explain check-before-lock")
    }));
}

#[test]
fn message_format_json_covers_parse_errors_plain_paths_and_human() {
    let p = Project::empty();
    p.write("scripts/broken.rs", BROKEN);
    let run = p.run(&["--message-format", "json", "scripts"]);
    run.code(2);
    let (compiler, finished) = messages(&run.stdout);
    assert_eq!(finished, Some(false));
    assert_eq!(compiler.len(), 1);
    let s = &compiler[0].message.spans[0];
    assert_eq!(s.file_name, "scripts/broken.rs");
    assert_eq!((s.line_start, s.column_start), (2, 13));

    // `human` and `short` are the formats of the same name; `--format` and it conflict.
    let short = p.run(&["--message-format", "short", "scripts"]);
    assert!(
        short
            .stdout
            .starts_with("scripts/broken.rs:2:13: error[parse-error]")
    );
    p.run(&["--message-format", "json", "--format", "json", "scripts"])
        .code(2);

    // The ANSI variant colours `rendered`.
    let ansi = Run::of(
        bin()
            .current_dir(p.root())
            .args(["--message-format=json-diagnostic-rendered-ansi", "scripts"]),
    );
    let (compiler, _) = messages(&ansi.stdout);
    assert!(
        compiler[0]
            .message
            .rendered
            .as_deref()
            .unwrap()
            .contains("\u{1b}[")
    );
}

/// Every `overrideCommand` in docs/editors.md runs and prints compiler messages.
#[test]
fn the_editor_settings_in_the_docs_run() {
    let doc = std::fs::read_to_string(crate::support::repo_root().join("docs/editors.md"))
        .expect("docs/editors.md");
    let p = Project::package("shop");
    p.write("src/lib.rs", &lib_with(&["ship"]))
        .write("src/ship.rs", CHECK_BEFORE_LOCK);
    let mut checked = 0;
    for line in doc.lines().filter(|l| l.contains("overrideCommand")) {
        let quoted: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        let at = quoted
            .iter()
            .position(|q| *q == "cargo")
            .unwrap_or_else(|| panic!("no command in {line}"));
        assert_eq!(quoted[at + 1], "staleguard", "{line}");
        // cargo runs `cargo-staleguard staleguard ARGS`.
        let run = Run::of(bin().current_dir(p.root()).args(&quoted[at + 1..]));
        run.code(1);
        let (compiler, _) = messages(&run.stdout);
        assert_eq!(compiler.len(), 1, "{line}: {}", run.stdout);
        checked += 1;
    }
    assert_eq!(checked, 3, "VS Code, Neovim and Helix");
}
