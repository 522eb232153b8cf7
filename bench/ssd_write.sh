#!/usr/bin/env bash
# Decode speed while the SSD tier writes: the same load (16 streams of fresh 512-token prompts,
# 128 tokens each) against a server in hot mode and one in tiered mode, which writes every block
# as it fills. Prints both runs and the ratio of their decode speeds (target: within 5%).
#
#   bench/ssd_write.sh [BUILD] [TYPE]      (defaults: build/bench q8_0)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18084 "$@"
cache=$(mktemp -d "${TMPDIR:-/tmp}/strata-ssd-write.XXXXXX")
trap 'stop_server; rm -rf "$cache"' EXIT

run() {  # mode
  start_server "$build" "$model" "$port" "$dir/ssd-write-$1.log" --cache-mode "$1" --cache-dir "$cache"
  node bench/loadgen.mjs --url "http://127.0.0.1:$port" --scenario independent --concurrency 16 --requests 48 \
    --prompt-tokens 512 --max-tokens 128 --label "$1" --out "$dir/ssd-write-$1.json" > /dev/null
  summarize "$dir/ssd-write-$1.json"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^strata_ssd_(writes|write_bytes|dropped_writes)_total' || true
  stop_server
}
run hot
run tiered
node -e '
  const fs = require("fs");
  const [h, t] = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
  console.log(`inter-token p50: hot ${h.itl_ms.p50.toFixed(1)} ms, tiered ${t.itl_ms.p50.toFixed(1)} ms; ` +
    `decode speed tiered / hot = ${(h.itl_ms.p50 / t.itl_ms.p50).toFixed(3)}; ` +
    `generated tok/s tiered / hot = ${(t.generated_tok_s / h.generated_tok_s).toFixed(3)}`);
' "$dir/ssd-write-hot.json" "$dir/ssd-write-tiered.json"
