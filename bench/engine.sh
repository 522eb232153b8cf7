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
source bench/lib.sh
build=${1:-build/bench}
shift || true
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(q8_0 q4_k_m f16)
runs=${RUNS:-3}
threads=${THREADS:-$(nproc)}
dir=$(bench_dir "$build")
strata=$build/strata
[ -x "$strata" ] || { echo "engine.sh: $strata is missing; build first (cmake --build $build)" >&2; exit 1; }

for t in "${types[@]}"; do
  m=$(bench_model "$build" "$t")
  sync
  engine_runs "$strata" "$m" "$runs" "$threads" > "$dir/$t.jsonl"
  "$py" -c '
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]).read().strip().split("\n")]
med = lambda k: sorted(r[k] for r in rows)[len(rows) // 2]
r = rows[0]
print("%-7s %s, %s threads, %d runs (medians): " % (sys.argv[2], r["simd"], r["threads"], len(rows))
      + "prefill %.1f tok/s, decode %.1f tok/s, " % (med("prefill_tok_s"), med("decode_tok_s"))
      + "bandwidth %.2f GB/s, read/token %.1f MB (KV %.1f), " % (med("bandwidth_gb_s"), r["bytes_per_token"] / 1e6, r["kv_bytes_per_token"] / 1e6)
      + "decode at %.0f%% of the bound (%.1f tok/s), " % (100 * med("bandwidth_share"), med("decode_bound_tok_s"))
      + "open %.1f ms for %.2f GB" % (1000 * med("open_s"), r["file_bytes"] / 1e9))
  ' "$dir/$t.jsonl" "$t"
done
