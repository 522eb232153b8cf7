#!/usr/bin/env bash
# Decode speed while the SSD tier writes: the same load (16 streams of fresh 512-token prompts,
# 128 tokens each) against a server in hot mode and one in tiered mode, which writes every block
# as it fills. Prints every run and the ratio of the median decode speeds (target: within 5%).
#
#   bench/ssd_write.sh [BUILD] [TYPE]      (defaults: build/bench q8_0; ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18084 "$@"
cache=$(mktemp -d "${TMPDIR:-/tmp}/strata-ssd-write.XXXXXX")
trap 'stop_server; rm -rf "$cache"' EXIT

run() {  # mode round
  rm -rf "$cache" && mkdir -p "$cache"  # every tiered run starts empty, so that every block is written
  start_server "$build" "$model" "$port" "$dir/ssd-write-$1.log" --cache-mode "$1" --cache-dir "$cache"
  node bench/loadgen.mjs --url "http://127.0.0.1:$port" --scenario independent --concurrency 16 --requests 48 \
    --prompt-tokens 512 --max-tokens 128 --label "$1" --out "$dir/ssd-write-$1-$2.json" > /dev/null
  summarize "$dir/ssd-write-$1-$2.json"
  curl -s "http://127.0.0.1:$port/metrics" | grep -E '^strata_ssd_(writes|write_bytes|dropped_writes)_total' || true
  stop_server
}
# The modes alternate, ROUNDS times each, and the medians are compared: on a shared machine the
# speed drifts over minutes, and two runs one after the other would compare the drift.
rounds=${ROUNDS:-3}
for r in $(seq 1 "$rounds"); do
  run hot "$r"
  run tiered "$r"
done
node -e '
  const fs = require("fs");
  const [dir, rounds] = [process.argv[1], Number(process.argv[2])];
  const load = (mode) => Array.from({ length: rounds }, (_, i) => JSON.parse(fs.readFileSync(`${dir}/ssd-write-${mode}-${i + 1}.json`, "utf8")));
  const med = (x) => [...x].sort((a, b) => a - b)[Math.floor(x.length / 2)];
  const [h, t] = [load("hot"), load("tiered")];
  const itl = (runs) => med(runs.map((r) => r.itl_ms.p50));
  const tps = (runs) => med(runs.map((r) => r.generated_tok_s));
  console.log(`${rounds} rounds, medians: inter-token p50 hot ${itl(h).toFixed(1)} ms, tiered ${itl(t).toFixed(1)} ms; ` +
    `decode speed tiered / hot = ${(itl(h) / itl(t)).toFixed(3)}; generated tok/s tiered / hot = ${(tps(t) / tps(h)).toFixed(3)} ` +
    `(per round: ${h.map((r, i) => (r.itl_ms.p50 / t[i].itl_ms.p50).toFixed(3)).join(", ")})`);
' "$dir" "$rounds"
