#!/usr/bin/env bash
# Serving speed through the whole stack (HTTP, scheduler, layer actors) with bench/loadgen.py:
# the 0.4B Qwen2-shaped model, first one stream alone, then CONCURRENCY streams of ~PROMPT-token
# prompts generating GEN tokens each. The prefix cache is off: every prompt is computed.
#
#   bench/serve_load.sh [BUILD_DIR] [TYPE]      e.g. bench/serve_load.sh build/bench q8_0
#   env: CONCURRENCY (16), REQUESTS (4 x CONCURRENCY), PROMPT (200), GEN (64), PORT (18080)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18080 "$@"
conc=${CONCURRENCY:-16}
requests=${REQUESTS:-$((4 * conc))}

start_server "$build" "$model" "$port" "$dir/serve-load.log" --cache-mode off
trap stop_server EXIT

run() {  # label concurrency requests
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario independent --concurrency "$2" --requests "$3" \
    --prompt-tokens "${PROMPT:-200}" --max-tokens "${GEN:-64}" --label "$1" --out "$dir/$1.json" > /dev/null
  summarize "$dir/$1.json"
}

run single 1 4
run batched "$conc" "$requests"
