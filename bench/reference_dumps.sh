#!/usr/bin/env bash
# Regenerates the llama.cpp reference dumps of the real models (tests/golden/real/*.llamacpp.json):
# builds llama.cpp from the llama-cpp-python source distribution (bench/llamacpp.sh, outside the
# project), links bench/reference/dump_logits.cpp against it, and runs it on each model's prompts
# (tests/golden/real/<name>.prompts.txt): top-20 logits at every prompt position and a greedy
# continuation of 64 tokens. tests/golden/check_real_model.py compares strata against them.
# A name synth/<arch> is a random-weight model that `strata synth` (build/strata) writes with the
# flags in tests/golden/synth/<arch>.args, dumped to tests/golden/synth/<arch>.llamacpp.json (the
# golden tests synthesize the same model and compare against it). The mixtures of experts are
# dumped without llama.cpp's flash attention (see dump_logits.cpp): its one-row decode rounds
# the queries to f16, which flips a random model's expert routing in the greedy continuation.
#
#   bench/reference_dumps.sh [smollm2 ... synth/qwen35]   # default: every real model with a prompts file
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(bench/llamacpp.sh)
build=$(dirname "$bin")
dir=$(dirname "$build")
src=$(ls -d "$dir"/llama_cpp_python-*/vendor/llama.cpp | head -1)
tool=$build/dump_logits
if [ ! -x "$tool" ] || [ bench/reference/dump_logits.cpp -nt "$tool" ] || [ src/common/prompt_lines.hpp -nt "$tool" ]; then
  echo "reference_dumps: building $tool" >&2
  libs=$(find "$build" -name 'libllama.a' -o -name 'libggml*.a' | sort -r)
  # -I. (the project root): the prompt-line reading it shares with `strata logits`.
  g++ -O2 -std=c++17 -I. -I"$src/include" -I"$src/ggml/include" bench/reference/dump_logits.cpp \
    -Wl,--start-group $libs -Wl,--end-group -fopenmp -lpthread -ldl -o "$tool"
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for p in tests/golden/real/*.prompts.txt; do names+=("$(basename "$p" .prompts.txt)"); done
fi
for name in "${names[@]}"; do
  if [[ $name == synth/* ]]; then
    dir=tests/golden/synth
    name=${name#synth/}
    model=$(mktemp --suffix=.gguf)
    # shellcheck disable=SC2046  # the flags file is word-split on purpose
    build/strata synth $(cat "$dir/$name.args") --quiet --out "$model"
  else
    dir=tests/golden/real
    model=$(scripts/fetch-model.sh "$name")
  fi
  echo "reference_dumps: $name ($model)" >&2
  exact=()
  [[ $name == qwen3moe || $name == gpt-oss ]] && exact=(no-flash-attn)
  "$tool" "$model" "$dir/$name.prompts.txt" "$dir/$name.llamacpp.json" 20 64 "$(nproc)" "${exact[@]}"
  if [[ $dir == tests/golden/synth ]]; then rm -f "$model"; fi
done
