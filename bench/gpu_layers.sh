#!/usr/bin/env bash
# The layers on the GPU (--device cuda), for bench/gpu.sh: gpu-check (logits against the CPU path)
# on the given and on synthesized models, a served chat completion, and the Llama-3-8B-shaped
# figures: prefill and decode, a 16k-token prefix restored from host RAM against its cold prefill
# (gpu-check --bench-restore), and 64 streams served (bench/gpu_served.sh, served.json beside).
# Writes layers.json (and a log per run) into the out-dir; exit 1 when a check failed.
#
#   STRATA_BIN=strata [STRATA_GPU_MODELS="a.gguf b.gguf"] [STRATA_GPU_BENCH=0] [STRATA_GPU_SERVED=0]
#     [STRATA_GPU_RESTORE=16384] bench/gpu_layers.sh out-dir
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=$1
bin=${STRATA_BIN:?a strata built with -DSTRATA_CUDA=ON}
work=${STRATA_GPU_WORK:-/tmp/strata-gpu}
mkdir -p "$work" "$out"
rc=0
checks=()

check() {  # name model [gpu-check args...]
  local name=$1 model=$2
  shift 2
  echo "== gpu-check $name"
  timeout 180 "$bin" gpu-check --model "$model" --json "$work/check-$name.json" "$@" >"$out/check-$name.log" 2>&1 || rc=1
  tail -4 "$out/check-$name.log"
  checks+=("$work/check-$name.json")
}

# The given models, also against their exact reference logits where STRATA_GPU_GOLDEN (a copy of
# ../shared/golden) has them, within the manifest's tolerance.
golden=${STRATA_GPU_GOLDEN:-}
for m in ${STRATA_GPU_MODELS:-}; do
  name=$(basename "$m" .gguf)
  args=()
  if [ -n "$golden" ] && [ -f "$golden/$name.ref.json" ]; then
    read -r max_abs mean_abs < <(python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['models'][sys.argv[2]]['tolerance']; print(t['max_abs'], t['mean_abs'])" "$golden/manifest.json" "$name")
    args=(--golden "$golden/$name.ref.json" --golden-max-abs "$max_abs" --golden-mean-abs "$mean_abs")
  fi
  check "$name" "$m" "${args[@]}"
done
# Synthesized models: Llama-shaped in every weight type the GPU takes, then qwen2 (QKV biases) and
# qwen3 (Q/K norms); 2 layers, d = 512, 8 heads of 64, 4 KV heads.
for spec in llama:f16 llama:bf16 llama:q8_0 llama:q4_0 llama:q4_1 llama:q4_k_m llama:q5_k_m llama:q6_k qwen2:q8_0 qwen3:q4_k_m; do
  a=${spec%%:*} t=${spec#*:}
  f="$work/synth-$a-$t.gguf"
  [ -f "$f" ] || "$bin" synth --arch "$a" --layers 2 --hidden 512 --heads 8 --kv-heads 4 --ffn 1536 --vocab builtin \
    --type "$t" --ctx 4096 --seed 7 --out "$f" >/dev/null 2>&1 || { echo "synth $spec failed"; rc=1; continue; }
  check "synth-$a-$t" "$f" --prompt 200 --gen 24
done

# Served: /v1/models reports the device, and a chat completion comes back.
echo "== serve --device cuda"
serve_model=${STRATA_GPU_SERVE_MODEL:-$work/synth-llama-q4_k_m.gguf}
"$bin" serve --model "$serve_model" --device cuda --host 127.0.0.1 --port 18087 --cache-mode off >"$out/serve.log" 2>&1 &
pid=$!
python3 - "$work/serve.json" <<'PY' || rc=1
import json, sys, time, urllib.request
base = "http://127.0.0.1:18087"
for _ in range(240):
    try:
        if urllib.request.urlopen(base + "/health", timeout=2).status == 200: break
    except Exception:
        time.sleep(0.5)
models = json.load(urllib.request.urlopen(base + "/v1/models", timeout=10))
req = urllib.request.Request(base + "/v1/chat/completions", method="POST", headers={"Content-Type": "application/json"},
                             data=json.dumps({"model": models["data"][0]["id"], "max_tokens": 16, "temperature": 0,
                                              "messages": [{"role": "user", "content": "Say hello."}]}).encode())
chat = json.load(urllib.request.urlopen(req, timeout=60))
r = {"device": models["data"][0].get("device"), "completion_tokens": chat["usage"]["completion_tokens"],
     "finish_reason": chat["choices"][0]["finish_reason"]}
json.dump(r, open(sys.argv[1], "w"))
print("served:", r)
sys.exit(0 if r["device"] == "cuda" and r["completion_tokens"] > 0 else 1)
PY
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
grep -m1 "device cuda" "$out/serve.log"

# The figures: a random-weight Llama-3-8B shape (32 layers, d = 4096, 32/8 heads, ffn 14336, 32k vocab).
if [ "${STRATA_GPU_BENCH:-1}" != 0 ]; then
  big="$work/llama3-8b-q4_k_m.gguf"
  vocab=${STRATA_GPU_VOCAB:-builtin}
  start=$(date +%s)
  [ -f "$big" ] || "$bin" synth --arch llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab "$vocab" \
    --type q4_k_m --ctx 20480 --seed 1 --out "$big" >"$out/synth-8b.log" 2>&1 || { echo "synth 8b failed"; rc=1; }
  echo "synthesized the 8B shape in $(($(date +%s) - start)) s"
  timeout 300 "$bin" gpu-check --model "$big" --no-cpu --bench 512,4096 --bench-gen 64 --json "$work/bench-8b.json" >"$out/bench-8b.log" 2>&1 || rc=1
  tail -4 "$out/bench-8b.log"
  checks+=("$work/bench-8b.json")
  restore=${STRATA_GPU_RESTORE:-16384}
  timeout 300 "$bin" gpu-check --model "$big" --no-cpu --bench-restore "$restore" --json "$work/restore-8b.json" \
    >"$out/restore-8b.log" 2>&1 || rc=1
  grep -E "^restore|passed|FAILED" "$out/restore-8b.log"
  checks+=("$work/restore-8b.json")
  if [ "${STRATA_GPU_SERVED:-1}" != 0 ]; then
    bench/gpu_served.sh "$big" "$out" || rc=1
  fi
fi

python3 - "$out/layers.json" "$work/serve.json" "${checks[@]}" <<'PY'
import json, os, sys
result = {"runs": {}}
for p in sys.argv[3:]:
    name = os.path.basename(p)[:-5]
    try:
        result["runs"][name] = json.load(open(p))
    except (OSError, ValueError) as e:
        result["runs"][name] = {"error": str(e)}
try:
    result["served"] = json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    result["served"] = {"error": str(e)}
json.dump(result, open(sys.argv[1], "w"), indent=2)
PY
exit $rc
