#!/usr/bin/env python3
"""Runs `strata bench --json` on one shared model and checks its report.

Every key other tools read is there, the figures are finite and positive, and they agree with one
another (the bytes per token are the weights' plus the KV's, the bound is the median bandwidth over
them, the median probe lies between the slowest and the fastest, the probe's read loop is one of
the three).

Usage: check_bench.py STRATA SHARED_DIR MODEL_NAME
"""

import json
import math
import subprocess
import sys


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main() -> int:
    strata, shared, name = sys.argv[1:4]
    prompt, gen = 16, 20  # two stretches of decode: 16 tokens and 4
    text = subprocess.run([strata, "bench", "--model", f"{shared}/models/{name}.gguf", "--prompt", str(prompt),
                           "--gen", str(gen), "--json"], check=True, stdout=subprocess.PIPE,
                          encoding="utf-8").stdout
    r = json.loads(text, parse_constant=_no_constant)

    def fail(msg: str) -> None:
        print(f"{name}: {msg}\n{text}", file=sys.stderr)
        sys.exit(1)

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b))

    for k in ("open_s", "file_bytes", "prefill_tok_s", "decode_tok_s", "bandwidth_gb_s", "bandwidth_min_gb_s",
              "bandwidth_max_gb_s", "bytes_per_token", "weight_bytes_per_token", "kv_bytes_per_token",
              "decode_bound_tok_s", "bandwidth_share"):
        v = r.get(k)
        if not is_number(v) or not math.isfinite(v) or v <= 0:
            fail(f"{k} is {v}")
    if not (is_number(r.get("prompt_tokens")) and r["prompt_tokens"] == prompt
            and is_number(r.get("gen_tokens")) and r["gen_tokens"] == gen):
        fail(f"ran {r.get('prompt_tokens')} + {r.get('gen_tokens')} tokens")
    loads = r.get("probe_loads_per_iteration")
    if not (is_number(loads) and loads in (1, 2, 4)):
        fail(f"probe loop of {loads} loads")
    if not (r["bandwidth_min_gb_s"] <= r["bandwidth_gb_s"] <= r["bandwidth_max_gb_s"]):
        fail("median bandwidth outside its range")
    if not close(r["bytes_per_token"], r["weight_bytes_per_token"] + r["kv_bytes_per_token"]):
        fail("bytes per token are not weights + KV")
    if not close(r["decode_bound_tok_s"], r["bandwidth_gb_s"] * 1e9 / r["bytes_per_token"]):
        fail("bound is not bandwidth / bytes per token")
    if r["weight_bytes_per_token"] > r["file_bytes"]:
        fail("reads more weight bytes per token than the file holds")
    print(f"{name}: decode {r['decode_tok_s']:.1f} tok/s, {100 * r['bandwidth_share']:.0f}% of the bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
