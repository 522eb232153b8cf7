#!/usr/bin/env bash
# Regenerates the llama.cpp reference dumps of the real models (tests/golden/real/*.llamacpp.json):
# builds llama.cpp from the llama-cpp-python source distribution (bench/llamacpp.sh, outside the
# project), links bench/reference/dump_logits.cpp against it, and runs it on each model's prompts
# (tests/golden/real/<name>.prompts.txt): top-20 logits at every prompt position and a greedy
# continuation of 64 tokens. tests/golden/check_real_model.py compares strata against them.
#
#   bench/reference_dumps.sh [smollm2 ...]       # default: every model with a prompts file
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(bench/llamacpp.sh)
build=$(dirname "$bin")
dir=$(dirname "$build")
src=$(ls -d "$dir"/llama_cpp_python-*/vendor/llama.cpp | head -1)
tool=$build/dump_logits
if [ ! -x "$tool" ] || [ bench/reference/dump_logits.cpp -nt "$tool" ]; then
  echo "reference_dumps: building $tool" >&2
  libs=$(find "$build" -name 'libllama.a' -o -name 'libggml*.a' | sort -r)
  g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" bench/reference/dump_logits.cpp \
    -Wl,--start-group $libs -Wl,--end-group -fopenmp -lpthread -ldl -o "$tool"
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for p in tests/golden/real/*.prompts.txt; do names+=("$(basename "$p" .prompts.txt)"); done
fi
for name in "${names[@]}"; do
  model=$(scripts/fetch-model.sh "$name")
  echo "reference_dumps: $name ($model)" >&2
  "$tool" "$model" "tests/golden/real/$name.prompts.txt" "tests/golden/real/$name.llamacpp.json" 20 64 "$(nproc)"
done
