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
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario independent --concurrency 16 --requests 48 \
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
"$py" -c '
import json, sys
dir, rounds = sys.argv[1], int(sys.argv[2])
load = lambda mode: [json.load(open("%s/ssd-write-%s-%d.json" % (dir, mode, i + 1))) for i in range(rounds)]
med = lambda x: sorted(x)[len(x) // 2]
h, t = load("hot"), load("tiered")
itl = lambda runs: med([r["itl_ms"]["p50"] for r in runs])
tps = lambda runs: med([r["generated_tok_s"] for r in runs])
per_round = ", ".join("%.3f" % (a["itl_ms"]["p50"] / b["itl_ms"]["p50"]) for a, b in zip(h, t))
print("%d rounds, medians: inter-token p50 hot %.1f ms, tiered %.1f ms; " % (rounds, itl(h), itl(t))
      + "decode speed tiered / hot = %.3f; generated tok/s tiered / hot = %.3f " % (itl(h) / itl(t), tps(t) / tps(h))
      + "(per round: %s)" % per_round)
' "$dir" "$rounds"
