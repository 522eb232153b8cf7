#!/usr/bin/env bash
# The llama.cpp anchor on the GPU, in the same run as strata's figures, on the same synthesized
# models (issue 29, item 4): llama.cpp's CUDA build of llama-bench and llama-batched-bench from the
# source that llama-cpp-python 0.3.36 vendors, against `strata gpu-check --bench` on the
# Llama-3-8B and Qwen3-4B shapes in Q4_K_M and Q8_0.
#
#   bench/gpu_anchor.sh pack DIR      here: writes DIR/llama.cpp-src.tar.xz, the vendored source
#                                     less docs, models, tests and the other backends (~4 MB)
#   STRATA_BIN=strata STRATA_GPU_ANCHOR=DIR/llama.cpp-src.tar.xz bench/gpu_anchor.sh run OUT
#                                     on the GPU machine: builds llama.cpp (sm_90a) in
#                                     build-llamacpp-cuda (reused while the machine is warm),
#                                     synthesizes the models, runs both engines, writes OUT/anchor.json
#
# Figures, per model: prefill of 4,096 tokens (flash attention on), decode of 128 tokens after 0
# and after 16,384 tokens of context, and 64 sequences of 1,024 + 128 tokens decoding together
# (llama-batched-bench; strata: the same 64 sequences prefilled and decoded as one batch).
# STRATA_ANCHOR_MODELS picks the shapes (default "llama8b:q4_k_m llama8b:q8_0 qwen4b:q4_k_m qwen4b:q8_0";
# empty: none). STRATA_ANCHOR_SERVED=1 also serves the 8B Q4_K_M shape from both engines to 64
# concurrent streams (bench/gpu_served.sh: strata serve and llama-server under bench/loadgen.py),
# into OUT/served.json; llama-server is built when the tarball holds tools/server.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
version=0.3.36

if [ "${1:-}" = pack ]; then
  dest=${2:?pack DIR}
  src=${STRATA_LLAMA_DIR:-$HOME/.cache/strata/llama.cpp}/llama_cpp_python-$version/vendor/llama.cpp
  mkdir -p "$dest"
  # ggml's other backends are added only when enabled; tools/ui and server only with LLAMA_BUILD_SERVER.
  tar -C "$(dirname "$src")" -cJf "$dest/llama.cpp-src.tar.xz" \
    --exclude=llama.cpp/docs --exclude=llama.cpp/models --exclude=llama.cpp/media --exclude=llama.cpp/gguf-py \
    --exclude=llama.cpp/benches --exclude=llama.cpp/tests --exclude=llama.cpp/examples --exclude=llama.cpp/pocs \
    --exclude=llama.cpp/tools/ui/src --exclude=llama.cpp/tools/ui/tests --exclude=llama.cpp/tools/server/tests \
    --exclude=llama.cpp/tools/server/bench --exclude=llama.cpp/tools/server/public_legacy --exclude=llama.cpp/.git \
    --exclude='llama.cpp/ggml/src/ggml-vulkan' --exclude='llama.cpp/ggml/src/ggml-sycl' --exclude='llama.cpp/ggml/src/ggml-opencl' \
    --exclude='llama.cpp/ggml/src/ggml-metal' --exclude='llama.cpp/ggml/src/ggml-hexagon' --exclude='llama.cpp/ggml/src/ggml-webgpu' \
    --exclude='llama.cpp/ggml/src/ggml-et' --exclude='llama.cpp/ggml/src/ggml-cann' --exclude='llama.cpp/ggml/src/ggml-musa' \
    --exclude='llama.cpp/ggml/src/ggml-zdnn' --exclude='llama.cpp/ggml/src/ggml-openvino' --exclude='llama.cpp/ggml/src/ggml-virtgpu' \
    llama.cpp
  ls -l "$dest/llama.cpp-src.tar.xz"
  exit 0
fi

[ "${1:-}" = run ] || { echo "usage: $0 pack DIR | run OUT" >&2; exit 2; }
out=${2:?run OUT}
bin=${STRATA_BIN:?a strata built with -DSTRATA_CUDA=ON}
tarball=${STRATA_GPU_ANCHOR:?the tarball that pack wrote}
work=${STRATA_GPU_WORK:-/tmp/strata-gpu}
build=${STRATA_LLAMA_CUDA_BUILD:-build-llamacpp-cuda}
models=${STRATA_ANCHOR_MODELS-llama8b:q4_k_m llama8b:q8_0 qwen4b:q4_k_m qwen4b:q8_0}
served=${STRATA_ANCHOR_SERVED:-0}
deadline=${STRATA_ANCHOR_DEADLINE:-520}  # seconds after which no further model starts (calls are cut at 600)
mkdir -p "$work" "$out" "$build"

