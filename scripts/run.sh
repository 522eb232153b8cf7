#!/usr/bin/env bash
# Installs what is missing, builds strata (optimized), and runs `strata serve` with the given
# arguments. With no --model, the server synthesizes its built-in demo model on first start.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$(pwd)/.cache/ccache}
scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_TESTS=OFF -DSTRATA_BENCH=OFF >/dev/null
cmake --build build/release -j "$(nproc)" --target strata
exec build/release/strata serve "$@"
