# Shared by the serving benchmarks: the 0.4B Qwen2-shaped model, a server on a port, and the
# one-line summary of a loadgen report. Source it after `cd` to the project root.

# bench_dir BUILD: prints (and creates) the folder for the benchmark models and outputs.
bench_dir() {
  local dir=${STRATA_BENCH_DIR:-$1/bench-models}
  mkdir -p "$dir"
  echo "$dir"
}

# bench_model BUILD TYPE: prints the model's path, synthesizing it on first use.
bench_model() {
  local build=$1 type=$2
  local model
  model=$(bench_dir "$build")/qwen2-0.4b-$type.gguf
  [ -f "$model" ] || "$build/strata" synth --arch qwen2 --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 \
    --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --type "$type" --out "$model" >&2
  echo "$model"
}

# bench_setup DEFAULT_PORT [BUILD] [TYPE]: the serving benchmarks' arguments. Sets build (default
# build/bench), model (the 0.4B model in TYPE, default q8_0, synthesized on first use), dir (its
# folder) and port ($PORT, else DEFAULT_PORT).
bench_setup() {
  port=${PORT:-$1}
  build=${2:-build/bench}
  model=$(bench_model "$build" "${3:-q8_0}")
  dir=$(dirname "$model")
}

# start_server BUILD MODEL PORT LOG [ARGS...]: starts `strata serve` in the background (its pid in
# $server) and waits for /health.
start_server() {
  local build=$1 model=$2 port=$3 log=$4
  shift 4
  [ -d tests/e2e/node_modules ] || (cd tests/e2e && npm ci --silent)
  "$build/strata" serve --model "$model" --port "$port" --log-level warn "$@" > "$log" 2>&1 &
  server=$!
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null && return 0
    sleep 0.2
  done
  echo "the server did not come up; see $log" >&2
  return 1
}

stop_server() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}

# summarize REPORT.json: one line of the figures that matter.
summarize() {
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const f = (x) => (x === null ? "-" : x.toFixed(0));
    console.log(`${(r.label ?? "").padEnd(12)} ${r.concurrency} streams, ${r.ok}/${r.requests} ok: ${r.generated_tok_s.toFixed(1)} generated tok/s, ` +
      `TTFT p50 ${f(r.ttft_ms.p50)} ms p90 ${f(r.ttft_ms.p90)} ms, inter-token p50 ${f(r.itl_ms.p50)} ms p90 ${f(r.itl_ms.p90)} ms, ` +
      `(1000 / inter-token p50 = ${r.itl_ms.p50 ? (1000 / r.itl_ms.p50).toFixed(1) : "-"} tok/s per stream), ` +
      `${(r.prompt_tokens / Math.max(1, r.ok)).toFixed(0)} prompt tokens per request, ${(100 * r.cached_fraction).toFixed(1)}% cached` +
      (r.errors ? `, errors ${JSON.stringify(r.first_errors)}` : ""));
  ' "$1"
}
