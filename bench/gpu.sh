#!/usr/bin/env bash
# The CUDA kernels on a GPU machine, in one go: builds kernels/cuda as a project of its own (nvcc
# and the CPU kernels only: no server libraries needed there), runs the checks against the CPU
# kernels, runs them again under compute-sanitizer (memcheck), then the bench; writes one JSON
# file, gpu.json, with all of it (the logs beside it in logs.tgz).
#
# With STRATA_BIN, a strata built with -DSTRATA_CUDA=ON (built elsewhere and carried, its shared
# libraries on LD_LIBRARY_PATH), it also runs the layers on the GPU (--device cuda):
#   - `strata gpu-check` on each model of STRATA_GPU_MODELS (GGUF paths, space-separated) and on
#     small Llama-shaped models synthesized here in every weight type: logits against the CPU
#     path, batched decode, KV pages saved, loaded and copied by value;
#   - `strata serve --device cuda`: /v1/models and one chat completion;
#   - the figures on a synthesized Llama-3-8B-shaped Q4_K_M model: prefill of 512 and 4096
#     tokens, and single-stream decode after each, a 16k-token prefix restored from host RAM, and
#     64 streams served under bench/loadgen.py (STRATA_GPU_BENCH=0 skips them).
#
# With STRATA_GPU_ANCHOR too (the llama.cpp source tarball that `bench/gpu_anchor.sh pack` writes),
# the llama.cpp anchor: llama.cpp built there with CUDA, both engines on the same synthesized
# Llama-3-8B and Qwen3-4B shapes (bench/gpu_anchor.sh), under "anchor". With STRATA_BIN_BEFORE
# (an older strata), both builds' decode on the 8B shape, alternating (bench/gpu_decode_ab.sh),
# under "decode_ab".
#
#   bench/gpu.sh [out-dir]     out-dir defaults to $OUT, else build-cuda
#   STRATA_CUDA_BUILD=dir      the build tree (default build-cuda)
#   STRATA_GPU_LAYERS=0        skips the layers; STRATA_GPU_KERNELS=0 skips the kernels' build,
#                              checks and bench (to fit one part of it into a call)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
build=${STRATA_CUDA_BUILD:-build-cuda}
out=${1:-${OUT:-$build}}
mkdir -p "$out"

# The layers first: they need no build here (the carried strata).
layers_rc=0
if [ -n "${STRATA_BIN:-}" ] && [ "${STRATA_GPU_LAYERS:-1}" != 0 ]; then
  bench/gpu_layers.sh "$out" >"$out/layers.log" 2>&1
  layers_rc=$?
  tail -30 "$out/layers.log"
fi
anchor_rc=0
if [ -n "${STRATA_BIN:-}" ] && [ -n "${STRATA_GPU_ANCHOR:-}" ]; then
  bench/gpu_anchor.sh run "$out" >"$out/anchor.log" 2>&1
  anchor_rc=$?
  grep -v '^ ' "$out/anchor.log" | tail -40
fi
if [ -n "${STRATA_BIN:-}" ] && [ -n "${STRATA_BIN_BEFORE:-}" ]; then
  bench/gpu_decode_ab.sh "$STRATA_BIN_BEFORE" "$STRATA_BIN" "$out" || anchor_rc=1
fi
layers_rc=$((layers_rc | anchor_rc))

# gpu.json: the kernels' results (when given: build seconds and the three exit codes) and the
# parts' JSON files; the logs go into logs.tgz.
finish() {
  python3 - "$out" "$@" <<'PY'
import json, re, sys
out, result = sys.argv[1], {}
def tally(path):
    text = open(path).read()
    m = re.search(r"(\d+) passed, (\d+) failed \(seed (\d+)\)", text)
    return {"passed": int(m[1]), "failed": int(m[2]), "seed": int(m[3])} if m else {"error": text[-500:]}
if len(sys.argv) > 2:
    build_s, check_rc, memcheck_rc, bench_rc = map(int, sys.argv[2:])
    result = {"build_seconds": build_s,
              "checks": {"exit": check_rc, **tally(f"{out}/check.log")},
              "memcheck": {"exit": memcheck_rc, "summary": open(f"{out}/memcheck.log").read().strip().splitlines()[-1:]},
              "bench": json.load(open(f"{out}/bench.json")) if bench_rc == 0 else {"exit": bench_rc}}
for key in ("layers", "served", "anchor", "decode_ab"):
    try:
        result[key] = json.load(open(f"{out}/{key}.json"))
    except OSError:
        pass
json.dump(result, open(f"{out}/gpu.json", "w"), indent=2)
PY
  rm -f "$out/bench.json" "$out/layers.json" "$out/served.json" "$out/anchor.json" "$out/decode_ab.json"
  (cd "$out" && tar czf logs.tgz --remove-files ./*.log 2>/dev/null)
}
if [ "${STRATA_GPU_KERNELS:-1}" = 0 ]; then
  finish
  exit "$layers_rc"
fi

start=$(date +%s)
cmake -S kernels/cuda -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1 &&
  cmake --build "$build" -j16 >>"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
build_s=$(($(date +%s) - start))
echo "built in ${build_s}s"
cuobjdump --dump-resource-usage "$build/libstrata_kernels_cuda.a" >"$out/resources.log" 2>&1 || true

"$build/strata_cuda_check" | tee "$out/check.log"
check_rc=${PIPESTATUS[0]}
compute-sanitizer --tool memcheck --error-exitcode 1 "$build/strata_cuda_check" >"$out/memcheck.log" 2>&1
memcheck_rc=$?
echo "checks: exit $check_rc; under memcheck: exit $memcheck_rc ($(tail -1 "$out/memcheck.log"))"

"$build/strata_cuda_bench" "$out/bench.json"
bench_rc=$?

finish "$build_s" "$check_rc" "$memcheck_rc" "$bench_rc"
[ "$check_rc" = 0 ] && [ "$memcheck_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$layers_rc" = 0 ]
