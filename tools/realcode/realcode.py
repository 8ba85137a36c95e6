#!/usr/bin/env python3
"""Measure staleguard on real code: recall on the labelled hazards, flagged clean look-alikes,
and the precision of every finding in the trees (from the verdict file).

The repositories come from local clones (`--mirrors`, one bare git directory per repository at
`<mirrors>/<owner+name>/repo`, as the tool library's fetch leaves them), checked out at the commits
of `repos.tsv` into `--work` (their Rust sources and manifests). Nothing here needs the network, and nothing of theirs is kept in this
repository: `repos.tsv` (what and which half), `labels.tsv` (coordinates, rule, label, reason) and
`verdicts.tsv` (one verdict per finding) are the whole set.

    tools/realcode/realcode.py --half tuning             # figures, the tuning half
    tools/realcode/realcode.py --half tuning --misses    # and every missed hazard
    tools/realcode/realcode.py --findings --untriaged    # findings with no verdict yet
    tools/realcode/realcode.py --half heldout            # only once a change is done
    tools/realcode/realcode.py --half fresh              # the other held-out set, likewise

Held-out misses and findings are printed only with `--half heldout` and `--misses` /
`--findings`: look at them after a change, never while making it.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SLACK = 3  # lines a finding may sit outside a label's range and still match it
# The halves, in report order. `heldout` and `fresh` are held out: their misses and findings are
# printed only when that half is asked for by name. Each is a set labelled by reading before any
# rule change measured on it; once its misses have been studied, it joins `tuning`.
HALVES = ("tuning", "heldout", "fresh")
# Written into an extracted tree once its `.sql` files (the schema the analyzer reads) are in.
SCHEMA_MARKER = ".realcode-schema"


def read_tsv(name):
    path = os.path.join(HERE, name)
    rows = []
    if not os.path.exists(path):
        return rows
    header = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cells = line.split("\t")
            if header is None:
                header = cells
                continue
            if len(cells) != len(header):
                sys.exit(f"{name}: a line with {len(cells)} fields, want {len(header)}: {line[:80]}")
            rows.append(dict(zip(header, cells)))
    return rows


def checkout(repo, mirrors, work):
    """The repository's tree at its commit, extracted once into `work`."""
    dest = os.path.join(work, f"{repo['repo']}@{repo['commit'][:12]}")
    # Trees extracted before schema files were read lack their `.sql` files: add them once.
    marker = os.path.join(dest, SCHEMA_MARKER)
    if os.path.isdir(dest) and os.path.exists(marker):
        return dest
    git_dir = os.path.join(mirrors, repo["repo"], "repo")
    # Some snapshots come as a clone with a work tree's `.git` rather than a bare repository.
    if os.path.isdir(os.path.join(git_dir, ".git")):
        git_dir = os.path.join(git_dir, ".git")
    if not os.path.isdir(git_dir):
        print(f"  {repo['repo']}: no local clone at {git_dir} (fetch it first); skipped")
        return dest if os.path.isdir(dest) else None
    paths = [] if repo["paths"] == "." else repo["paths"].split()
    only_schema = os.path.isdir(dest)
    tmp = dest if only_schema else dest + ".partial"
    os.makedirs(tmp, exist_ok=True)
    # The Rust sources, manifests and schema files only, blob by blob: a snapshot may lack its
    # large data files, and none of them is read.
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", repo["commit"], "--", *paths],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout.split(b"\0")
    wanted = []
    for entry in listing:
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, oid = meta.split()
        name = path.decode("utf-8", "replace")
        rust = name.endswith(".rs") or os.path.basename(name) == "Cargo.toml"
        schema = name.endswith(".sql")
        if kind == b"blob" and mode != b"120000" and (schema if only_schema else rust or schema):
            wanted.append((oid.decode(), name))
    cat = subprocess.Popen(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    for oid, name in wanted:
        cat.stdin.write(oid.encode() + b"\n")
        cat.stdin.flush()
        header = cat.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            continue
        data = cat.stdout.read(int(header[2]))
        cat.stdout.read(1)
        out = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(data)
    cat.stdin.close()
    cat.wait()
    with open(os.path.join(tmp, SCHEMA_MARKER), "w") as f:
        f.write("schema files extracted\n")
    if not only_schema:
        os.rename(tmp, dest)
    return dest


def rust_lines(tree):
    total = 0
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git")]
        for f in filenames:
            if f.endswith(".rs"):
                with open(os.path.join(dirpath, f), "rb") as fh:
                    total += fh.read().count(b"\n")
    return total


def lint_env():
    # A pinned toolchain that is not installed would stop `cargo metadata`.
    return dict(os.environ, RUSTUP_TOOLCHAIN=os.environ.get("RUSTUP_TOOLCHAIN", "stable"))


def extra_roots(binary, tree, labels):
    """The packages of labelled files that a run at the tree's root does not lint."""
    shown = subprocess.run(
        [binary, "--show-files", "."], cwd=tree, capture_output=True, text=True, env=lint_env()
    ).stdout
    linted = {os.path.normpath(line.strip()) for line in shown.splitlines() if line.strip().endswith(".rs")}
    roots = []
    for label in labels:
        if label["path"] in linted or not os.path.exists(os.path.join(tree, label["path"])):
            continue
        # The nearest directory with a manifest, or holding the `src` the file is in (a
        # template package whose manifest is not named `Cargo.toml`).
        d = os.path.dirname(label["path"])
        while d and not (
            os.path.exists(os.path.join(tree, d, "Cargo.toml"))
            or label["path"].startswith(os.path.join(d, "src") + "/")
        ):
            d = os.path.dirname(d)
        if d and d not in roots:
            roots.append(d)
    return roots


def lint(binary, tree, select, root="."):
    """Every finding in the tree (or in the package at `root` inside it), with paths relative to
    the tree."""
    cmd = [binary, "--format", "json", "--exit-zero", "--jobs", "2"]
    if select:
        cmd += ["--select", ",".join(select)]
    run = subprocess.run(cmd + [root], cwd=tree, capture_output=True, text=True, env=lint_env())
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        print(f"  {tree}: no report (exit {run.returncode}): {run.stderr.strip()[:300]}")
        return []
    out = []
    for f in report["findings"]:
        if f["rule"] in ("parse-error", "unused-suppression"):
            continue
        path = os.path.relpath(os.path.join(report["root"], f["file"]), tree)
        # The places a cross-function finding names in its notes (`f` runs `UPDATE ..` at
        # src/db.rs:146) point at the hazard too.
        via = []
        for note in f.get("notes") or []:
            at = note.rsplit(" at ", 1)
            if len(at) == 2 and ":" in at[1]:
                p, _, line = at[1].rpartition(":")
                if line.isdigit():
                    via.append((os.path.relpath(os.path.join(report["root"], p), tree), int(line)))
        out.append(
            {
                "rule": f["rule"],
                "path": path,
                "line": f["start"]["line"],
                "via": via,
                "function": f.get("function") or "-",
                "message": f["message"],
            }
        )
    return out


def matches(label, finding, via=True):
    """The finding reports the labelled place: at it, or (with `via`) through a call chain that
    ends there. A verdict is only inferred from a label the finding points at directly: each
    caller of a labelled helper is a finding of its own, to be read."""
    if label["rule"] != finding["rule"]:
        return False
    places = [(finding["path"], finding["line"])] + (finding.get("via", []) if via else [])
    # One range (`120-134`) or several (`41-47,90-96`).
    for part in label["lines"].split(","):
        lo, _, hi = part.strip().partition("-")
        lo, hi = int(lo), int(hi or lo)
        if any(p == label["path"] and lo - SLACK <= line <= hi + SLACK for p, line in places):
            return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "cargo-staleguard"))
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--work", default="/work/realcode-trees")
    ap.add_argument("--half", choices=list(HALVES) + ["all"], default="tuning")
    ap.add_argument("--rules", default="", help="comma-separated rule ids (default: every rule)")
    ap.add_argument("--repo", default="", help="only repositories whose name contains this")
    ap.add_argument("--misses", action="store_true", help="print every missed hazard")
    ap.add_argument("--findings", action="store_true", help="print every finding with its verdict")
    ap.add_argument("--untriaged", action="store_true", help="with --findings: only those with no verdict")
    ap.add_argument("--forms", action="store_true", help="verdicts per rule and message form (names in backticks blanked)")
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit(f"{args.bin}: build it first (`cargo build --release`)")
    select = [r for r in args.rules.split(",") if r]
    repos = [r for r in read_tsv("repos.tsv") if args.half in ("all", r["half"]) and args.repo in r["repo"]]
    labels = read_tsv("labels.tsv")
    verdicts = {(v["repo"], v["rule"], v["path"], v["function"]): v for v in read_tsv("verdicts.tsv")}
    os.makedirs(args.work, exist_ok=True)

    recall = collections.defaultdict(lambda: [0, 0])  # (half, rule) -> [found, hazards]
    clean = collections.defaultdict(lambda: [0, 0])  # (half, rule) -> [flagged, clean]
    verdict_counts = collections.defaultdict(collections.Counter)  # (half, rule) -> verdicts
    lines_by_half = collections.Counter()
    misses, listed = [], []
    for repo in repos:
        tree = checkout(repo, args.mirrors, args.work)
        if tree is None:
            continue
        half = repo["half"]
        lines_by_half[half] += rust_lines(tree)
        found = lint(args.bin, tree, select)
        # A labelled file outside the workspace at the root (a second workspace, a template
        # package the root excludes) is linted as its own package, as its users would.
        # (A package the root's run reaches in part, its unreached file aside, is linted again:
        # each finding is kept once.)
        for root in extra_roots(args.bin, tree, [l for l in labels if l["repo"] == repo["repo"]]):
            seen = {(f["rule"], f["path"], f["line"], f["message"]) for f in found}
            found += [
                f for f in lint(args.bin, tree, select, root) if (f["rule"], f["path"], f["line"], f["message"]) not in seen
            ]
        for label in labels:
            if label["repo"] != repo["repo"] or select and label["rule"] not in select:
                continue
            hit = any(matches(label, f) for f in found)
            if label["label"] == "hazard":
                recall[half, label["rule"]][1] += 1
                recall[half, label["rule"]][0] += hit
                if not hit:
                    misses.append((half, label))
            elif label["label"] == "clean":
                clean[half, label["rule"]][1] += 1
                clean[half, label["rule"]][0] += hit
        for f in found:
            key = (repo["repo"], f["rule"], f["path"], f["function"])
            v = verdicts.get(key)
            verdict = v["verdict"] if v else None
            if verdict is None:
                for label in labels:
                    if label["repo"] == repo["repo"] and matches(label, f, via=False):
                        verdict = {"hazard": "true", "clean": "false", "debatable": "debatable"}[label["label"]]
                        break
            verdict = verdict or "untriaged"
            verdict_counts[half, f["rule"]][verdict] += 1
            listed.append((half, repo["repo"], f, verdict, v["reason"] if v else ""))

    rules = sorted({r for _, r in list(recall) + list(clean) + list(verdict_counts)})
    for half in HALVES:
        if half not in lines_by_half:
            continue
        kloc = lines_by_half[half] / 100_000
        print(f"\n## {half}: {sum(1 for r in repos if r['half'] == half)} repositories, {lines_by_half[half]:,} lines")
        print("| rule | recall | clean flagged | findings | true | debatable | false | untriaged | precision | false / 100k lines |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for rule in rules:
            f, h = recall[half, rule]
            cf, cn = clean[half, rule]
            c = verdict_counts[half, rule]
            n = sum(c.values())
            prec = f"{c['true'] / n:.2f} ({(c['true'] + c['debatable']) / n:.2f})" if n else "-"
            rec = f"{f}/{h}" if h else "-"
            print(
                f"| `{rule}` | {rec} | {cf}/{cn} | {n} | {c['true']} | {c['debatable']} | {c['false']} | "
                f"{c['untriaged']} | {prec} | {c['false'] / kloc:.2f} |"
            )
        # Every rule together: recall over all hazards; precision over triaged findings only.
        found = sum(recall[half, r][0] for r in rules)
        hazards = sum(recall[half, r][1] for r in rules)
        flagged = sum(clean[half, r][0] for r in rules)
        cleans = sum(clean[half, r][1] for r in rules)
        c = sum((verdict_counts[half, r] for r in rules), collections.Counter())
        triaged = c["true"] + c["debatable"] + c["false"]
        prec = f"{c['true'] / triaged:.3f} ({(c['true'] + c['debatable']) / triaged:.3f})" if triaged else "-"
        print(
            f"| **all** | {found}/{hazards} | {flagged}/{cleans} | {sum(c.values())} | {c['true']} | {c['debatable']} | "
            f"{c['false']} | {c['untriaged']} | {prec} of triaged | {c['false'] / kloc:.2f} |"
        )
    def hidden(half):
        return half != "tuning" and half != args.half
    if args.misses:
        print("\n## missed hazards")
        for half, label in misses:
            if hidden(half):
                continue
            print(f"- [{half}] {label['repo']} {label['path']}:{label['lines']} `{label['function']}` {label['rule']}: {label['reason']}")
    if args.findings:
        print("\n## findings")
        for half, repo, f, verdict, reason in listed:
            if hidden(half) or args.untriaged and verdict != "untriaged":
                continue
            print(f"- [{half}] {repo}\t{f['rule']}\t{f['path']}\t{f['function']}\t{f['line']}\t{verdict}\t{reason or f['message']}\t{f['message'] if reason else ''}")
    if args.forms:
        print("\n## verdicts per message form")
        forms = {}
        for half, repo, f, verdict, reason in listed:
            if hidden(half):
                continue
            form = re.sub(r"`[^`]*`", "`_`", f["message"])
            counts = forms.setdefault((f["rule"], form), {"true": 0, "debatable": 0, "false": 0, "untriaged": 0})
            counts[verdict] = counts.get(verdict, 0) + 1
        print("| rule | form | true | debatable | false | untriaged |")
        print("|---|---|---|---|---|---|")
        for (rule, form), c in sorted(forms.items(), key=lambda kv: (kv[0][0], -sum(kv[1].values()))):
            print(f"| `{rule}` | {form} | {c['true']} | {c['debatable']} | {c['false']} | {c['untriaged']} |")


if __name__ == "__main__":
    main()
