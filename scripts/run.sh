#!/usr/bin/env bash
# Installs what is missing, builds strata (optimized), fetches the default model
# (SmolLM2-135M-Instruct, see scripts/fetch-model.sh) and runs `strata serve` with the given
# arguments. With no --model (and no --demo), the server serves that default model.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/ccache}
# Paths relative to the checkout, so that another clone on this machine hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
scripts/install-deps.sh
scripts/fetch-model.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=OFF -DSTRATA_BENCH=OFF >/dev/null
cmake --build build/release -j "$(nproc)" --target strata
exec build/release/strata serve "$@"
