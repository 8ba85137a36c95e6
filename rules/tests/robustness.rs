//! Pathological input: deep nesting, a 20 MB file, every syntax form we could think of, broken
//! and odd text. Nothing may panic or overflow the stack (run with the documented
//! [`staleguard_rules::STACK_SIZE`]), and spans must index the text they came from.
//!
//! The full sizes (10,000 levels of nesting, 20 MB) run with `STALEGUARD_STRESS=1`, which
//! `.ci/run` sets for a release-mode run of this file; a debug build spends about 40 s on them,
//! so the default test loop nests 1,000 levels deep and reads 2 MB.

use staleguard_rules::{Analyzer, Diagnostic, Knowledge, LoweredFile, STACK_SIZE};

/// Runs `f` on a thread with the stack size the CLI uses.
fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(STACK_SIZE)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

fn analyse(path: &str, text: String) -> (LoweredFile, Vec<Diagnostic>) {
    let path = path.to_string();
    on_big_stack(move || {
        let a = Analyzer::new(Knowledge::default());
        let lowered = a.lower(&path, &text);
        let diags = a.check(std::slice::from_ref(&lowered), &|_| true);
        (lowered, diags)
    })
}

/// Full-size stress input was asked for.
fn stress() -> bool {
    std::env::var_os("STALEGUARD_STRESS").is_some_and(|v| v == "1")
}

/// How deep the nesting cases go.
fn depth() -> usize {
    if stress() { 10_000 } else { 1_000 }
}

fn nested(depth: usize, open: &str, inner: &str, close: &str) -> String {
    let mut s = String::with_capacity(depth * (open.len() + close.len()) + inner.len());
    for _ in 0..depth {
        s.push_str(open);
    }
    s.push_str(inner);
    for _ in 0..depth {
        s.push_str(close);
    }
    s
}

#[test]
fn deep_expressions_do_not_overflow() {
    let cases = [
        format!("fn f() {{ let x = {}; }}", nested(depth(), "(", "1", ")")),
        format!("fn f() {{ {} }}", nested(depth(), "{ ", "g().await;", " }")),
        format!("fn f() {{ let x = {}; }}", nested(depth(), "[", "1", "]")),
        format!("fn f() {{ let x = 1{}; }}", " + 1".repeat(depth())),
        format!("fn f() {{ let x = a{}; }}", ".b()".repeat(depth())),
        format!("fn f() {{ let x = a{}; }}", ".b".repeat(depth())),
        format!("fn f() {{ {} }}", nested(depth(), "if c { ", "x();", " }")),
        format!(
            "async fn f() {{ {} }}",
            nested(depth(), "async move { ", "sleep(d).await;", " }.await;")
        ),
        format!("fn f() {{ let c = {}; }}", nested(depth(), "|x| ", "x", "")),
        format!("fn f() {{ let x = {}; }}", nested(depth(), "g(", "1", ")")),
        format!(
            "fn f() {{ {} }}",
            nested(depth(), "match a { _ => ", "1", " }")
        ),
        format!("fn f() {{ let x = {}; }}", nested(depth(), "-", "1", "")),
        format!("fn f() {{ let x = {}; }}", nested(depth(), "&", "1", "")),
        format!("fn f() {{ let x = {}1; }}", "!".repeat(depth())),
        // The program's code an unknown macro wraps is lowered; nested this deep it is not.
        format!(
            "async fn f() {{ wrap! {{ c: {} }} }}",
            nested(depth(), "{ ", "g().await;", " }")
        ),
        format!(
            "async fn f() {{ wrap!(p, |c| {}); }}",
            nested(depth(), "async { ", "g().await", " }")
        ),
        format!("type T = {};", nested(depth(), "Vec<", "u8", ">")),
        format!(
            "fn f() {{ {} }}",
            nested(depth(), "loop { ", "break;", " }")
        ),
    ];
    for (i, text) in cases.into_iter().enumerate() {
        let (_, diags) = analyse(&format!("deep{i}.rs"), text);
        // Either it parses or it is one parse-error finding; never a crash.
        assert!(
            diags.iter().all(|d| d.rule == "parse-error"),
            "case {i}: {diags:?}"
        );
    }
}

