#!/usr/bin/env bash
# Engine speed on the 0.4B Qwen2-shaped model: synthesizes it at each weight type (once, into
# $STRATA_BENCH_DIR), runs `strata bench` RUNS times per type and prints the medians of prefill and
# decode tokens/s, the measured read bandwidth, decode's share of the bandwidth bound, and the
# time to open the file.
#
#   bench/engine.sh [BUILD_DIR] [TYPES...]      e.g. bench/engine.sh build/bench q8_0 q4_k_m f16
#   env: RUNS (default 3), THREADS (default: all cores), PROMPT (512), GEN (128)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/bench}
shift || true
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q8_0 q4_k_m f16)
runs=${RUNS:-3}
threads=${THREADS:-$(nproc)}
dir=${STRATA_BENCH_DIR:-$build/bench-models}
mkdir -p "$dir"
strata=$build/strata
[ -x "$strata" ] || { echo "engine.sh: $strata is missing; build first (cmake --build $build)" >&2; exit 1; }

for t in "${types[@]}"; do
  m=$dir/qwen2-0.4b-$t.gguf
  if [ ! -f "$m" ]; then
    "$strata" synth --arch qwen2 --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 \
      --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --type "$t" --out "$m"
  fi
  sync
  for ((i = 0; i < runs; i++)); do
    "$strata" bench --model "$m" --prompt "${PROMPT:-512}" --gen "${GEN:-128}" --threads "$threads" --json
  done > "$dir/$t.jsonl"
  node -e '
    const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
    const med = (k) => { const v = rows.map((r) => r[k]).sort((a, b) => a - b); return v[Math.floor(v.length / 2)]; };
    const r = rows[0];
    console.log(`${process.argv[2].padEnd(7)} ${r.simd}, ${r.threads} threads, ${rows.length} runs (medians): ` +
      `prefill ${med("prefill_tok_s").toFixed(1)} tok/s, decode ${med("decode_tok_s").toFixed(1)} tok/s, ` +
      `bandwidth ${med("bandwidth_gb_s").toFixed(2)} GB/s, read/token ${(r.bytes_per_token / 1e6).toFixed(1)} MB (KV ${(r.kv_bytes_per_token / 1e6).toFixed(1)}), ` +
      `decode at ${(100 * med("bandwidth_share")).toFixed(0)}% of the bound (${med("decode_bound_tok_s").toFixed(1)} tok/s), ` +
      `open ${(1000 * med("open_s")).toFixed(1)} ms for ${(r.file_bytes / 1e9).toFixed(2)} GB`);
  ' "$dir/$t.jsonl" "$t"
done
