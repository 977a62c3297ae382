#!/bin/sh
# The harness in each router mode and pydantic-ai, on one llama-server, one model, one tasks
# file, one after the other; prints right/total for each (docs/benchmarks.md, "Answers right").
#
#   benches/eval/compare.sh MODEL.gguf NAME [TASKS]
#
# Environment: HARNESS_LLAMA_SERVER (from `cargo xtask setup llama`; `cargo xtask env llama`
# prints it), HARNESS (default target/debug/harness), PYTHON (a venv with
# 'pydantic-ai-slim[openai,mcp]'; default /tmp/eval/venv/bin/python), PORT (default 8090),
# OUT (default /tmp/eval/NAME), MODES (default "auto prompt native constrained").
set -eu
model=$1
name=$2
tasks=${3:-evals/everyday.jsonl}
server=${HARNESS_LLAMA_SERVER:?run cargo xtask setup llama, then export what cargo xtask env llama prints}
harness=${HARNESS:-target/debug/harness}
python=${PYTHON:-/tmp/eval/venv/bin/python}
port=${PORT:-8090}
out=${OUT:-/tmp/eval/$name}
modes=${MODES:-auto prompt native constrained}
url=http://127.0.0.1:$port/v1
mkdir -p "$out"

# A server already on the port would answer the health check below while ours fails to bind,
# and every answer would be scored against the wrong model, or none.
if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
    echo "compare.sh: port $port already has a server: stop it, or set PORT to a free port" >&2
    exit 1
fi

# One slot, one thread (two spinning threads on two busy cores are about 30 times slower),
# greedy decoding with a fixed seed; --no-repack as in tests/e2e/llama.rs.
"$server" -m "$model" --host 127.0.0.1 --port "$port" -c 4096 -np 1 -t 1 -tb 1 --temp 0 --seed 1 \
    --no-repack >"$out/server.log" 2>&1 &
pid=$!
trap 'kill "$pid"' EXIT
until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
    kill -0 "$pid" || { cat "$out/server.log"; exit 1; }
    sleep 1
done

# pydantic-ai first: every comparison needs it (the modes can follow, or resume later).
if [ ! -s "$out/report-pydantic.json" ]; then
    "$python" benches/eval/pydantic_ai.py "$tasks" --out "$out/answers-pydantic.jsonl" --base-url "$url" \
        --harness "$harness" --enable calc --enable chem 2>"$out/pydantic.log"
    "$harness" eval "$tasks" --answers "$out/answers-pydantic.jsonl" --json >"$out/report-pydantic.json"
fi
# Each mode's results are kept: run the script again to resume where it stopped.
for mode in $modes; do
    "$harness" eval "$tasks" --provider llamacpp --base-url "$url" --router-mode "$mode" \
        --enable calc --enable chem --out "$out/results-$mode.jsonl" --traces "$out/traces-$mode" \
        --json -q >"$out/report-$mode.json"
done

for report in "$out"/report-*.json; do
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
steps = {g["name"]: "%d/%d" % (g["right"], g["total"]) for g in r["by_steps"]}
print("%-12s right %d/%d  one-step %s  two-step %s  three-step %s  steps %d  tokens %d  time %.0fs" % (
    sys.argv[1].rsplit("report-", 1)[1][:-5], r["right"], r["total"], steps.get("1", "-"),
    steps.get("2", "-"), steps.get("3", "-"), r["steps"], r["tokens"], r["seconds"]))' "$report"
done