/// Checking runs bodies on helper threads (the caller's rayon pool, else rayon's global pool, with
/// ordinary stacks): deep bodies must be checkable there. The crate is big enough for the check
/// to split it over two threads; only lowering needs the big stack.
#[test]
fn deep_bodies_check_on_ordinary_helper_threads() {
    let deep = [
        nested(depth(), "if c { ", "x();", " }"),
        nested(depth(), "{ ", "g().await;", " }"),
        nested(depth(), "match a { _ => ", "h()", " }"),
        nested(depth(), "loop { ", "break;", " }"),
    ];
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!("async fn f{i}() {{ {} }}\n", deep[i % deep.len()]));
    }
    let lowered = on_big_stack(move || Analyzer::new(Knowledge::default()).lower("deep.rs", &text));
    assert!(!lowered.has_parse_error());
    assert_eq!(lowered.ir().bodies.len(), 200);
    let diags = Analyzer::new(Knowledge::default())
        .with_threads(2)
        .check(std::slice::from_ref(&lowered), &|_| true);
    assert!(diags.is_empty(), "{diags:?}");
}

fn service_fn(i: usize) -> String {
    format!(
        r#"
pub async fn handler_{i}(pool: &sqlx::PgPool, http: &reqwest::Client, id: i64) -> anyhow::Result<()> {{
    let row = sqlx::query("SELECT status FROM orders_{i} WHERE id = $1").bind(id).fetch_one(pool).await?;
    let status: String = row.try_get("status")?;
    if status == "paid" {{
        return Ok(());
    }}
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE orders_{i} SET status = 'paid' WHERE id = $1 AND status = 'pending'").bind(id).execute(&mut *tx).await?;
    tx.commit().await?;
    http.post("https://example.invalid/notify").json(&id).send().await?;
    Ok(())
}}
"#
    )
}

#[test]
fn a_huge_file_is_analysed() {
    let size = if stress() { 20 << 20 } else { 2 << 20 };
    let mut text = String::with_capacity(size + (1 << 20));
    let mut i = 0;
    while text.len() < size {
        text.push_str(&service_fn(i));
        i += 1;
    }
    let (lowered, diags) = analyse("big.rs", text);
    assert!(!lowered.has_parse_error());
    assert_eq!(lowered.ir().bodies.len(), i);
    // Each handler checks the status before the transaction and runs a conditional UPDATE whose
    // result is not checked: one finding each, and nothing else.
    assert_eq!(diags.len(), i);
    assert!(diags.iter().all(|d| d.rule == "check-before-lock"));
}

const EVERY_FORM: &str = r##"
#![allow(dead_code)]
//! Module docs.
use std::{collections::HashMap as Map, sync::{Arc, Mutex}};
extern crate alloc;
#[macro_use] mod m { pub(crate) fn inner() {} }
mod empty;
pub(in crate::m) struct Unit;
struct Tuple(u8, pub String);
struct Generic<'a, T: Clone + 'a, const N: usize> where T: Send { r: &'a [T; N], f: fn(u8) -> u8, d: dyn Fn() }
enum E { A, B(u8), C { x: i32 } = 3 }
union U { a: u32, b: f32 }
type Alias<T> = Box<dyn Iterator<Item = T> + Send>;
trait Tr: Sized { type A; const C: u8 = 1; fn m(&self) -> Self::A; async fn a(&mut self) {} fn d() where Self: Copy { } }
impl<T> Tr for Vec<T> { type A = (); fn m(&self) {} }
impl !Send for Unit {}
unsafe impl Sync for Unit {}
static mut S: &str = "s";
const SQL: &str = concat!("SELECT * FROM t ", "WHERE id = $1");
extern "C" { fn c_fn(x: i32) -> i32; static X: u8; }
macro_rules! mac { ($($t:tt)*) => { $($t)* }; }
mac!(fn from_macro() {});
#[cfg(test)] mod tests { #[test] fn t() { assert_eq!(1, 1); } }
pub async unsafe extern "C" fn weird() {}
const fn k() -> u8 { 0 }
fn everything<'a, T>(x: &'a mut T, (a, b): (u8, u8), Tuple(c, _): Tuple, ..: ()) -> impl Fn() + 'a where T: Default {
    let _ = 'label: loop { break 'label 1; };
    let v: Vec<_> = (0..10).map(|i| i * 2).filter(|i| *i > 3).collect();
    let Some(y) = v.first() else { return || {}; };
    let r = match a { 0 | 1 if b > 2 => 1, 2..=5 => 2, n @ 6.. => n, _ => 0 };
    let s = Generic::<u8, 3> { r: &[1, 2, 3], f: |x| x, ..todo!() };
    let t = (1, "two", 3.0, b'4', '5', r"raw", br"bytes", c"cstr", 1_000u64, 0x1f, 1e10);
    let arr = [0u8; 16];
    let idx = arr[1..][0] as usize;
    let clos = async move || { y.clone() };
    let blk = async { 1 };
    let tryb = (|| -> Option<u8> { Some(arr.get(0)?.clone()) })();
    let unsafe_read = unsafe { *(&raw const arr[0]) };
    let cnst = const { 1 + 1 };
    let ptr = &raw mut *x;
    let mut m = Map::new();
    m.insert(1, 2);
    m.entry(3).or_insert(4);
    *m.get_mut(&1).unwrap() += 1;
    if let Some(z) = m.get(&1) && *z > 1 { println!("{z}"); }
    while let Some(_) = None::<u8> {}
    for (k, v) in &m { let _ = (k, v); }
    let g = Arc::new(Mutex::new(0));
    { let mut guard = g.lock().unwrap(); *guard += 1; drop(guard); }
    let _ = format!("{a} {b:?} {:>8}", c);
    let _ = vec![1, 2, 3];
    let _ = matches!(r, 1 | 2);
    let _ = x as *mut T;
    let _ = -(a as i32);
    let _ = !true;
    let _ = ();
    let _ = <Vec<u8> as Default>::default();
    let _ = std::mem::size_of::<T>();
    let _ = tokio::select! { biased; v = fut() => v, _ = tokio::time::sleep(d) => 0, else => 1 };
    let _ = tokio::join!(a(), b());
    let _ = sqlx::query!("UPDATE t SET a = $1 WHERE id = $2", 1, 2);
    let _ = yield_now().await;
    let _ = m.len() == 0 || m.is_empty() && true;
    return move || {};
}
fn gen<T: ?Sized>() {}
fn ret() -> ! { loop {} }
"##;

