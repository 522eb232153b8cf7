#!/usr/bin/env bash
# TTFT of a 3,000-token prompt whose prefix was cached before a kill -9 and a restart, against the
# same prompt cold. The server runs in tiered mode on a fresh directory; each round's prompt is
# sent cold, the server is killed with SIGKILL (after a pause for the writes to land), the page
# cache is dropped when we may (so the restore really reads the disk), and a restarted server
# gets a prompt sharing the first 2,990 tokens.
#
#   bench/ssd_restart.sh [BUILD] [TYPE]      (defaults: build/bench q8_0; ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
model=$(bench_model "$build" "${2:-q8_0}")
dir=$(dirname "$model")
port=${PORT:-18083}
rounds=${ROUNDS:-3}
cache=$(mktemp -d "${TMPDIR:-/tmp}/strata-ssd-restart.XXXXXX")
trap 'stop_server; rm -rf "$cache"' EXIT
conf="$cache/tiered.toml"
printf '[cache]\nmode = "tiered"\n[model]\nctx = 4096\n' > "$conf"

cold=() warm=()
for r in $(seq 1 "$rounds"); do
  start_server "$build" "$model" "$port" "$dir/ssd-restart.log" --config "$conf" --cache-dir "$cache"
  out=$(node bench/prefix_ttft.mjs --url "http://127.0.0.1:$port" --tokens 3000 --cached 2990 --rounds 1 --seed "$r" --phase cold | tail -1)
  cold+=("$(node -e 'console.log(JSON.parse(process.argv[1]).cold_ttft_ms)' "$out")")
  sleep 2
  kill -9 "$server"
  wait "$server" 2>/dev/null || true
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(page cache not dropped: not root)"
  start_server "$build" "$model" "$port" "$dir/ssd-restart.log" --config "$conf" --cache-dir "$cache"
  out=$(node bench/prefix_ttft.mjs --url "http://127.0.0.1:$port" --tokens 3000 --cached 2990 --rounds 1 --seed "$r" --phase warm | tail -1)
  warm+=("$(node -e 'console.log(JSON.parse(process.argv[1]).warm_ttft_ms)' "$out")")
  echo "round $r: cold ${cold[-1]} ms, after kill -9 and restart $(node -e 'console.log(JSON.parse(process.argv[1]).warm_ttft_ms.toFixed(1), "ms, cached", JSON.parse(process.argv[1]).cached_tokens)' "$out")"
  stop_server
done
node -e '
  const [c, w] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2])];
  const med = (x) => [...x].sort((a, b) => a - b)[Math.floor(x.length / 2)];
  console.log(`3000-token prompt: cold TTFT p50 ${med(c).toFixed(0)} ms; prefix restored from the SSD after kill -9: ` +
    `${med(w).toFixed(1)} ms = ${(100 * med(w) / med(c)).toFixed(2)}% of cold (target: at most 2%)`);
' "[$(IFS=,; echo "${cold[*]}")]" "[$(IFS=,; echo "${warm[*]}")]"
