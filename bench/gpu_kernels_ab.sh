#!/usr/bin/env bash
# The decode kernels of two trees on one GPU, in one call (bench/gpu.sh runs one tree's all): builds
# kernels/cuda of this tree and, with BEFORE_TREE, of that one; runs this tree's kernel checks (as
# launched, and with STRATA_CUDA_PDL=0); times the matvecs and their fused sets
# (`strata_cuda_bench matvec,sets`) for the older tree, this tree, this tree with STRATA_CUDA_PDL=0,
# and this tree under each STRATA_CUDA_MATVEC setting in MATVEC_SHAPES (';'-separated). With
# STRATA_BIN and STRATA_BIN_BEFORE, then the decode of both strata builds (bench/gpu_decode_ab.sh).
# Writes the logs and bench JSON files into the out-dir.
#
#   [BEFORE_TREE=dir] [MATVEC_SHAPES="q4_k=2x1;q4_k=1x1"] [STRATA_BIN=a STRATA_BIN_BEFORE=b] bench/gpu_kernels_ab.sh out-dir
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:-${OUT:-build-cuda}}
mkdir -p "$out"
here=$(pwd)
rc=0
build() {  # tree build-dir
  cmake -S "$1/kernels/cuda" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/build-$(basename "$2").log" 2>&1 &&
    cmake --build "$2" -j16 --target strata_cuda_check strata_cuda_bench >>"$out/build-$(basename "$2").log" 2>&1 ||
    { tail -30 "$out/build-$(basename "$2").log"; return 1; }
}
start=$(date +%s)
build "$here" /tmp/kab-after || exit 1
if [ -n "${BEFORE_TREE:-}" ]; then build "$BEFORE_TREE" /tmp/kab-before & fi
echo "built in $(($(date +%s) - start)) s"
/tmp/kab-after/strata_cuda_check >"$out/check.log" 2>&1 || rc=1
STRATA_CUDA_PDL=0 /tmp/kab-after/strata_cuda_check >"$out/check-nopdl.log" 2>&1 || rc=1
grep -E "FAIL|passed" "$out/check.log" "$out/check-nopdl.log" | tail -12
wait
# The decode of both strata builds first: it is the figure that counts.
if [ -n "${STRATA_BIN:-}" ] && [ -n "${STRATA_BIN_BEFORE:-}" ]; then
  bench/gpu_decode_ab.sh "$STRATA_BIN_BEFORE" "$STRATA_BIN" "$out" || rc=1
fi
parts=${BENCH_PARTS:-matvec,sets}
bench() {  # name binary [env...]
  local name=$1 bin=$2
  shift 2
  env STRATA_CUDA_BENCH_TYPES="${BENCH_TYPES:-q4_K,q6_K,q8_0}" "$@" "$bin" "$out/bench-$name.json" "$parts" >"$out/bench-$name.log" 2>&1 || { echo "bench $name failed"; rc=1; }
}
[ -x /tmp/kab-before/strata_cuda_bench ] && bench before /tmp/kab-before/strata_cuda_bench
bench after /tmp/kab-after/strata_cuda_bench
bench after-nopdl /tmp/kab-after/strata_cuda_bench STRATA_CUDA_PDL=0
i=0
IFS=';' read -ra shapes <<<"${MATVEC_SHAPES:-}"
for sh in "${shapes[@]}"; do
  i=$((i + 1))
  echo "$sh" >"$out/shape-$i.txt"
  bench "shape-$i" /tmp/kab-after/strata_cuda_bench "STRATA_CUDA_MATVEC=$sh"
done
# One table: us per case, a column per run.
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
runs = {}
for p in sorted(glob.glob(f"{out}/bench-*.json")):
    name = os.path.basename(p)[6:-5]
    try:
        j = json.load(open(p))
    except ValueError:
        continue
    cases = {}
    for c in j.get("matvec", []):
        cases[f"{c['type']} {c['rows']}x{c['k']} n={c['batch']}"] = c["us"]
    for c in j.get("matvec_sets", []):
        cases[f"{c['type']} {c['set']} {'one' if c['one_launch'] else 'sep'}"] = c["us"]
    runs[name] = cases
names = sorted(runs, key=lambda n: (n != "before", n != "after", n))
for n in names:
    if n.startswith("shape-"):
        print(n, open(f"{out}/{n}.txt").read().strip())
keys = list(next(iter(runs.values()), {}).keys()) if runs else []
print(f"{'case':34s}" + "".join(f"{n[:12]:>13s}" for n in names))
for k in keys:
    if not any(t in k for t in ("q4_K", "q6_K", "q8_0", "q5_K")):
        continue
    print(f"{k:34s}" + "".join(f"{runs[n].get(k, float('nan')):13.2f}" for n in names))
PY
exit $rc
