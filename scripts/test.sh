#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test:
#   1. the whole project under AddressSanitizer + UndefinedBehaviorSanitizer, all CTest tests;
#      then the kernel and golden tests again on each lower SIMD level this CPU has (STRATA_ISA);
#   2. the kernel tests under valgrind (a Release build; its virtual CPU lacks AVX-512), when
#      valgrind is installed;
#   3. the actor and cache tests (CTest label "tsan") under ThreadSanitizer;
#   4. the fuzz targets for a short run each (clang/libFuzzer);
#   5. the CUDA kernels compiled with nvcc, when it is installed (compile only: no GPU here;
#      bench/gpu.sh runs their checks on a GPU machine).
# Build trees live in build/ and are reused; ccache keeps its cache outside the checkout
# (~/.cache/strata/ccache), so a fresh clone on the same machine rebuilds from it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${STRATA_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths relative to the checkout, so that another clone on this machine hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

scripts/install-deps.sh
# The real models (SmolLM2-135M-Instruct, the default, and Gemma 3 270M) for the tests on them.
scripts/fetch-model.sh smollm2 >/dev/null
scripts/fetch-model.sh gemma3 >/dev/null

if [ ! -d ../shared ]; then
  echo "test.sh: ../shared (models, vocabularies, goldens, templates) is missing beside the project" >&2
  exit 1
fi

started=$SECONDS
step() { printf '\n=== %s (%d s in) ===\n' "$*" $((SECONDS - started)); }
failed=0
failed_dirs=()

# Runs ctest in build dir $1 with the remaining arguments; a failure is remembered for the summary.
run_ctest() {
  local dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure "$@") || { failed=1; failed_dirs+=("$dir"); }
}

# Repeats, at the end of the log, which tests failed and the last lines each printed, so that a
# log read from its tail still shows the failure.
summarize_failures() {
  local dir name
  for dir in "${failed_dirs[@]}"; do
    [ -f "$dir/Testing/Temporary/LastTestsFailed.log" ] || continue
    while IFS=: read -r _ name; do
      printf '\n--- failed: %s (%s) ---\n' "$name" "$dir"
      awk -v t="$name" '
        $0 ~ "Testing: " t "$" { on = 1; next }
        on && $0 ~ "^\"" t "\" end time" { on = 0 }
        on { print }' "$dir/Testing/Temporary/LastTest.log" | tail -n 60
    done <"$dir/Testing/Temporary/LastTestsFailed.log"
  done
}

step "ASan+UBSan build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j "$jobs"

step "ASan+UBSan: all tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_ctest build/asan -j "$jobs" --timeout 900

# The default run above took the best level; each lower one this CPU has runs the kernel tests
# and, to stay cheap (scalar under ASan is slow), the golden logits of two tiny models again.
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
lower_isas=()
if has avx2 fma f16c; then
  lower_isas+=(scalar)
  if has avx512f avx512bw avx512vl avx512dq avx512_vnni; then lower_isas+=(avx2); fi
fi
for isa in "${lower_isas[@]}"; do
  step "ASan+UBSan: kernel and golden tests with STRATA_ISA=$isa"
  STRATA_ISA=$isa build/asan/kernels/strata_kernels_tests --gtest_brief=1 || failed=1
  STRATA_ISA=$isa build/asan/tests/golden/strata_golden_tests --gtest_brief=1 \
    --gtest_filter='*/golden.logits_are*/tiny_llama_spm_f16:*/golden.logits_are*/tiny_qwen2_gpt2_f16' || failed=1
done

if command -v valgrind >/dev/null; then
  step "Release build (kernel tests under valgrind)"
  cmake -S . -B build/valgrind -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_BENCH=OFF >/dev/null
  cmake --build build/valgrind -j "$jobs" --target strata_kernels_tests
  step "valgrind: kernel tests"
  run_ctest build/valgrind -L valgrind --timeout 600
fi

step "TSan build (actor and cache tests)"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_SANITIZE=thread -DSTRATA_BENCH=OFF >/dev/null
cmake --build build/tsan -j "$jobs" --target strata_tsan_tests

step "TSan: tests labelled tsan"
# tests/tsan.supp: races TSan reports inside libraries it cannot see into (libzmq), and why.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
run_ctest build/tsan -L tsan -j "$jobs" --timeout 900

if [ -f tests/fuzz/CMakeLists.txt ]; then
  step "Fuzz targets (short runs)"
  CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_FUZZ=ON \
    -DSTRATA_TESTS=ON -DSTRATA_BENCH=OFF >/dev/null
  cmake --build build/fuzz -j "$jobs" --target strata_fuzz_targets
  run_ctest build/fuzz -L fuzz --timeout 600
fi

nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; }
if [ -n "$nvcc" ]; then
  step "CUDA kernels (compile only)"
  cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DSTRATA_TESTS=OFF -DSTRATA_BENCH=OFF >/dev/null
  cmake --build build/cuda -j "$jobs" --target strata_kernels_cuda strata_cuda_check strata_cuda_bench strata_engine_cuda
fi

if [ "$failed" -ne 0 ]; then
  summarize_failures
  echo "test.sh: some tests failed" >&2
  exit 1
fi
echo "test.sh: all tests passed in $((SECONDS - started)) s"
