#!/usr/bin/env bash
# What the prefix cache saves, through the whole stack: the same workloads with cache.mode off
# (every prompt computed) and hot (cached prefixes reused), on the 0.4B Qwen2-shaped model.
#   documents   USERS users each own a ~DOC-token document and ask TURNS short questions about it
#               in turn (the first question of each is cold in both modes)
#   multi-turn  CONCURRENCY chats whose history grows by their own answers
# then, with the cache on, the TTFT of a LONG-token prompt whose first LONG - 10 tokens are cached
# against the same length cold (bench/prefix_ttft.py).
#
#   bench/prefix_cache.sh [BUILD_DIR] [TYPE]    e.g. bench/prefix_cache.sh build/bench q8_0
#   env: USERS (4), TURNS (4), DOC (1500), CONCURRENCY (4), GEN (16), LONG (3000), PORT (18081)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18081 "$@"
users=${USERS:-4}
turns=${TURNS:-4}
conc=${CONCURRENCY:-4}
trap stop_server EXIT

for mode in off hot; do
  start_server "$build" "$model" "$port" "$dir/prefix-$mode.log" --cache-mode "$mode"
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario documents --users "$users" --concurrency "$users" \
    --requests $((users * turns)) --prompt-tokens "${DOC:-1500}" --max-tokens "${GEN:-16}" --label "docs-$mode" \
    --out "$dir/docs-$mode.json" > /dev/null
  summarize "$dir/docs-$mode.json"
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" --scenario multi-turn --concurrency "$conc" \
    --requests $((conc * turns)) --prompt-tokens 300 --max-tokens "${GEN:-16}" --label "chat-$mode" \
    --out "$dir/chat-$mode.json" > /dev/null
  summarize "$dir/chat-$mode.json"
  if [ "$mode" = hot ]; then
    long=${LONG:-3000}
    "$py" bench/prefix_ttft.py --url "http://127.0.0.1:$port" --tokens "$long" --cached $((long - 10)) --rounds 3
  fi
  stop_server
done
