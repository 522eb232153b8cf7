#!/usr/bin/env bash
# Two strata builds (-DSTRATA_CUDA=ON) timed in one run on the same GPU, alternating so that the
# card's state falls on both alike: `strata gpu-check --bench` on a synthesized Llama-3-8B-shaped
# Q4_K_M model (decode of 128 tokens after each prompt length of AB_BENCH, default 16 and 4,096;
# AB_BENCH=16,16384 for the long context). Writes OUT/decode_ab.json.
#
#   bench/gpu_decode_ab.sh BEFORE_BIN AFTER_BIN OUT      env: ROUNDS (2), AB_BENCH (16,4096), STRATA_GPU_WORK (/tmp/strata-gpu)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
before=$1 after=$2 out=$3
work=${STRATA_GPU_WORK:-/tmp/strata-gpu}
mkdir -p "$work" "$out"
model="$work/anchor-llama8b-q4_k_m.gguf"  # the anchor's file, when it ran on this machine
[ -f "$model" ] || "$after" synth --arch llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab builtin \
  --type q4_k_m --ctx 20480 --seed 1 --out "$model" >"$out/synth-ab.log" 2>&1 || { echo "synth failed"; exit 1; }
rc=0
runs=()
for round in $(seq 1 "${ROUNDS:-2}"); do
  for side in before after; do
    bin=$before
    [ $side = after ] && bin=$after
    echo "== round $round: $side"
    timeout 300 "$bin" gpu-check --model "$model" --no-cpu --bench "${AB_BENCH:-16,4096}" --bench-gen 128 \
      --json "$work/ab-$side-$round.json" >"$out/ab-$side-$round.log" 2>&1 || rc=1
    grep "^prompt" "$out/ab-$side-$round.log"
    runs+=("$side-$round:$work/ab-$side-$round.json")
  done
done
python3 - "$out/decode_ab.json" "${runs[@]}" <<'PY'
import json, sys
result = {}
for r in sys.argv[2:]:
    name, path = r.split(":", 1)
    try:
        result[name] = json.load(open(path))["bench"]
    except (OSError, ValueError, KeyError) as e:
        result[name] = {"error": str(e)}
json.dump(result, open(sys.argv[1], "w"), indent=2)
PY
exit $rc
