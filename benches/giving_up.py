#!/usr/bin/env python3
"""How long `harness run` takes to give up: a hung tool call at its --tool-timeout (in a
child and in-process), a run at its --max-seconds deadline, and the exit of a short run whose
OTLP collector is down. The end-to-end tests hold that a hung call is not waited for; this
measures how soon, on the machine at hand, without a threshold to flake.

Usage: python3 benches/giving_up.py target/release/harness [RUNS]

Build first: cargo build --release -p harness-cli -p calc -p fault (the plugins sit beside
the binary). Prints one Markdown row a case: the median wall time of RUNS (default 7) and
their range. Standard library only.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def script(work, name, calls):
    """A script of router replies, one call a line."""
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write("".join(json.dumps({"tool": tool, "arguments": args}) + "\n" for tool, args in calls))
    return path


def main():
    harness = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    work = tempfile.mkdtemp()
    # The user's trust store and plugin cache are left alone.
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "xdg"), HARNESS_PLUGIN_CACHE=os.path.join(work, "cache"))
    hang = script(work, "hang.jsonl", [("fault_sleep", {"ms": 20000}), ("fault_echo", {"value": 1}), ("finish", {"answer": 1})])
    deadline = script(work, "deadline.jsonl", [("fault_sleep", {"ms": 20000}), ("finish", {"answer": 1})])
    calc = script(work, "calc.jsonl", [("calculate", {"expression": "6*7"}), ("calculate", {"expression": "7*8"}), ("finish", {"answer": 42})])
    fault = ["run", "x", "-q", "--enable", "fault"]
    cases = {
        "a call hung for 20 s, --tool-timeout 1, process": fault + ["--isolation", "process", "--tool-timeout", "1", "--script", hang],
        "a call hung for 20 s, --tool-timeout 1, in-process": fault + ["--isolation", "in-process", "--tool-timeout", "1", "--script", hang],
        "a call hung for 20 s, --max-seconds 1, process": fault + ["--isolation", "process", "--max-seconds", "1", "--script", deadline],
        "3 steps, no --otlp": ["run", "x", "-q", "--script", calc],
        "3 steps, --otlp to a closed port": ["run", "x", "-q", "--otlp", "http://127.0.0.1:9", "--script", calc],
    }
    print("| case | median | range |\n|---|---|---|")
    for name, args in cases.items():
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run([harness] + args, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times.append((time.perf_counter() - started) * 1000)
        print(f"| {name} | {statistics.median(times):.0f} ms | {min(times):.0f} to {max(times):.0f} ms |")


if __name__ == "__main__":
    main()
