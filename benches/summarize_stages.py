#!/usr/bin/env python3
"""Merges several runs of the divan stage benchmarks into one Markdown table.

Usage: python3 benches/summarize_stages.py target/bench-results/<date>/stages-*.txt

For each benchmark: the median of the runs' medians, the range of those medians (how much
the whole suite moved between runs), and the fastest and slowest single sample over all
runs. Standard library only; benches/run.sh calls it when STAGE_RUNS > 1.
"""

import re
import statistics
import sys

UNITS = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
TIME = re.compile(r"([0-9.]+)\s*(ps|ns|µs|us|ms|s)\b")


def parse(path):
    """{benchmark path: (fastest, slowest, median)} in nanoseconds, from divan's tree output."""
    rows, stack = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            # The tree's own "│" is the same character as the column separator: take the
            # label with a regex first, then split the rest into columns.
            m = re.match(r"^([│ ]*)[├╰]─ (\S+)(.*)$", line.rstrip("\n"))
            if not m:
                continue  # the header, or a throughput line under a benchmark
            depth = len(m.group(1)) // 3
            stack = stack[:depth] + [m.group(2)]
            cells = m.group(3).split("│")
            times = [TIME.search(c) for c in cells[:3]]
            if len(cells) >= 3 and all(times):
                fastest, slowest, median = (float(t.group(1)) * UNITS[t.group(2)] for t in times)
                rows["/".join(stack)] = (fastest, slowest, median)
    return rows


def show(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def main(paths):
    runs = [parse(p) for p in paths]
    names = [n for n in runs[0]]
    print(f"| benchmark | median of {len(runs)} runs' medians | range of the medians | fastest – slowest sample |")
    print("|---|---|---|---|")
    for name in names:
        found = [r[name] for r in runs if name in r]
        medians = [m for _, _, m in found]
        fastest = min(f for f, _, _ in found)
        slowest = max(s for _, s, _ in found)
        print(
            f"| {name} | {show(statistics.median(medians))} | {show(min(medians))} – {show(max(medians))} "
            f"| {show(fastest)} – {show(slowest)} |"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
