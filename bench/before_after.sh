#!/usr/bin/env bash
# Two builds side by side in one run, alternating them ROUNDS times so that a shared machine's load
# falls on both alike: bench/serve_load.sh (one stream, then 16) and the TTFT of a LONG-token prompt
# whose first LONG - 10 tokens are cached (bench/prefix_ttft.py), with the server's CPU time per
# cold and per warm request. Build the old commit in its own worktree first, e.g.
#   git worktree add --detach ../old OLD && cmake -S ../old -B ../old/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
#     && cmake --build ../old/build --target strata
#   bench/before_after.sh ../old/build build/dev
#   env: ROUNDS (2), LONG (3000), TYPE (q8_0), REQUESTS (32, per serve_load run)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
[ $# -eq 2 ] || { echo "usage: bench/before_after.sh OLD_BUILD NEW_BUILD" >&2; exit 2; }
model=$(bench_model "$2" "${TYPE:-q8_0}")
long=${LONG:-3000}
server=
trap stop_server EXIT
for round in $(seq 1 "${ROUNDS:-2}"); do
  for b in "$1" "$2"; do
    echo "== round $round: $b"
    # serve_load finds the model under the build's bench folder: share the one file.
    mkdir -p "$(bench_dir "$b")"
    ln -sf "$(realpath "$model")" "$(bench_dir "$b")/$(basename "$model")" 2>/dev/null || true
    REQUESTS=${REQUESTS:-32} PORT=18090 bench/serve_load.sh "$b" "${TYPE:-q8_0}" 2>&1 | grep -v "^loadgen: seed" | tail -2
    start_server "$b" "$model" 18091 "$(bench_dir "$2")/before-after.log" --cache-mode hot
    "$py" bench/prefix_ttft.py --url http://127.0.0.1:18091 --tokens "$long" --cached $((long - 10)) --rounds 4 \
      --server-pid "$server" 2>/dev/null | tail -1
    stop_server
  done
done