#[test]
fn every_syntax_form_is_lowered() {
    let (lowered, diags) = analyse("forms.rs", EVERY_FORM.to_string());
    let errors: Vec<_> = diags.iter().filter(|d| d.rule == "parse-error").collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        lowered
            .ir()
            .bodies
            .iter()
            .any(|b| b.name().to_string() == "everything" && !b.events.is_empty())
    );
}

#[test]
fn odd_text_never_panics_and_spans_index_the_text() {
    let bad_utf8 = String::from_utf8_lossy(&[0x66, 0x6e, 0x20, 0xff, 0xfe, 0x28, 0x29, 0x7b, 0x7d])
        .into_owned();
    let inputs: Vec<String> = vec![
        String::new(),
        "// only a comment".into(),
        "\u{feff}fn bom() {}".into(),
        "#!/usr/bin/env rust\nfn shebang() {}".into(),
        "fn broken( {".into(),
        "fn s() { let x = \"unterminated; }".into(),
        bad_utf8,
        "fn crlf() {\r\n    let a = 1;\r\n}\r\n".into(),
        "fn ünïcödé() { let 变量 = \"é\"; }".into(),
        "\0\0\0".into(),
        "}}}}{{{{".into(),
        "fn f() { staleguard: allow(check-before-lock) }".into(),
        "// staleguard: allow(\nfn f() {}".into(),
        "// staleguard: allow(no-such-rule) -- reason\nfn f() {}".into(),
        "fn f() { let s = \"// staleguard: allow(check-before-lock)\"; }".into(),
    ];
    for (i, text) in inputs.into_iter().enumerate() {
        let (_, diags) = analyse(&format!("odd{i}.rs"), text.clone());
        for d in &diags {
            assert!(
                d.primary.byte_start <= d.primary.byte_end && d.primary.byte_end <= text.len(),
                "case {i}: {d:?}"
            );
            assert!(
                text.is_char_boundary(d.primary.byte_start),
                "case {i}: {d:?}"
            );
        }
    }
}

#[test]
fn primary_spans_point_at_the_hazardous_call() {
    let text = "fn é() {}\r\n\
        pub async fn pay(pool: &sqlx::PgPool, http: &reqwest::Client, id: i64) -> anyhow::Result<()> {\r\n\
        \x20   let mut tx = pool.begin().await?; // ünïcödé\r\n\
        \x20   sqlx::query(\"UPDATE orders SET status = 'charging' WHERE id = $1\").bind(id).execute(&mut *tx).await?;\r\n\
        \x20   /* é */ http.post(\"https://psp.invalid/charge\").json(&id).send().await?;\r\n\
        \x20   tx.commit().await?;\r\n\
        \x20   Ok(())\r\n\
        }\r\n";
    let (_, diags) = analyse("pay.rs", text.to_string());
    let d = diags
        .iter()
        .find(|d| d.rule == "rpc-in-transaction")
        .expect("finding");
    assert_eq!(d.primary.start.line, 5);
    assert_eq!(
        &text[d.primary.byte_start..d.primary.byte_end],
        "http.post(\"https://psp.invalid/charge\").json(&id).send().await?"
    );
    assert_eq!(d.primary.start.column, 13);
}
