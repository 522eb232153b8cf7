#!/usr/bin/env bash
# KV memory: bytes per token in each format, and resident memory through a long prefill with q4_0
# KV. Serves the 0.4B Qwen2-shaped model (context 32K), sends one TOKENS-token prompt with
# kv_bits BITS, samples the server's RSS every 100 ms, and compares the peak with
# weights + the KV of TOKENS tokens in that format + 64 MiB + 2 MiB for each layer's K and V
# arrays (they are backed in 2 MiB huge pages, so each may hold up to one partly used huge page
# beyond the KV it holds). Writes the RSS curve to
# $dir/kv-memory.dat (ms, KiB) and, with gnuplot, $dir/kv-memory.png.
#
#   bench/kv_memory.sh [BUILD_DIR]       env: TOKENS (16384), BITS (4), PORT (18082)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
dir=$(bench_dir "$build")
model=$dir/qwen2-0.4b-q8_0-32k.gguf
[ -f "$model" ] || "$build/strata" synth --arch qwen2 --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 \
  --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --type q8_0 --ctx 32768 --out "$model" >&2
tokens=${TOKENS:-16384}
bits=${BITS:-4}
port=${PORT:-18082}
conf=$dir/kv-memory.toml
cat > "$conf" <<TOML
[model]
ctx = $((tokens + 64))
[kv]
memory = "2GiB"
default_bits = $bits
[cache]
mode = "hot"
hot_memory = "256MiB"
TOML
trap stop_server EXIT
start_server "$build" "$model" "$port" "$dir/kv-memory.log" --config "$conf"

# KV bytes per token: K and V rows of kv_dim = 2 heads x 64 values, in every one of 24 layers.
"$py" -c '
kv_dim, layers = 128, 24
row = {"f16": 2 * kv_dim, "q8_0": kv_dim // 32 * 34, "q4_0": kv_dim // 32 * 18}
for f, b in row.items():
    print("KV bytes per token, %-5s: %d" % (f, b * 2 * layers))
'
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
idle=$(rss_kib)
: > "$dir/kv-memory.dat"
( t0=$(date +%s%N); while kill -0 "$server" 2>/dev/null; do
    echo "$(( ($(date +%s%N) - t0) / 1000000 )) $(rss_kib)" >> "$dir/kv-memory.dat"; sleep 0.1; done ) &
sampler=$!
"$py" -c '
import json, sys, time, urllib.error, urllib.request
n, bits, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# A linear congruential sequence of token ids, in doubles (seed 12345).
s, prompt = 12345.0, []
for _ in range(n):
    s = (s * 1103515245 + 12345) % 2147483648
    prompt.append(300 + int(s % 49000))
t0 = time.time()
# Streamed: the server keeps the connection alive with SSE comments through the long prefill.
body = json.dumps({"prompt": prompt, "max_tokens": 1, "kv_bits": bits, "stream": True,
                   "stream_options": {"include_usage": True}}).encode()
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port, data=body, headers={"Content-Type": "application/json"})
try:
    text = urllib.request.urlopen(req).read().decode()
except urllib.error.HTTPError as e:
    sys.exit(e.read().decode())
usage = json.loads([l for l in text.split("\n") if "\"usage\":{" in l][-1][6:])["usage"]
print("prefill of %d tokens at kv_bits %d: %.1f s" % (usage["prompt_tokens"], bits, time.time() - t0))
' "$tokens" "$bits" "$port"
sleep 0.5
kill "$sampler" 2>/dev/null || true
peak=$(awk 'max < $2 {max = $2} END {print max}' "$dir/kv-memory.dat")
weights=$(stat -c %s "$model")
"$py" -c '
import sys
idle, peak, weights, n, bits = map(int, sys.argv[1:])
per_token = {16: 256, 8: 136, 4: 72}[bits] * 2 * 24
kv, huge_slack = per_token * n, 2 * 24 * 2 * 1048576
bound = weights + kv + 64 * 1048576 + huge_slack
mib = lambda x: "%.0f" % (x / 1048576)
print("RSS idle %s MiB, peak %s MiB; weights %s MiB + KV of %d tokens %s MiB" % (mib(idle * 1024), mib(peak * 1024), mib(weights), n, mib(kv))
      + " + 64 MiB + %s MiB of huge-page rounding = %s MiB: %s the bound" % (mib(huge_slack), mib(bound), "within" if peak * 1024 <= bound else "OVER"))
' "$idle" "$peak" "$weights" "$tokens" "$bits"
if command -v gnuplot > /dev/null; then
  gnuplot -e "set terminal png size 900,500 noenhanced; set output '$dir/kv-memory.png'; set xlabel 'ms'; set ylabel 'RSS (MiB)';
    set title 'strata RSS through a $tokens-token prefill, kv_bits $bits'; plot '$dir/kv-memory.dat' using 1:(\$2/1024) with lines title 'RSS'"
  echo "plot: $dir/kv-memory.png"
fi
