#!/usr/bin/env bash
# Starts the real server (the built-in demo model) on a free loopback port and checks what a user
# sees; and that a bad setting, or no model at all, stops it before it listens.
set -euo pipefail
strata=$1
work=$(mktemp -d)
# What the server keeps under $XDG_CACHE_HOME (the q4_0 KV mean keys) stays in the test's folder.
export XDG_CACHE_HOME="$work/xdg"
trap '[ "$pid" -gt 0 ] && kill -9 $pid 2>/dev/null; rm -rf "$work"' EXIT
pid=0
checks=0
fail() { echo "FAIL: $*"; exit 1; }
ok() { checks=$((checks + 1)); echo "ok: $*"; }

# A bad setting stops the server before it listens, naming the key.
printf '[cache]\nmode = "lukewarm"\n' > "$work/bad.toml"
set +e
timeout 120 "$strata" serve --demo --port 0 --cache-dir "$work/bad-cache" --config "$work/bad.toml" \
  > "$work/bad.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad config exited $rc, expected 2: $(cat "$work/bad.log")"
grep -q "cache.mode" "$work/bad.log" || fail "bad config message does not name cache.mode: $(cat "$work/bad.log")"
ok "bad config rejected with the key named"

# Without --model or --demo, and no default model where it is looked for, the server stops before
# it listens and says how to get one.
mkdir "$work/no-models"
set +e
STRATA_MODEL_DIR="$work/no-models" timeout 120 "$strata" serve --port 0 --cache-dir "$work/no-model-cache" \
  > "$work/no-model.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 124 ] || fail "without a model the server was still running after 120 s: $(cat "$work/no-model.log")"
[ "$rc" -ne 0 ] || fail "without a model the server exited 0: $(cat "$work/no-model.log")"
if grep -q "listening on" "$work/no-model.log"; then fail "without a model the server listened: $(cat "$work/no-model.log")"; fi
grep -q "scripts/fetch-model.sh" "$work/no-model.log" || fail "no-model message does not name scripts/fetch-model.sh: $(cat "$work/no-model.log")"
grep -q -e "--model" "$work/no-model.log" || fail "no-model message does not name --model: $(cat "$work/no-model.log")"
ok "no model: exit $rc before listening, naming scripts/fetch-model.sh and --model"

"$strata" serve --demo --port 0 --cache-dir "$work/cache" --log-json > "$work/serve.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log" | head -1)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || fail "server exited early: $(cat "$work/serve.log")"
  sleep 0.5
done
[ -n "$port" ] || fail "server did not report its port"
ok "listening on port $port"

for _ in $(seq 1 600); do
  code=$(curl -s -o "$work/health.json" -w '%{http_code}' "http://127.0.0.1:$port/health" || true)
  [ "$code" = "200" ] && break
  [ "$code" = "503" ] || fail "/health answered $code"
  sleep 0.5
done
[ "$code" = "200" ] || fail "/health never became ready"
grep -q '"status":"ok"' "$work/health.json" || fail "unexpected /health body"
ok "/health is 200"

code=$(curl -s -o "$work/404.json" -w '%{http_code}' "http://127.0.0.1:$port/no/such/path")
[ "$code" = "404" ] || fail "unknown path answered $code"
grep -q '"error":{"message"' "$work/404.json" || fail "404 body is not an OpenAI error"
ok "unknown path is an OpenAI-shaped 404"

grep -q '"request_id":"req-' "$work/serve.log" || fail "JSON access log lines carry no request_id"
ok "JSON log lines carry the request id"

kill -TERM $pid
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then fail "server still running 10 s after SIGTERM"; fi
wait $pid
rc=$?
[ "$rc" -eq 0 ] || fail "server exited $rc after SIGTERM"
pid=0
ok "SIGTERM exits 0"
echo "$checks passed, 0 failed"
