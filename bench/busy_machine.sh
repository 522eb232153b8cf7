#!/usr/bin/env bash
# The compute pool on a machine that other work keeps busy: `strata bench` (PROMPT tokens, then GEN
# decoded) with THREADS threads, first alone, then beside BUSY processes that each spin on a core
# forever (the load of another job on a shared machine). With a second build (BEFORE), the two
# alternate ROUNDS times; each line prints a run's prefill and decode tok/s, the summary the medians
# and each build's decode under load as a share of its decode alone.
#
#   bench/busy_machine.sh BUILD [BEFORE_BUILD]     e.g. bench/busy_machine.sh build/int build/before
#   env: MODEL (the default model, SmolLM2), THREADS (2), BUSY (1), ROUNDS (3), PROMPT (128), GEN (128)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
builds=("${1:?usage: bench/busy_machine.sh BUILD [BEFORE_BUILD]}")
[ -n "${2:-}" ] && builds+=("$2")
model=${MODEL:-$(scripts/fetch-model.sh smollm2)}
threads=${THREADS:-2}
busy=${BUSY:-1}
rounds=${ROUNDS:-3}
for b in "${builds[@]}"; do [ -x "$b/strata" ] || { echo "busy_machine.sh: $b/strata is missing" >&2; exit 1; }; done

spinners=()
stop_spinners() {
  if [ ${#spinners[@]} -gt 0 ]; then
    kill "${spinners[@]}" 2> /dev/null || true
    wait "${spinners[@]}" 2> /dev/null || true  # killed: a nonzero status, expected
  fi
  spinners=()
}
trap stop_spinners EXIT

results=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for load in 0 "$busy"; do
    for ((i = 0; i < load; i++)); do
      sh -c 'while :; do :; done' &
      spinners+=($!)
    done
    for b in "${builds[@]}"; do
      line=$("$b/strata" bench --model "$model" --prompt "${PROMPT:-128}" --gen "${GEN:-128}" --threads "$threads" --json 2> /dev/null)
      "$py" -c 'import json, sys; r = json.loads(sys.argv[1]); print(sys.argv[2], sys.argv[3], "%.1f %.1f" % (r["prefill_tok_s"], r["decode_tok_s"]))' \
        "$line" "$b" "$load" | tee -a "$results" |
        awk -v r="$round" '{ printf "round %s  %-20s busy %s  prefill %8.1f  decode %7.1f tok/s\n", r, $1, $2, $3, $4 }'
    done
    stop_spinners
  done
done
"$py" - "$results" "$threads" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for b, load, pre, dec in rows:
    by.setdefault((b, int(load)), []).append((float(pre), float(dec)))
print(f"medians, {sys.argv[2]} threads:")
for b in dict.fromkeys(r[0] for r in rows):
    alone = statistics.median(d for _, d in by[(b, 0)])
    for load in sorted({k[1] for k in by if k[0] == b}):
        pre = statistics.median(p for p, _ in by[(b, load)])
        dec = statistics.median(d for _, d in by[(b, load)])
        print(f"  {b:20s} busy {load}: prefill {pre:8.1f}  decode {dec:7.1f} tok/s  ({dec / alone:.0%} of its decode alone)")
PY
rm -f "$results"