# The models and llama.cpp's build in the background (synth is single-threaded; the build, niced,
# takes the other cores); strata runs as soon as the models exist, llama.cpp once it is built.
synth_one() {  # shape type
  local f="$work/anchor-$1-$2.gguf"
  [ -f "$f" ] && return 0
  case $1 in
    llama8b) "$bin" synth --arch llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab builtin \
      --type "$2" --ctx 20480 --seed 1 --out "$f.tmp" ;;
    qwen4b) "$bin" synth --arch qwen3 --layers 36 --hidden 2560 --heads 32 --kv-heads 8 --head-dim 128 --ffn 9728 \
      --vocab builtin --type "$2" --ctx 20480 --seed 1 --out "$f.tmp" ;;
  esac >"$out/synth-$1-$2.log" 2>&1 && mv "$f.tmp" "$f"
}
build_llamacpp() {
  [ -x "$build/bin/llama-bench" ] && [ -x "$build/bin/llama-batched-bench" ] && { [ "$served" = 0 ] || [ -x "$build/bin/llama-server" ]; } &&
    return 0
  mkdir -p "$build/src"
  tar -C "$build/src" -xJf "$tarball" || return 1
  nvcc --version | tail -1
  # llama-server where the source has it (its web UI left empty: no npm, no download there).
  local server=(-DLLAMA_BUILD_SERVER=OFF) targets=(llama-bench llama-batched-bench)
  if [ -d "$build/src/llama.cpp/tools/server" ]; then
    server=(-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF)
    targets+=(llama-server)
  fi
  # CUDA 13 names sm_90a "90a" in CMAKE_CUDA_ARCHITECTURES; -real: machine code only, no PTX.
  nice -n 19 cmake -S "$build/src/llama.cpp" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a-real -DGGML_NATIVE=ON -DGGML_CUDA_NCCL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF "${server[@]}" -DLLAMA_BUILD_APP=OFF \
    -DBUILD_SHARED_LIBS=OFF &&
    nice -n 19 cmake --build "$build" -j "$(($(nproc) > 6 ? $(nproc) - 2 : 4))" --target "${targets[@]}"
}
start=$(date +%s)
build_llamacpp >"$out/llamacpp-build.log" 2>&1 &
build_pid=$!
synth_pids=()
served_spec=$([ "$served" != 0 ] && echo llama8b:q4_k_m)
case " $models " in *" llama8b:q4_k_m "*) served_spec= ;; esac
for spec in $models $served_spec; do
  synth_one "${spec%%:*}" "${spec#*:}" &
  synth_pids+=($!)
done
for p in "${synth_pids[@]}"; do wait "$p"; done
echo "models synthesized after $(($(date +%s) - start))s"

rc=0
for spec in $models; do
  name="${spec%%:*}-${spec#*:}"
  f="$work/anchor-$name.gguf"
  [ -f "$f" ] || { echo "synth $name failed"; rc=1; continue; }
  if [ $(($(date +%s) - start)) -gt "$deadline" ]; then echo "past ${deadline}s: strata skipped on $name"; rc=1; continue; fi
  echo "== strata $name"
  # Prefill 4k, decode 128 after 16, 4k and 16k tokens, and 64 sequences of 1,024 + 128 together.
  timeout 300 "$bin" gpu-check --model "$f" --no-cpu --bench 16,4096,16384 --bench-gen 128 --bench-batch 64x1024+128 \
    --json "$work/strata-$name.json" >"$out/strata-$name.log" 2>&1 || rc=1
  tail -5 "$out/strata-$name.log"
done

