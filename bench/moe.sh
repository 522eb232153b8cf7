#!/usr/bin/env bash
# Mixtures of experts, strata against llama.cpp on random-weight models of two real shapes, written
# by `strata synth` into the bench folder on first use (never into the project):
#   qwen3moe: Qwen3-30B-A3B's shape (48 layers, width 2048, 32 query and 4 KV heads of 128, 128
#             experts of 768, 8 per token) in Q4_K_M, about 17 GiB;
#   gpt-oss:  gpt-oss-20b's shape (24 layers, width 2880, 64 query and 8 KV heads of 64, 32 experts
#             of 2880, 4 per token) in MXFP4 experts with the rest Q8_0, about 12 GiB.
# For each: single-stream prefill of PROMPT tokens and decode of GEN tokens after them (strata
# bench against llama-bench, alternating RUNS times, medians), then STREAMS concurrent streams:
# strata serve and llama-server (STREAMS slots, the same threads, no prompt cache on either) under
# the same bench/loadgen.py run (2 x STREAMS requests of 128-word prompts, GEN tokens each), each
# engine's generated tokens per second with the prompts' prefill included, and its decode-only
# aggregate rate from loadgen's inter-token gaps (decode_aggregate), next to llama-batched-bench's
# decode speed with as many parallel sequences. Decode is reported as a share of the machine's read
# bandwidth (strata bench's probe) over the bytes a token reads: the active parameters only (the
# router's chosen experts, attention, one embedding row and the output matrix).
# A model is skipped, with a message, when the disk lacks room for it. Run it alone: it reads
# tens of gigabytes per run.
#
#   bench/moe.sh [BUILD_DIR] [qwen3moe|gpt-oss|tiny]...     e.g. bench/moe.sh build/bench
#   env: RUNS (3), THREADS (0: every core), PROMPT (512), GEN (64), STREAMS (8), PORT (18090)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_build_names "qwen3moe gpt-oss" "$@"
runs=${RUNS:-3}
threads=${THREADS:-0}
prompt=${PROMPT:-512}
gen=${GEN:-64}
streams=${STREAMS:-8}
port=${PORT:-18090}
strata=$build/strata
[ -x "$strata" ] || { echo "moe.sh: $strata is missing; build first (cmake --build $build)" >&2; exit 1; }
bin=$(bench/llamacpp.sh)
llama_bench=$bin/llama-bench
batched=$bin/llama-batched-bench
llama_server=$bin/llama-server
dir=$(bench_dir "$build")
[ "$threads" -gt 0 ] || threads=$(nproc)

# synth flags and the GiB each model takes (with a margin).
declare -A shape=(
  [qwen3moe]="--arch qwen3moe --layers 48 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 --ffn 6144 --experts 128 --experts-used 8 --expert-ffn 768 --type q4_k_m --ctx 40960"
  [gpt-oss]="--arch gpt-oss --layers 24 --hidden 2880 --heads 64 --kv-heads 8 --head-dim 64 --ffn 2880 --experts 32 --experts-used 4 --expert-ffn 2880 --type mxfp4_moe --ctx 131072"
)
declare -A gib=([qwen3moe]=19 [gpt-oss]=14 [tiny]=1)
# tiny: a few megabytes of qwen3moe, to check this script end to end in seconds.
shape[tiny]="--arch qwen3moe --layers 4 --hidden 256 --heads 4 --kv-heads 2 --head-dim 64 --ffn 512 --experts 16 --experts-used 4 --expert-ffn 256 --type q4_k_m --ctx 4096"

