#!/usr/bin/env bash
# Serving speed through the whole stack (HTTP, scheduler, layer actors) with bench/loadgen.mjs:
# the 0.4B Qwen2-shaped model (synthesized by bench/engine.sh's recipe), first one stream alone,
# then CONCURRENCY streams of ~PROMPT-token prompts generating GEN tokens each.
#
#   bench/serve_load.sh [BUILD_DIR] [TYPE]      e.g. bench/serve_load.sh build/bench q8_0
#   env: CONCURRENCY (16), REQUESTS (4 x CONCURRENCY), PROMPT (200), GEN (64), PORT (18080)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench}
type=${2:-q8_0}
dir=${STRATA_BENCH_DIR:-$build/bench-models}
model=$dir/qwen2-0.4b-$type.gguf
port=${PORT:-18080}
conc=${CONCURRENCY:-16}
requests=${REQUESTS:-$((4 * conc))}
prompt=${PROMPT:-200}
gen=${GEN:-64}
mkdir -p "$dir"
[ -f "$model" ] || "$build/strata" synth --arch qwen2 --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 \
  --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --type "$type" --out "$model"
[ -d tests/e2e/node_modules ] || (cd tests/e2e && npm ci --silent)

log=$dir/serve-load.log
"$build/strata" serve --model "$model" --port "$port" --cache-mode off --log-level warn > "$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$port/health" > /dev/null || { echo "serve_load.sh: the server did not come up; see $log" >&2; exit 1; }

run() {  # label concurrency requests
  node bench/loadgen.mjs --url "http://127.0.0.1:$port" --scenario independent --concurrency "$2" --requests "$3" \
    --prompt-tokens "$prompt" --max-tokens "$gen" --label "$1" --out "$dir/$1.json" > /dev/null
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const f = (x) => (x === null ? "-" : x.toFixed(0));
    console.log(`${r.label.padEnd(10)} ${r.concurrency} streams, ${r.ok}/${r.requests} ok: ${r.generated_tok_s.toFixed(1)} generated tok/s, ` +
      `TTFT p50 ${f(r.ttft_ms.p50)} ms p90 ${f(r.ttft_ms.p90)} ms, inter-token p50 ${f(r.itl_ms.p50)} ms p90 ${f(r.itl_ms.p90)} ms, ` +
      `(1000 / inter-token p50 = ${r.itl_ms.p50 ? (1000 / r.itl_ms.p50).toFixed(1) : "-"} tok/s per stream), ` +
      `${(r.prompt_tokens / Math.max(1, r.ok)).toFixed(0)} prompt tokens per request` + (r.errors ? `, errors ${JSON.stringify(r.first_errors)}` : ""));
  ' "$dir/$1.json"
}

run single 1 4
run batched "$conc" "$requests"
