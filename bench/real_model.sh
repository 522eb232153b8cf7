#!/usr/bin/env bash
# A real model end to end: the default model SmolLM2-135M-Instruct (or another name that
# scripts/fetch-model.sh knows), first through `strata bench` (prefill PROMPT and decode GEN tokens,
# RUNS times, medians), then served: one stream alone, then CONCURRENCY streams of ~200-token
# prompts generating 64 tokens each (bench/loadgen.py; prefix cache off, so every prompt is
# computed).
#
#   bench/real_model.sh [BUILD_DIR] [MODEL_NAME]     e.g. bench/real_model.sh build/bench smollm2
#   env: RUNS (3), THREADS (all cores), PROMPT (512), GEN (128), CONCURRENCY (16), PORT (18086)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
name=${2:-smollm2}
runs=${RUNS:-3}
threads=${THREADS:-$(nproc)}
port=${PORT:-18086}
conc=${CONCURRENCY:-16}
[ -x "$build/strata" ] || { echo "real_model.sh: $build/strata is missing; build first (cmake --build $build)" >&2; exit 1; }
model=$(scripts/fetch-model.sh "$name")
dir=$(bench_dir "$build")

engine_runs "$build/strata" "$model" "$runs" "$threads" > "$dir/$name-engine.jsonl"
"$py" -c '
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]).read().strip().split("\n")]
med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]
r = rows[0]
print("%s, %s, %s threads, %d runs (medians): prefill %d: %.1f tok/s, decode %d: %.1f tok/s, "
      "decode at %.0f%% of the bandwidth bound (%.2f GB/s, %.1f MB a token)"
      % (sys.argv[2], r["simd"], r["threads"], len(rows), r["prompt_tokens"], med("prefill_tok_s"),
         r["gen_tokens"], med("decode_tok_s"), 100 * med("bandwidth_share"), med("bandwidth_gb_s"),
         r["bytes_per_token"] / 1e6))
' "$dir/$name-engine.jsonl" "$(basename "$model")"

start_server "$build" "$model" "$port" "$dir/$name-serve.log" --cache-mode off
trap stop_server EXIT
run() {  # label concurrency requests
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario independent --concurrency "$2" --requests "$3" \
    --prompt-tokens 200 --max-tokens 64 --label "$1" --out "$dir/$name-$1.json" 2> /dev/null > /dev/null
  summarize "$dir/$name-$1.json"
}
run single 1 4
run batched "$conc" $((4 * conc))
