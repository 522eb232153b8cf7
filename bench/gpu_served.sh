#!/usr/bin/env bash
# Many concurrent streams served from the GPU (issue 29's goal: 64 streams with TTFT p50 <= 500 ms
# at 1k prompt tokens): `strata serve --device cuda` on MODEL under bench/loadgen.py (independent
# prompts, every stream sending its next request as soon as its last one ends), once per scheduler
# token budget of STRATA_SERVED_BUDGETS; with STRATA_LLAMA_SERVER (a llama-server built with CUDA),
# llama-server on the same file under the same load (`-np` streams, flash attention, every layer
# on the GPU). Writes OUT/served.json: each run's loadgen JSON (TTFT, also without the opening
# burst of all streams at once; inter-token gaps, tok/s) with its total throughput, prompt and
# generated tokens over the wall time, added. loadgen's prompts are words; the first run sends one
# request to learn how many tokens a word makes in the model's vocabulary, and every run then
# sends as many words as make STRATA_SERVED_PROMPT tokens.
#
#   STRATA_BIN=strata bench/gpu_served.sh MODEL OUT
#   STRATA_SERVED_STREAMS (64) STRATA_SERVED_PROMPT (1024) STRATA_SERVED_GEN (128)
#   STRATA_SERVED_REQUESTS (4 x streams) STRATA_SERVED_BUDGETS ("512 2048": strata's token_budget)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
model=${1:?MODEL}
out=${2:?OUT}
bin=${STRATA_BIN:?a strata built with -DSTRATA_CUDA=ON}
streams=${STRATA_SERVED_STREAMS:-64}
prompt=${STRATA_SERVED_PROMPT:-1024}
gen=${STRATA_SERVED_GEN:-128}
requests=${STRATA_SERVED_REQUESTS:-$((4 * streams))}
work=${STRATA_GPU_WORK:-/tmp/strata-gpu}
port=18091
mkdir -p "$work" "$out"
rc=0
runs=()

wait_ready() {  # url pid
  for _ in $(seq 600); do
    kill -0 "$2" 2>/dev/null || return 1
    python3 -c "import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1] + '/health', timeout=2).status != 200)" "$1" \
      >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

words=
calibrate() {  # the words that make $prompt tokens, from one request of $prompt words
  [ -n "$words" ] && return
  python3 bench/loadgen.py --url "http://127.0.0.1:$port" --concurrency 1 --requests 1 --prompt-tokens "$prompt" \
    --max-tokens 1 --seed 99 --out "$work/calibrate.json" >/dev/null 2>&1
  words=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(max(1, round(int(sys.argv[2]) ** 2 / r['prompt_tokens'])))" \
    "$work/calibrate.json" "$prompt") || words=$prompt
  echo "$prompt words made $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_tokens'])" "$work/calibrate.json" 2>/dev/null) tokens: $words words a prompt"
}

load() {  # label
  calibrate
  echo "== $1: $streams streams, $requests requests of $prompt ($words words) + $gen tokens"
  PYTHONUNBUFFERED=1 timeout 400 python3 bench/loadgen.py --url "http://127.0.0.1:$port" --concurrency "$streams" \
    --requests "$requests" --scenario independent --prompt-tokens "$words" --max-tokens "$gen" --timeout-s 380 \
    --connections per-request --label "$1" --out "$work/served-$1.json" >/dev/null 2>"$out/loadgen-$1.log" || rc=1
  python3 - "$work/served-$1.json" <<'PY' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))
r["total_tok_s"] = (r.get("prompt_tokens", 0) + r.get("generated_tokens", 0)) / r["wall_s"] if r.get("wall_s") else None
json.dump(r, open(sys.argv[1], "w"), indent=1)
t = r.get("ttft_ms", {})
a = r.get("ttft_ms_after_first", {})
print(f"{r.get('label')}: ok {r.get('ok')}/{r.get('requests')}, TTFT p50 {t.get('p50'):.0f} ms p90 {t.get('p90'):.0f} ms "
      f"(after each stream's first request: p50 {a.get('p50') or 0:.0f} ms p90 {a.get('p90') or 0:.0f} ms), "
      f"generated {r.get('generated_tok_s'):.0f} tok/s, total {r['total_tok_s']:.0f} tok/s, "
      f"prompt tokens {r.get('prompt_tokens')}, wall {r.get('wall_s'):.1f} s")
PY
  runs+=("$work/served-$1.json")
}

kv_gib=$(((streams * (prompt + gen + 64) * 128 + (1 << 20) - 1) / (1 << 20) + 1))  # KiB a token of the 8B shape
for budget in ${STRATA_SERVED_BUDGETS:-512 2048}; do
  cat >"$work/served-$budget.toml" <<EOF
[scheduler]
token_budget = $budget
max_running = $streams
max_queued = $((requests + streams))
[kv]
memory = "${kv_gib}GiB"
EOF
  "$bin" serve --config "$work/served-$budget.toml" --model "$model" --device cuda --host 127.0.0.1 --port "$port" \
    --cache-mode off >"$out/serve-$budget.log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" "$pid"; then
    load "strata-budget-$budget"
  else
    echo "strata serve did not start"; tail -5 "$out/serve-$budget.log"; rc=1
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
done

if [ -n "${STRATA_LLAMA_SERVER:-}" ]; then
  ctx=$((streams * (prompt + gen + 128)))
  "$STRATA_LLAMA_SERVER" -m "$model" -ngl 99 -fa on -np "$streams" -c "$ctx" -b 2048 -ub 512 --host 127.0.0.1 --port "$port" \
    --no-webui >"$out/llama-server.log" 2>&1 &
  pid=$!
  if wait_ready "http://127.0.0.1:$port" "$pid"; then
    load llama-server
  else
    echo "llama-server did not start"; tail -5 "$out/llama-server.log"; rc=1
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
fi

python3 - "$out/served.json" "${runs[@]}" <<'PY'
import json, os, sys
result = {}
for p in sys.argv[2:]:
    try:
        result[os.path.basename(p)[7:-5]] = json.load(open(p))
    except (OSError, ValueError) as e:
        result[os.path.basename(p)] = {"error": str(e)}
json.dump(result, open(sys.argv[1], "w"), indent=1)
PY
exit $rc
