#!/usr/bin/env bash
# TTFT of a 3,000-token prompt whose prefix was cached before a kill -9 and a restart, against the
# same prompt cold. The server runs in tiered mode on a fresh directory; each round's prompt is
# sent cold, the server is killed with SIGKILL (after a pause for the writes to land), the page
# cache is dropped when we may, and the first request to the restarted server is a prompt sharing
# the first 2,990 tokens.
#
#   bench/ssd_restart.sh [BUILD] [TYPE]      (defaults: build/bench q8_0; ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_setup 18083 "$@"
rounds=${ROUNDS:-3}
cache=$(mktemp -d "${TMPDIR:-/tmp}/strata-ssd-restart.XXXXXX")
trap 'stop_server; rm -rf "$cache"' EXIT
conf="$cache/tiered.toml"
printf '[cache]\nmode = "tiered"\n[model]\nctx = 4096\n' > "$conf"

# The prompts as request bodies (token ids; the warm one shares the first 2,990 tokens), timed with
# curl: a non-streamed request for one token ends at the first token, and curl adds next to nothing.
make_bodies() {  # seed
  node -e '
    let s = Number(process.argv[1]) >>> 0 || 1;
    const rand = () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
    const tokens = (k) => Array.from({ length: k }, () => 300 + (rand() % 49700));
    const a = tokens(3000), b = [...a.slice(0, 2990), ...tokens(10)];
    const body = (p) => JSON.stringify({ model: "m", prompt: p, max_tokens: 1, temperature: 0, ignore_eos: true });
    require("fs").writeFileSync(process.argv[2] + "/cold.json", body(a));
    require("fs").writeFileSync(process.argv[2] + "/warm.json", body(b));
  ' "$1" "$cache"
}
ttft() {  # body file: prints milliseconds and cached tokens
  curl -s -o "$cache/out.json" -w '%{time_total}' -H 'content-type: application/json' --data-binary @"$1" \
    "http://127.0.0.1:$port/v1/completions" | awk '{ printf "%.1f", $1 * 1000 }'
  echo " $(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).usage.prompt_tokens_details.cached_tokens)' "$cache/out.json")"
}

cold=() warm=()
for r in $(seq 1 "$rounds"); do
  make_bodies "$r"
  start_server "$build" "$model" "$port" "$dir/ssd-restart.log" --config "$conf" --cache-dir "$cache"
  read -r c _ <<< "$(ttft "$cache/cold.json")"
  cold+=("$c")
  sleep 2
  kill -9 "$server"
  wait "$server" 2>/dev/null || true
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "(page cache not dropped: not root, or /proc/sys read-only; the store reads with O_DIRECT anyway)"
  start_server "$build" "$model" "$port" "$dir/ssd-restart.log" --config "$conf" --cache-dir "$cache"
  read -r w cached <<< "$(ttft "$cache/warm.json")"
  warm+=("$w")
  echo "round $r: cold $c ms, after kill -9 and restart $w ms (cached $cached of 3000)"
  stop_server
done
node -e '
  const [c, w] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2])];
  const med = (x) => [...x].sort((a, b) => a - b)[Math.floor(x.length / 2)];
  console.log(`3000-token prompt: cold TTFT p50 ${med(c).toFixed(0)} ms; prefix restored from the SSD after kill -9: ` +
    `${med(w).toFixed(1)} ms = ${(100 * med(w) / med(c)).toFixed(2)}% of cold (target: at most 2%)`);
' "[$(IFS=,; echo "${cold[*]}")]" "[$(IFS=,; echo "${warm[*]}")]"
