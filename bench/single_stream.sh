#!/usr/bin/env bash
# One stream through the whole server against `strata bench`'s decode, in pairs taken seconds
# apart (this machine's memory bandwidth drifts by tens of percent within minutes): a server runs
# throughout (prefix cache off, idle between requests), and each round runs `strata bench`
# (PROMPT-token prompt, GEN tokens) and then one chat request of the same sizes through the
# server, and prints the two decode speeds and their ratio; the last line gives the median ratio.
# The server's figure is the request's tokens after the first over the time from its first
# content to its last.
#
#   bench/single_stream.sh [BUILD_DIR] [TYPE]      e.g. bench/single_stream.sh build/bench q8_0
#   env: ROUNDS (7), PROMPT (200), GEN (128), PORT (18085)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18085 "$@"
rounds=${ROUNDS:-7}
prompt=${PROMPT:-200}
gen=${GEN:-128}
start_server "$build" "$model" "$port" "$dir/single-stream.log" --cache-mode off
trap stop_server EXIT

ratios=()
for round in $(seq 1 "$rounds"); do
  engine=$("$build/strata" bench --model "$model" --prompt "$prompt" --gen "$gen" --json 2> /dev/null |
    "$py" -c 'import json, sys; print("%.1f" % json.load(sys.stdin)["decode_tok_s"])')
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario independent --concurrency 1 --requests 1 \
    --prompt-tokens "$prompt" --max-tokens "$gen" --out "$dir/single-stream.json" > /dev/null
  served=$("$py" -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["decode_tok_s"]["p50"])' \
    "$dir/single-stream.json")
  ratio=$("$py" -c 'import sys; print("%.3f" % (float(sys.argv[1]) / float(sys.argv[2])))' "$served" "$engine")
  ratios+=("$ratio")
  echo "round $round: strata bench decode $engine tok/s, one served stream $served tok/s: ratio $ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "median served/bench decode ratio over $rounds rounds: $median"
