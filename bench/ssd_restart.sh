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
  "$py" -c '
import json, sys
s = (int(sys.argv[1]) & 0xFFFFFFFF) or 1
def rand():  # xorshift32
    global s
    s = (s ^ (s << 13)) & 0xFFFFFFFF
    s ^= s >> 17
    s = (s ^ (s << 5)) & 0xFFFFFFFF
    return s
tokens = lambda k: [300 + rand() % 49700 for _ in range(k)]
a = tokens(3000)
b = a[:2990] + tokens(10)
body = lambda p: json.dumps({"prompt": p, "max_tokens": 1, "temperature": 0, "ignore_eos": True})
open(sys.argv[2] + "/cold.json", "w").write(body(a))
open(sys.argv[2] + "/warm.json", "w").write(body(b))
  ' "$1" "$cache"
}
ttft() {  # body file: prints milliseconds and cached tokens
  curl -s -o "$cache/out.json" -w '%{time_total}' -H 'content-type: application/json' --data-binary @"$1" \
    "http://127.0.0.1:$port/v1/completions" | awk '{ printf "%.1f", $1 * 1000 }'
  echo " $("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$cache/out.json")"
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
"$py" -c '
import json, sys
c, w = json.loads(sys.argv[1]), json.loads(sys.argv[2])
med = lambda x: sorted(x)[len(x) // 2]
print("3000-token prompt: cold TTFT p50 %.0f ms; prefix restored from the SSD after kill -9: " % med(c)
      + "%.1f ms = %.2f%% of cold (target: at most 2%%)" % (med(w), 100 * med(w) / med(c)))
' "[$(IFS=,; echo "${cold[*]}")]" "[$(IFS=,; echo "${warm[*]}")]"
