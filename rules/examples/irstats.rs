//! Dev tool: counts IR events by kind over a directory, to keep lowered data compact.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The most bytes live at once since it was last reset.
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Live allocations by size class: <=16, <=32, <=64, <=128, <=256, larger.
static SIZES: [AtomicUsize; 6] = [const { AtomicUsize::new(0) }; 6];

fn class(size: usize) -> usize {
    match size {
        0..=16 => 0,
        17..=32 => 1,
        33..=64 => 2,
        65..=128 => 3,
        129..=256 => 4,
        _ => 5,
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        COUNT.fetch_add(1, Ordering::Relaxed);
        SIZES[class(l.size())].fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        COUNT.fetch_sub(1, Ordering::Relaxed);
        SIZES[class(l.size())].fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;
#[path = "support/walk.rs"]
mod walk;

use staleguard_rules::{Analyzer, Knowledge};

#[allow(clippy::print_stdout)]
fn main() {
    let files = walk::rust_files(
        std::path::Path::new(&std::env::args().nth(1).expect("dir")),
        true,
    );
    let a = Analyzer::new(Knowledge::default());
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    let (mut bodies, mut steps, mut args, mut paths, mut active) = (0, 0, 0, 0, 0);
    let mut names = std::collections::HashMap::<String, usize>::new();
    let mut kept = Vec::new();
    // (events, call steps, binds) in bodies with only call-graph content, and in the others.
    let mut split = [(0usize, 0usize, 0usize); 2];
    // Lengths of the IR's small vectors: [empty, one, more].
    let mut vecs = std::collections::BTreeMap::<&'static str, [usize; 3]>::new();
    for f in files {
        let Ok(t) = std::fs::read_to_string(&f) else {
            continue;
        };
        kept.push(a.lower(&f.to_string_lossy(), &t));
        let l = kept.last().expect("just pushed");
        for b in &l.ir().bodies {
            bodies += 1;
            let full = b.events.iter().any(|e| match &e.kind {
                EventKind::Call(c) => c.steps.iter().any(|s| !s.args.is_empty()),
                EventKind::Bind(_) => false,
                _ => true,
            });
            if full {
                active += 1;
            }
            let (mut ev, mut st, mut bi) = (0usize, 0usize, 0usize);
            for e in &b.events {
                ev += 1;
                match &e.kind {
                    EventKind::Call(c) => st += c.steps.len(),
                    EventKind::Bind(_) => bi += 1,
                    _ => {}
                }
            }
            for e in &b.events {
                let mut see = |name: &'static str, n: usize| {
                    let c = vecs.entry(name).or_insert([0usize; 3]);
                    c[n.min(2)] += 1;
                };
                match &e.kind {
                    EventKind::Call(c) => {
                        see("call.recv", c.recv.len());
                        see("call.func", c.func.len());
                        see("call.steps", c.steps.len());
                        for st in &c.steps {
                            see("step.args", st.args.len());
                            for a in &st.args {
                                see("arg.paths", a.paths.len());
                            }
                        }
                    }
                    EventKind::Bind(bd) => {
                        see("bind.names", bd.names.len());
                        see("bind.deps", bd.deps.len());
                        see("bind.calls", bd.calls.len());
                        see("bind.strs", bd.strs().len());
                    }
                    EventKind::Cond(t) => {
                        see("cond.deps", t.deps.len());
                        see("cond.calls", t.calls.len());
                    }
                    _ => {}
                }
            }
            let k = if full { 1 } else { 0 };
            split[k].0 += ev;
            split[k].1 += st;
            split[k].2 += bi;
            for e in &b.events {
                let k = match &e.kind {
                    EventKind::Call(c) => {
                        steps += c.steps.len();
                        for s in &c.steps {
                            args += s.args.len();
                            paths += s.args.iter().map(|a| a.paths.len()).sum::<usize>();
                        }
                        let key = c
                            .steps
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(".");
                        *names.entry(key).or_default() += 1;
                        "call"
                    }
                    EventKind::Bind(_) => "bind",
                    EventKind::Assign(_) => "assign",
                    EventKind::Cond(_) => "cond",
                    EventKind::Exit => "exit",
                    EventKind::Drop { .. } => "drop",
                    EventKind::Enter(_) => "enter",
                    EventKind::Leave => "leave",
                };
                *counts.entry(k).or_default() += 1;
            }
        }
    }
    println!(
        "live bytes with every file lowered: {} in {} allocations ({} files kept)",
        LIVE.load(Ordering::Relaxed),
        COUNT.load(Ordering::Relaxed),
        kept.len()
    );
    let sizes: Vec<usize> = SIZES.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!("live allocations by size (<=16, <=32, <=64, <=128, <=256, more): {sizes:?}");
    use staleguard_rules::ir::*;
    println!(
        "sizes: Event {} Bind {} Call {} Step {} Arg {} Body {} SqlInfo {}",
        std::mem::size_of::<Event>(),
        std::mem::size_of::<Bind>(),
        std::mem::size_of::<Call>(),
        std::mem::size_of::<Step>(),
        std::mem::size_of::<Arg>(),
        std::mem::size_of::<Body>(),
        std::mem::size_of::<SqlInfo>()
    );
    let facts: usize = kept
        .iter()
        .map(|l| l.ir().facts.structs.len() + l.ir().facts.uses.len() + l.ir().items.len())
        .sum();
    println!("facts entries {facts}");
    println!(
        "bodies {bodies} (fully kept, not inert: {active}) steps {steps} args {args} paths {paths}"
    );
    println!("{counts:?}");
    println!("vector lengths [empty, one, more]: {vecs:?}");
    println!(
        "events/steps/binds: call-graph-only bodies {:?}, others {:?}",
        split[0], split[1]
    );
    let mut top: Vec<_> = names.into_iter().collect();
    top.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (k, n) in top.iter().take(40) {
        println!("{n:7} {k}");
    }
    // What the check adds on top of the lowered files, at its peak (one thread).
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let found = a.check(&kept, &|_| true).len();
    println!(
        "check: {found} findings, peak {} bytes above the {before} of the lowered files",
        PEAK.load(Ordering::Relaxed) - before
    );
}
