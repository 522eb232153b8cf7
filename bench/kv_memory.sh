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
node -e '
  const kvDim = 128, layers = 24, row = { f16: 2 * kvDim, q8_0: kvDim / 32 * 34, q4_0: kvDim / 32 * 18 };
  for (const [f, b] of Object.entries(row)) console.log(`KV bytes per token, ${f.padEnd(5)}: ${b * 2 * layers}`);
'
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
idle=$(rss_kib)
: > "$dir/kv-memory.dat"
( t0=$(date +%s%N); while kill -0 "$server" 2>/dev/null; do
    echo "$(( ($(date +%s%N) - t0) / 1000000 )) $(rss_kib)" >> "$dir/kv-memory.dat"; sleep 0.1; done ) &
sampler=$!
node -e '
  const n = Number(process.argv[1]), bits = Number(process.argv[2]), port = process.argv[3];
  let s = 12345;
  const prompt = Array.from({ length: n }, () => 300 + ((s = (s * 1103515245 + 12345) % 2147483648) % 49000));
  const t0 = Date.now();
  // Streamed: the server keeps the connection alive with SSE comments through the long prefill.
  (async () => {
    const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "m", prompt, max_tokens: 1, kv_bits: bits, stream: true, stream_options: { include_usage: true } }) });
    if (!r.ok) throw new Error(await r.text());
    let text = "";
    for await (const chunk of r.body) text += Buffer.from(chunk).toString();
    const usage = JSON.parse(text.split("\n").filter((l) => l.includes("\"usage\":{")).pop().slice(6)).usage;
    console.log(`prefill of ${usage.prompt_tokens} tokens at kv_bits ${bits}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  })().catch((e) => { console.error(e.message); process.exit(1); });
' "$tokens" "$bits" "$port"
sleep 0.5
kill "$sampler" 2>/dev/null || true
peak=$(awk 'max < $2 {max = $2} END {print max}' "$dir/kv-memory.dat")
weights=$(stat -c %s "$model")
node -e '
  const [idle, peak, weights, n, bits] = process.argv.slice(1).map(Number);
  const perToken = { 16: 256, 8: 136, 4: 72 }[bits] * 2 * 24;
  const kv = perToken * n, hugeSlack = 2 * 24 * 2 * 1048576, bound = weights + kv + 64 * 1048576 + hugeSlack;
  const mib = (x) => (x / 1048576).toFixed(0);
  console.log(`RSS idle ${mib(idle * 1024)} MiB, peak ${mib(peak * 1024)} MiB; weights ${mib(weights)} MiB + KV of ${n} tokens ${mib(kv)} MiB` +
    ` + 64 MiB + ${mib(hugeSlack)} MiB of huge-page rounding = ${mib(bound)} MiB: ${peak * 1024 <= bound ? "within" : "OVER"} the bound`);
' "$idle" "$peak" "$weights" "$tokens" "$bits"
if command -v gnuplot > /dev/null; then
  gnuplot -e "set terminal png size 900,500 noenhanced; set output '$dir/kv-memory.png'; set xlabel 'ms'; set ylabel 'RSS (MiB)';
    set title 'strata RSS through a $tokens-token prefill, kv_bits $bits'; plot '$dir/kv-memory.dat' using 1:(\$2/1024) with lines title 'RSS'"
  echo "plot: $dir/kv-memory.png"
fi