for name in "${names[@]}"; do
  [ -n "${shape[$name]:-}" ] || { echo "moe.sh: unknown model $name (qwen3moe, gpt-oss, tiny)" >&2; exit 1; }
  model=$dir/moe-$name.gguf
  if [ ! -f "$model" ]; then
    free=$(df -BG --output=avail "$dir" | tail -1 | tr -dc 0-9)
    if [ "$free" -lt "${gib[$name]}" ]; then
      echo "skipping $name: $dir has ${free} GiB free, the model needs about ${gib[$name]} GiB"
      continue
    fi
    # shellcheck disable=SC2086  # the shape is word-split on purpose
    "$strata" synth ${shape[$name]} --vocab ../shared/vocab/ggml-vocab-gpt-2.gguf --quiet --out "$model"
  fi
  s=$dir/moe-$name-strata.jsonl l=$dir/moe-$name-llama.jsonl
  : > "$s"
  : > "$l"
  for ((i = 0; i < runs; i++)); do
    "$strata" bench --model "$model" --prompt "$prompt" --gen "$gen" --threads "$threads" --json >> "$s"
    for args in "-p $prompt -n 0" "-p 0 -n $gen -d $prompt"; do
      # shellcheck disable=SC2086  # args holds several options
      "$llama_bench" -m "$model" $args -t "$threads" -r 1 -o jsonl >> "$l" 2> /dev/null
    done
  done
  # STREAMS streams: strata serve and llama-server under the same loadgen run, then
  # llama-batched-bench. A llama-server slot holds a prompt (about 140 tokens with the template),
  # its GEN tokens and room to spare.
  load=(--scenario independent --concurrency "$streams" --requests "$((2 * streams))" --prompt-tokens 128 --max-tokens "$gen"
    --connections per-request)
  start_server "$build" "$model" "$port" "$dir/moe-$name-serve.log" --cache-mode off --threads "$threads"
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" "${load[@]}" --label "$name strata" --out "$dir/moe-$name-serve.json" > /dev/null
  stop_server
  start_llama_server "$llama_server" "$model" "$port" "$dir/moe-$name-llama-server.log" -np "$streams" \
    -c $(((256 + gen + 64) * streams)) -t "$threads" -tb "$threads" --cache-ram 0 --no-webui
  "$py" bench/loadgen.py --url "http://127.0.0.1:$port" "${load[@]}" --label "$name llama-server" \
    --out "$dir/moe-$name-llama-server.json" > /dev/null
  stop_server
  "$batched" -m "$model" -c $(((128 + gen) * streams + 256)) -b 2048 -ub 512 -npp 128 -ntg "$gen" -npl "$streams" \
    -t "$threads" --output-format jsonl 2> /dev/null | grep '^{' > "$dir/moe-$name-batched.jsonl" || true
  "$py" - "$name" "$s" "$l" "$dir/moe-$name-serve.json" "$dir/moe-$name-llama-server.json" "$dir/moe-$name-batched.jsonl" \
    "$prompt" "$gen" "$streams" <<'PY'
import json, statistics, sys
name, s_path, l_path, serve_path, llama_serve_path, batched_path = sys.argv[1:7]
prompt, gen, streams = int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
med = statistics.median
strata = [json.loads(x) for x in open(s_path) if x.strip()]
llama = [json.loads(x) for x in open(l_path) if x.strip()]
pp = [r["avg_ts"] for r in llama if r["n_prompt"] == prompt and r["n_gen"] == 0]
tg = [r["avg_ts"] for r in llama if r["n_gen"] == gen and r["n_prompt"] == 0]
sp, sd = med(r["prefill_tok_s"] for r in strata), med(r["decode_tok_s"] for r in strata)
bw = med(r["bandwidth_gb_s"] for r in strata)
bpt = strata[0]["bytes_per_token"]
bound = bw * 1e9 / bpt
line = "%s: prefill %d strata %.1f tok/s, llama.cpp %s; decode strata %.2f tok/s, llama.cpp %s" % (
    name, prompt, sp, "%.1f (%.2fx)" % (med(pp), sp / med(pp)) if pp else "-", sd,
    "%.2f (%.2fx)" % (med(tg), sd / med(tg)) if tg else "-")
line += "; decode at %.0f%% of %.1f GB/s over %.2f GB read a token (active parameters), llama.cpp at %s" % (
    100 * sd / bound, bw, bpt / 1e9, "%.0f%%" % (100 * med(tg) / bound) if tg else "-")
print(line)
serve, llama_serve = json.load(open(serve_path)), json.load(open(llama_serve_path))
batched = [json.loads(x) for x in open(batched_path) if x.strip()]
ll = batched[-1]["speed_tg"] if batched else None
ratio = lambda a, b: "%.2fx" % (a / b) if b else "-"
sg, lg = serve["generated_tok_s"], llama_serve["generated_tok_s"]
sa, la = serve["decode_aggregate"], llama_serve["decode_aggregate"]
print("%s: %d streams, generated tok/s with prefill: strata serve %.1f, llama-server %.1f (%s); "
      "decode only: strata %.1f (%.1f streams at once), llama-server %.1f (%.1f) (%s), "
      "llama-batched-bench %s (strata %s)%s" % (
    name, streams, sg, lg, ratio(sg, lg), sa["tok_s"], sa["streams"], la["tok_s"], la["streams"], ratio(sa["tok_s"], la["tok_s"]),
    "%.1f" % ll if ll else "-", ratio(sa["tok_s"], ll), "".join(
        "; %s: %d of %d requests failed: %s" % (who, r["errors"], r["requests"], r["first_errors"])
        for who, r in (("strata", serve), ("llama-server", llama_serve)) if r["errors"])))
PY
done
