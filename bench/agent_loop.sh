#!/usr/bin/env bash
# An agent loop on a real model (default SmolLM2-135M-Instruct), strata against llama.cpp's server
# in one run: AGENTS agents at once, each STEPS tool steps whose context grows by a tool call and a
# ~RESULT_TOKENS-token tool result a step (bench/agent_loop.py); TTFT per step (median over the
# agents), total TTFT and the share of prompt tokens the prefix cache served.
#   strata:    `strata serve` with the prefix cache hot and kv.memory 1GiB (the agents' whole
#              contexts fit, as in llama.cpp's slots below)
#   llama.cpp: llama-server (the build of bench/llamacpp.sh, made on first use outside the project)
#              with one slot per agent (-np AGENTS, CTX tokens each), --jinja for the tools, its
#              prompt cache on (the default)
# Both get THREADS threads; the servers run one after the other, never together. The raw figures
# go to agent_loop.json in the bench folder.
#
#   bench/agent_loop.sh [BUILD_DIR] [MODEL_NAME]     e.g. bench/agent_loop.sh build/bench smollm2
#   env: AGENTS (8), STEPS (12), RESULT_TOKENS (300), THREADS (all cores), CTX (6144), PORT (18090),
#        LLAMA_SERVER (another llama-server binary instead of bench/llamacpp.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
build=${1:-build/bench}
name=${2:-smollm2}
agents=${AGENTS:-8}
steps=${STEPS:-12}
threads=${THREADS:-$(nproc)}
ctx=${CTX:-6144}
port=${PORT:-18090}
[ -x "$build/strata" ] || { echo "agent_loop.sh: $build/strata is missing; build first (cmake --build $build)" >&2; exit 1; }
llama_server=${LLAMA_SERVER:-$(bench/llamacpp.sh)/llama-server}
[ -x "$llama_server" ] || { echo "agent_loop.sh: $llama_server is missing (bench/llamacpp.sh builds it)" >&2; exit 1; }
model=$(scripts/fetch-model.sh "$name")
dir=$(bench_dir "$build")
work=$(mktemp -d "$dir/.agent_loop.XXXXXX")
server=
stop() {
  [ -n "$server" ] && stop_server
  rm -rf "$work"
}
trap stop EXIT

printf '[kv]\nmemory = "1GiB"\n\n[model]\ncompute_threads = %d\n' "$threads" > "$work/strata.toml"
start_server "$build" "$model" "$port" "$dir/agent_loop-strata.log" --config "$work/strata.toml" --cache-mode hot
"$py" bench/agent_loop.py --server "strata=http://127.0.0.1:$port" --agents "$agents" --steps "$steps" \
  --result-tokens "${RESULT_TOKENS:-300}" --json "$work/strata.json" > "$work/strata.txt"
stop_server
server=

start_llama_server "$llama_server" "$model" "$port" "$dir/agent_loop-llamacpp.log" -t "$threads" -np "$agents" \
  -c $((agents * ctx)) --jinja
"$py" bench/agent_loop.py --server "llama.cpp=http://127.0.0.1:$port" --agents "$agents" --steps "$steps" \
  --result-tokens "${RESULT_TOKENS:-300}" --json "$work/llamacpp.json" > "$work/llamacpp.txt"
stop_server
server=

"$py" bench/agent_loop.py --report "$work/strata.json" "$work/llamacpp.json" --out "$dir/agent_loop.json"
echo "raw figures: $dir/agent_loop.json"
