#!/usr/bin/env bash
# Builds the reference engine, llama.cpp, from the source that the PyPI package llama-cpp-python
# vendors, outside the project (in $STRATA_LLAMA_DIR, default ~/.cache/strata/llama.cpp), and
# prints the folder that holds its programs (llama-completion, llama-simple, llama-bench, llama-perplexity,
# llama-tokenize, llama-server). Idempotent: a finished build is reused, and one that lacks a program
# (made before it was listed here) builds only what is missing. CPU only, tuned for this machine
# (-march=native): a build made on a CPU with other instruction sets (the cache folder carried to
# another machine) would stop on an illegal instruction, so the build records the CPU's model and
# flags and starts over when they differ.
#
#   bench/llamacpp.sh            # build (or find) it; prints e.g. ~/.cache/strata/llama.cpp/build/bin
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
dir=${STRATA_LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/llama.cpp}
src=$dir/llama_cpp_python-$version/vendor/llama.cpp
build=$dir/build
targets=(llama-completion llama-simple llama-bench llama-perplexity llama-tokenize llama-server llama-batched-bench)
cpu=$(grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo)

built() {
  [ -f "$build/.done-$version" ] || return 1
  [ "$(cat "$build/.done-$version")" = "$cpu" ] || return 1
  local t
  for t in "${targets[@]}"; do [ -x "$build/bin/$t" ] || return 1; done
}
if built; then
  echo "$build/bin"
  exit 0
fi
mkdir -p "$dir"
if [ ! -d "$src" ]; then
  python=python3
  [ -x .venv/bin/python ] && python=.venv/bin/python
  echo "llamacpp: downloading the llama-cpp-python $version source distribution" >&2
  "$python" -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$dir" >&2
  tar -xzf "$dir/llama_cpp_python-$version.tar.gz" -C "$dir"
fi
if [ -f "$build/.done-$version" ] && [ "$(cat "$build/.done-$version")" != "$cpu" ]; then
  echo "llamacpp: $build was made for another CPU; building it again for this one" >&2
  rm -rf "$build"
fi
echo "llamacpp: building ${targets[*]} in $build" >&2
# Without AMX: on a virtual machine whose CPU reports AMX, ggml's AMX matmul stopped on an illegal
# instruction at its first tile load (tileloadd in tinygemm_kernel_amx), and strata's kernels do
# not use AMX either, so both engines compare on the same AVX-512 (VNNI) instructions. GCC keeps
# an explicit -mno-* whatever -march=native says.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >&2
# ggml compiles through ccache when it finds it, and ccache takes -march=native at its word: have it
# hash what the flag means on this CPU, or objects made for another CPU come back from the cache.
CCACHE_COMPILERCHECK='%compiler% -march=native -Q --help=target' \
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >&2
echo "$cpu" > "$build/.done-$version"
echo "$build/bin"