wait "$build_pid" || { tail -30 "$out/llamacpp-build.log"; echo "llama.cpp build failed"; exit 1; }
llama_build_s=$(($(date +%s) - start))
echo "llama.cpp (CUDA, sm_90a) ready after ${llama_build_s}s"
for spec in $models; do
  name="${spec%%:*}-${spec#*:}"
  f="$work/anchor-$name.gguf"
  [ -f "$f" ] || continue
  echo "== llama.cpp $name"
  # Prefill 4k and decode 128 at depth 0 and 16k, flash attention on, every layer on the GPU.
  if [ $(($(date +%s) - start)) -gt "$deadline" ]; then echo "past ${deadline}s: llama.cpp skipped on $name"; rc=1; continue; fi
  timeout 300 "$build/bin/llama-bench" -m "$f" -ngl 99 -fa on -p 4096 -n 128 -r 2 -o json \
    >"$work/llamacpp-bench-$name.json" 2>"$out/llamacpp-bench-$name.log" || rc=1
  timeout 300 "$build/bin/llama-bench" -m "$f" -ngl 99 -fa on -p 0 -n 128 -d 16384 -r 2 -o json \
    >"$work/llamacpp-bench16k-$name.json" 2>>"$out/llamacpp-bench-$name.log" || rc=1
  # 64 sequences of 1,024 prompt + 128 generated tokens.
  timeout 300 "$build/bin/llama-batched-bench" -m "$f" -ngl 99 -fa on -c 73728 -b 4096 -ub 512 -npp 1024 -ntg 128 -npl 64 \
    --output-format jsonl >"$work/llamacpp-batched-$name.jsonl" 2>"$out/llamacpp-batched-$name.log" || rc=1
  tail -2 "$work/llamacpp-batched-$name.jsonl"
done
if [ "$served" != 0 ]; then
  STRATA_LLAMA_SERVER="$build/bin/llama-server" bench/gpu_served.sh "$work/anchor-llama8b-q4_k_m.gguf" "$out" || rc=1
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$work/gpu-name.txt" 2>/dev/null

python3 - "$out/anchor.json" "$work" "$llama_build_s" $models <<'PY'
import json, os, sys
dest, work, build_s, specs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(path, lines=False):
    try:
        with open(path) as f:
            text = f.read()
        if lines:
            return [json.loads(l) for l in text.splitlines() if l.strip().startswith("{")]
        return json.loads(text[min(i for i in (text.find("["), text.find("{")) if i >= 0):])
    except (OSError, ValueError) as e:
        return {"error": str(e)}
gpu = open(f"{work}/gpu-name.txt").read().strip() if os.path.exists(f"{work}/gpu-name.txt") else "?"
result = {"gpu": gpu, "llamacpp_build_seconds": build_s, "models": {}}
for spec in specs:
    name = spec.replace(":", "-")
    lb, bb, st = load(f"{work}/llamacpp-bench-{name}.json"), load(f"{work}/llamacpp-batched-{name}.jsonl", True), load(f"{work}/strata-{name}.json")
    deep = load(f"{work}/llamacpp-bench16k-{name}.json")
    if isinstance(lb, list) and isinstance(deep, list):
        lb = lb + deep
    row = {"llamacpp": {}, "strata": {}, "ratio": {}}
    if isinstance(lb, list):
        for r in lb:
            key = ("prefill_4096" if r.get("n_prompt") else "decode_128") + ("_at_16384" if r.get("n_depth") else "")
            row["llamacpp"][key + "_tok_s"] = r.get("avg_ts")
    else:
        row["llamacpp"]["bench_error"] = lb
    if isinstance(bb, list) and bb:
        row["llamacpp"]["batch_64x1024+128"] = {k: bb[-1].get(k) for k in ("speed_pp", "speed_tg", "speed", "t_pp", "t_tg")}
    if isinstance(st, dict) and "bench" in st:
        for b in st["bench"]:
            if b["prompt"] == 4096:
                row["strata"]["prefill_4096_tok_s"] = b["prefill_tok_s"]
            row["strata"][f"decode_128_after_{b['prompt']}_tok_s"] = b["decode_tok_s"]
        row["strata"]["batch_64x1024+128"] = st.get("bench_batch")
        row["strata"]["device"] = st.get("device")
    else:
        row["strata"]["error"] = st
    l, s = row["llamacpp"], row["strata"]
    def ratio(a, b):
        return round(a / b, 3) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None
    row["ratio"] = {"prefill_4096": ratio(s.get("prefill_4096_tok_s"), l.get("prefill_4096_tok_s")),
                    "decode_at_0": ratio(s.get("decode_128_after_16_tok_s"), l.get("decode_128_tok_s")),
                    "decode_at_16384": ratio(s.get("decode_128_after_16384_tok_s"), l.get("decode_128_at_16384_tok_s"))}
    sb, lbb = s.get("batch_64x1024+128") or {}, l.get("batch_64x1024+128") or {}
    row["ratio"]["batch_64_decode"] = ratio(sb.get("decode_tok_s"), lbb.get("speed_tg"))
    row["ratio"]["batch_64_prefill"] = ratio(sb.get("prefill_tok_s"), lbb.get("speed_pp"))
    result["models"][name] = row
json.dump(result, open(dest, "w"), indent=2)
print(json.dumps(result, indent=1))
PY
exit $rc
