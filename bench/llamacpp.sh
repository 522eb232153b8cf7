#!/usr/bin/env bash
# Builds the reference engine, llama.cpp, from the source that the PyPI package llama-cpp-python
# vendors, outside the project (in $STRATA_LLAMA_DIR, default ~/.cache/strata/llama.cpp), and
# prints the folder that holds its programs (llama-completion, llama-simple, llama-bench, llama-perplexity,
# llama-tokenize, llama-server). Idempotent: a finished build is reused, and one that lacks a program
# (made before it was listed here) builds only what is missing. CPU only, tuned for this machine.
#
#   bench/llamacpp.sh            # build (or find) it; prints e.g. ~/.cache/strata/llama.cpp/build/bin
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
dir=${STRATA_LLAMA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/llama.cpp}
src=$dir/llama_cpp_python-$version/vendor/llama.cpp
build=$dir/build
targets=(llama-completion llama-simple llama-bench llama-perplexity llama-tokenize llama-server)

built() {
  [ -f "$build/.done-$version" ] || return 1
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
echo "llamacpp: building ${targets[*]} in $build" >&2
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >&2
touch "$build/.done-$version"
echo "$build/bin"
