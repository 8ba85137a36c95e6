#!/usr/bin/env python3
"""Dogfooding: lint a bundled example with the freshly built binary and fail when a finding the
example marks (`//~ rule` on the finding's line, `//~^ rule` one line below it, `//~^^ rule` two
below...; several rules separated by commas or spaces) is missing from the report, or when it reports a finding the example does not mark (the example's
guarded versions are its look-alikes: a finding there is a false alarm in our own showcase).

usage: dogfood.py BINARY EXAMPLE_DIR   (run from the repository root; standard library only)
"""
import json
import os
import re
import subprocess
import sys

MARKER = re.compile(r"//~(\^*)(.*)$")


def expected_findings(example):
    expected = set()
    for dirpath, dirs, files in os.walk(example):
        dirs[:] = sorted(d for d in dirs if d != "target" and not d.startswith("."))
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = MARKER.search(line)
                    if m:
                        for rule in re.split(r"[,\s]+", m.group(2).strip()):
                            if rule:
                                expected.add((rel, number - len(m.group(1)), rule))
    return expected


def main():
    binary, example = sys.argv[1], sys.argv[2]
    expected = expected_findings(example)
    run = subprocess.run([binary, "--format", "json", example], capture_output=True, text=True)
    if run.returncode not in (0, 1):
        sys.stderr.write(run.stderr)
        print(f"dogfood: `{binary} {example}` exited {run.returncode} (tool error)")
        return 1
    report = json.loads(run.stdout)
    actual = {(f["file"], f["start"]["line"], f["rule"]) for f in report["findings"]}
    missing = sorted(expected - actual)
    extra = sorted(actual - expected)
    for file, line, rule in missing:
        print(f"dogfood: missing {file}:{line}: {rule}")
    for file, line, rule in extra:
        print(f"dogfood: unexpected {file}:{line}: {rule}")
    if not expected:
        print(f"dogfood: {example} marks no expected findings (`//~ rule`); nothing would be checked")
        return 1
    if missing:
        print(f"dogfood: {len(missing)} of {len(expected)} expected findings missing in {example}")
        return 1
    if extra:
        print(f"dogfood: {len(extra)} findings in {example} that it does not mark")
        return 1
    print(f"dogfood: all {len(expected)} expected findings reported in {example}, and no other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
