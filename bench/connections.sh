#!/usr/bin/env bash
# Connection load on a tiny shared model: 1,000 concurrent SSE streams, 10,000 idle WebSocket
# connections (server RSS before, while held, after), and 500 clients that drop mid-stream
# (nothing may stay running, waiting or holding KV blocks afterwards). See bench/connections.py.
#
#   bench/connections.sh [BUILD_DIR] [MODEL]
#   env: SSE (1000), WS (10000), STORM (500), QUEUED (1024: the waiting-queue limit), PORT (18081)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
model=${2:-../shared/models/tiny-llama-spm-f16.gguf}
port=${PORT:-18081}
ws=${WS:-10000}
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((ws + 200)) ]; then
  echo "connections.sh: $ws connections need more open files than the limit $(ulimit -n)" >&2
  exit 1
fi
work=$(mktemp -d)
cat > "$work/strata.toml" <<TOML
[limits]
max_connections = $((ws + ${SSE:-1000} + 100))  # the SSE client keeps its connections alive

[scheduler]
max_queued = ${QUEUED:-1024}  # every stream admitted: none of them may fail
TOML
"$build/strata" serve --config "$work/strata.toml" --model "$model" --port "$port" --cache-mode off --log-level warn \
  > "$work/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  sleep 0.2
done
"$py" bench/connections.py --url "http://127.0.0.1:$port" --pid "$server" --sse "${SSE:-1000}" --ws-idle "$ws" \
  --storm "${STORM:-500}"
kill -0 $server || { echo "connections.sh: the server died; its log:" >&2; cat "$work/serve.log" >&2; exit 1; }
