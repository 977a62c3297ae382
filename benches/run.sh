#!/usr/bin/env bash
# The stage and whole-process benchmarks in one go: the machine, the stage benchmarks (divan), then the
# whole-process runs of the harness against the Python reference, with ratios. Results are
# printed and kept in target/bench-results/<date>/. See docs/benchmarks.md.
#
# Not run by CI: it takes 10 to 20 minutes, and its numbers mean something only on a quiet
# machine. The Python reference needs a venv with jsonschema, made once:
#
#   python3 -m venv /tmp/bench-venv
#   /tmp/bench-venv/bin/pip install -r benches/reference/requirements.txt
#
# Usage: benches/run.sh [whole-process options, e.g. --steps 100,1000,10000 --repeats 5]
# Environment: HARNESS_BENCH_PYTHON (default /tmp/bench-venv/bin/python),
#              STAGE_RUNS (how many times the divan suite runs, default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${HARNESS_BENCH_PYTHON:-/tmp/bench-venv/bin/python}
stage_runs=${STAGE_RUNS:-1}
out="target/bench-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"

{
    echo "## Machine"
    echo
    echo "- date (UTC): $(date -u '+%Y-%m-%d %H:%M')"
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc)"
    echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "- kernel: $(uname -r); clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
    echo "- $(rustc --version); $("$python" --version 2>&1 || echo 'no Python reference')"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' plus uncommitted changes')"
    else
        echo "- commit: not a git checkout (${BENCH_SOURCE:-source unknown})"
    fi
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/machine.md"

echo
echo "== cargo build --release (the harness binary and the plugins beside it)"
cargo build --release --quiet -p harness-cli -p calc -p fault

for i in $(seq "$stage_runs"); do
    echo
    echo "== stage benchmarks, run $i of $stage_runs: cargo bench -p harness-bench --bench stages"
    cargo bench --quiet -p harness-bench --bench stages 2>&1 | tee "$out/stages-$i.txt"
done

if [ "$stage_runs" -gt 1 ] && command -v python3 >/dev/null; then
    echo
    echo "== stage benchmarks, $stage_runs runs merged"
    python3 benches/summarize_stages.py "$out"/stages-*.txt | tee "$out/stages-summary.md"
fi

echo
echo "== whole process: cargo run --release -p harness-bench --bin whole-process -- $*"
python_args=()
if ! "$python" -c 'import jsonschema' 2>/dev/null; then
    echo "(the Python reference is skipped: $python cannot import jsonschema; see the set-up at the top of this script)"
    python_args=(--no-python)
fi
cargo run --release --quiet -p harness-bench --bin whole-process -- --python "$python" "${python_args[@]}" "$@" \
    | tee "$out/whole-process.md"

echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.md"
echo "results kept in $out"
