#!/usr/bin/env python3
"""Runs `strata logits` on one shared model and checks its dump against the exact reference.

As ../shared/golden/README.md defines the comparison: the same tokens per case; over every
reference top-20 entry that is also in our top-20, max_abs and mean_abs within the manifest
tolerance, with at most 20% missing; the first greedy token equal to the reference's where the
reference's top-1/top-2 gap exceeds twice the tolerance.

Usage: check_logits.py STRATA SHARED_DIR MODEL_NAME
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    strata, shared, name = sys.argv[1:4]

    def fail(msg: str) -> None:
        print(f"{name}: {msg}", file=sys.stderr)
        sys.exit(1)

    with tempfile.TemporaryDirectory(prefix="strata-logits-") as tmp:
        out = Path(tmp) / "out.json"
        subprocess.run([strata, "logits", "--model", f"{shared}/models/{name}.gguf", "--prompts",
                        f"{shared}/golden/prompts.txt", "--top", "20", "--out", str(out)], check=True)
        got = json.loads(out.read_text(encoding="utf-8"))
    ref = json.loads(Path(f"{shared}/golden/{name}.ref.json").read_text(encoding="utf-8"))
    tol = json.loads(Path(f"{shared}/golden/manifest.json").read_text(encoding="utf-8"))["models"][name]["tolerance"]

    if got["n_vocab"] != ref["n_vocab"]:
        fail(f"n_vocab {got['n_vocab']}, reference {ref['n_vocab']}")
    if len(got["cases"]) != len(ref["cases"]):
        fail(f"{len(got['cases'])} cases, reference {len(ref['cases'])}")
    worst = total = 0.0
    compared = missing = 0
    worst_lse = 0.0
    for i, c in enumerate(ref["cases"]):
        g = got["cases"][i]
        if g["prompt"] != c["prompt"]:
            fail(f"case {i}: prompt differs")
        if g["tokens"] != c["tokens"]:
            fail(f"case {i}: tokens differ")
        if len(g["positions"]) != len(c["positions"]):
            fail(f"case {i}: {len(g['positions'])} positions")
        if len(g["greedy"]) != 16:
            fail(f"case {i}: {len(g['greedy'])} greedy tokens")
        for j, p in enumerate(c["positions"]):
            mine_top = g["positions"][j]["top"]
            if len(mine_top) != 20:
                fail(f"case {i} position {j}: {len(mine_top)} top entries")
            mine = {t: l for t, l in mine_top}
            for t, l in p["top"]:
                if t not in mine:
                    missing += 1
                    continue
                d = abs(mine[t] - l)
                worst = max(worst, d)
                total += d
                compared += 1
            worst_lse = max(worst_lse, abs(g["positions"][j]["logsumexp"] - p["logsumexp"]))
        last = c["positions"][-1]["top"]
        if last[0][1] - last[1][1] > 2 * tol["max_abs"] and g["greedy"][0] != c["greedy"][0]:
            fail(f"case {i}: first greedy token {g['greedy'][0]}, reference {c['greedy'][0]}")
    mean = total / max(1, compared)
    missing_share = missing / max(1, missing + compared)
    print(f"{name}: max_abs {worst:.6f} mean_abs {mean:.7f} missing {100 * missing_share:.1f}% "
          f"logsumexp {worst_lse:.6f} (tolerance {tol['max_abs']} / {tol['mean_abs']})")
    if compared == 0:
        fail("nothing compared")
    if worst > tol["max_abs"] or mean > tol["mean_abs"] or missing_share > 0.2 or worst_lse > 10 * tol["max_abs"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
