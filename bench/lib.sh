# Shared by the benchmarks: the Python that runs the clients, the 0.4B Qwen2-shaped model, a
# server on a port, and the one-line summary of a loadgen report. Source it after `cd` to the
# project root.

# The Python with the packages of requirements.txt (scripts/install-deps.sh makes .venv/);
# PYTHON overrides it.
py=${PYTHON:-.venv/bin/python}
if ! command -v "$py" > /dev/null; then
  echo "$0: $py is missing; run scripts/install-deps.sh (it creates .venv/ with the packages of requirements.txt)" >&2
  exit 1
fi

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

# engine_runs STRATA MODEL RUNS THREADS: runs `strata bench` RUNS times on MODEL (PROMPT tokens,
# default 512, then GEN, default 128) and prints its JSON line of each run.
engine_runs() {
  local strata=$1 model=$2 runs=$3 threads=$4 i
  for ((i = 0; i < runs; i++)); do
    "$strata" bench --model "$model" --prompt "${PROMPT:-512}" --gen "${GEN:-128}" --threads "$threads" --json
  done
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
  "$build/strata" serve --model "$model" --port "$port" --log-level warn "$@" > "$log" 2>&1 &
  server=$!
  wait_healthy "$port" "$log" 300
}

# start_llama_server BIN MODEL PORT LOG [ARGS...]: starts llama.cpp's llama-server BIN on MODEL in
# the background (its pid in $server) and waits for /health, which answers only once the model
# is loaded and warmed up (up to ten minutes: a model of tens of gigabytes read from the disk).
start_llama_server() {
  local bin=$1 model=$2 port=$3 log=$4
  shift 4
  "$bin" -m "$model" --host 127.0.0.1 --port "$port" "$@" > "$log" 2>&1 &
  server=$!
  wait_healthy "$port" "$log" 3000
}

# wait_healthy PORT LOG TRIES: waits for the server $server to answer /health on PORT, trying
# every 0.2 s TRIES times; fails, naming LOG, when it exits first or never answers.
wait_healthy() {
  local port=$1 log=$2 tries=$3
  for _ in $(seq 1 "$tries"); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null && return 0
    kill -0 "$server" 2> /dev/null || { echo "the server exited; see $log" >&2; return 1; }
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
  "$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ttft, itl = r["ttft_ms"], r["itl_ms"]
f = lambda x: "-" if x is None else "%.0f" % x
per_stream = "%.1f" % (1000 / itl["p50"]) if itl["p50"] else "-"
print("%-12s %d streams, %d/%d ok: %.1f generated tok/s, " % (r.get("label", ""), r["concurrency"], r["ok"], r["requests"], r["generated_tok_s"])
      + "TTFT p50 %s ms p90 %s ms p99 %s ms, inter-token p50 %s ms p90 %s ms, " % (f(ttft["p50"]), f(ttft["p90"]), f(ttft["p99"]), f(itl["p50"]), f(itl["p90"]))
      + "(1000 / inter-token p50 = %s tok/s per stream), " % per_stream
      + "%.0f prompt tokens per request, %.1f%% cached" % (r["prompt_tokens"] / max(1, r["ok"]), 100 * r["cached_fraction"])
      + (", errors %s" % json.dumps(r["first_errors"], separators=(",", ":")) if r["errors"] else ""))
' "$1"
}

# bench_build_names "DEFAULT NAMES" [BUILD] [NAMES...]: the model benchmarks' arguments. Sets build
# (default build/bench) and the array names (default the words of DEFAULT NAMES).
bench_build_names() {
  local defaults=$1
  shift
  build=${1:-build/bench}
  shift || true
  names=("$@")
  [ ${#names[@]} -gt 0 ] || read -r -a names <<< "$defaults"
}
