#!/usr/bin/env bash
# strata's engine against llama.cpp's on the real models (names that scripts/fetch-model.sh knows,
# default smollm2 and gemma3), at each thread count of THREAD_LIST: prefill PROMPT tokens, then
# decode GEN tokens after them. The two engines alternate RUNS times (strata, llama.cpp, strata,
# ...), so that the machine's noise hits both alike, and the medians are compared:
#   strata:    `strata bench --model M --prompt PROMPT --gen GEN --threads T --json`
#   llama.cpp: llama-bench (the build of bench/llamacpp.sh, made on first use outside the project)
#              twice per run: `-p PROMPT -n 0` for the prefill and `-p 0 -n GEN -d PROMPT` for the
#              decode, at the same depth as strata's (after the prompt); -r LLAMA_REPS each.
# The memory read bandwidth is strata bench's own probe, taken between stretches of its decode in
# the same runs; the decode bound is bandwidth / bytes read per token (weights, and the KV cache at
# the mean decode position), and the share of it is strata bench's bandwidth_share. One line per
# model and thread count; every raw figure goes to vs_llamacpp.json in the bench folder.
#
#   bench/vs_llamacpp.sh [BUILD_DIR] [MODEL_NAMES...]   e.g. bench/vs_llamacpp.sh build/bench smollm2 gemma3
#   env: RUNS (3), THREAD_LIST ("1 2"), PROMPT (512), GEN (128), LLAMA_REPS (1: llama-bench's -r)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
bench_build_names "smollm2 gemma3" "$@"
runs=${RUNS:-3}
threads_list=${THREAD_LIST:-1 2}
prompt=${PROMPT:-512}
gen=${GEN:-128}
reps=${LLAMA_REPS:-1}
strata=$build/strata
[ -x "$strata" ] || { echo "vs_llamacpp.sh: $strata is missing; build first (cmake --build $build)" >&2; exit 1; }
llama_bench=$(bench/llamacpp.sh)/llama-bench
[ -x "$llama_bench" ] || { echo "vs_llamacpp.sh: $llama_bench is missing (bench/llamacpp.sh builds it)" >&2; exit 1; }
dir=$(bench_dir "$build")
out=$dir/vs_llamacpp.json
work=$(mktemp -d "$dir/.vs_llamacpp.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "prefill $prompt tokens, decode $gen after them; $runs alternating runs per engine, medians;" \
  "read bandwidth: strata bench's probe between its decode stretches"
: > "$work/results.jsonl"
for name in "${names[@]}"; do
  if ! model=$(scripts/fetch-model.sh "$name"); then
    echo "skipping $name: scripts/fetch-model.sh does not know it or could not fetch it"
    continue
  fi
  for t in $threads_list; do
    s=$work/$name-$t-strata.jsonl l=$work/$name-$t-llama.jsonl
    : > "$s"
    : > "$l"
    for ((i = 0; i < runs; i++)); do
      if ! "$strata" bench --model "$model" --prompt "$prompt" --gen "$gen" --threads "$t" --json >> "$s" 2> "$work/strata.err"; then
        echo "vs_llamacpp.sh: strata bench failed on $name:" >&2
        cat "$work/strata.err" >&2
        exit 1
      fi
      for args in "-p $prompt -n 0" "-p 0 -n $gen -d $prompt"; do
        # shellcheck disable=SC2086  # args holds several options
        if ! "$llama_bench" -m "$model" $args -t "$t" -r "$reps" -o jsonl >> "$l" 2> "$work/llama.err"; then
          echo "vs_llamacpp.sh: llama-bench failed on $name:" >&2
          cat "$work/llama.err" >&2
          exit 1
        fi
      done
    done
    "$py" - "$name" "$model" "$t" "$s" "$l" "$prompt" "$gen" "$work/results.jsonl" <<'PY'
import json, statistics, sys
name, model, threads, s_path, l_path = sys.argv[1:6]
prompt, gen = int(sys.argv[6]), int(sys.argv[7])
strata = [json.loads(line) for line in open(s_path) if line.strip()]
llama = [json.loads(line) for line in open(l_path) if line.strip()]
med = statistics.median
# llama-bench's tests: n_prompt > 0 and n_gen == 0 is the prefill, n_gen > 0 the decode (at n_depth).
pp = [r["avg_ts"] for r in llama if r["n_prompt"] == prompt and r["n_gen"] == 0]
tg = [r["avg_ts"] for r in llama if r["n_gen"] == gen and r["n_prompt"] == 0 and r["n_depth"] == prompt]
assert pp and tg, "llama-bench reported no prefill or no decode test"
bandwidth = med(r["bandwidth_gb_s"] for r in strata)  # GB/s
bytes_per_token = strata[0]["bytes_per_token"]
bound = bandwidth * 1e9 / bytes_per_token
m = {
    "strata_prefill_tok_s": med(r["prefill_tok_s"] for r in strata),
    "strata_decode_tok_s": med(r["decode_tok_s"] for r in strata),
    "llamacpp_prefill_tok_s": med(pp),
    "llamacpp_decode_tok_s": med(tg),
    "bandwidth_gb_s": bandwidth,
    "bytes_per_token": bytes_per_token,
    "decode_bound_tok_s": bound,
    "strata_bandwidth_share": med(r["bandwidth_share"] for r in strata),
    "llamacpp_bandwidth_share": med(tg) / bound,
}
m["prefill_ratio"] = m["strata_prefill_tok_s"] / m["llamacpp_prefill_tok_s"]
m["decode_ratio"] = m["strata_decode_tok_s"] / m["llamacpp_decode_tok_s"]
with open(sys.argv[8], "a") as results:
    print(json.dumps({"name": name, "model": model, "threads": int(threads), "runs": len(strata),
                      "simd": strata[0]["simd"], "medians": m, "strata": strata, "llamacpp": llama}), file=results)
print("%s %s threads: prefill strata %.1f tok/s, llama.cpp %.1f tok/s (%.2f x); "
      "decode strata %.1f, llama.cpp %.1f (%.2f x); decode at %.0f%% of the bandwidth bound "
      "(%.2f GB/s / %.1f MB a token = %.1f tok/s)"
      % (name, threads, m["strata_prefill_tok_s"], m["llamacpp_prefill_tok_s"], m["prefill_ratio"],
         m["strata_decode_tok_s"], m["llamacpp_decode_tok_s"], m["decode_ratio"],
         100 * m["strata_bandwidth_share"], bandwidth, bytes_per_token / 1e6, bound))
PY
  done
done

[ -s "$work/results.jsonl" ] || { echo "vs_llamacpp.sh: no model was benchmarked" >&2; exit 1; }
"$py" - "$work/results.jsonl" "$out" "$prompt" "$gen" "$runs" "$reps" <<'PY'
import json, sys
results = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
json.dump({"prompt_tokens": int(sys.argv[3]), "gen_tokens": int(sys.argv[4]), "runs": int(sys.argv[5]),
           "llama_bench_repetitions": int(sys.argv[6]),
           "bandwidth_source": "strata bench's read-bandwidth probe, between stretches of its decode",
           "results": results}, open(sys.argv[2], "w"), indent=1)
PY
echo "raw figures: $out"
