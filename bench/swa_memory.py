#!/usr/bin/env python3
"""Resident memory of a sliding-window model (Gemma 3) through one long prompt, strata against
llama.cpp's llama-server (same model file, its default SWA cache), at several context lengths, in
one run.

For each context (--contexts, default 8192 and 32768) and engine, starts a server with that
context, sends one prompt of context - 192 tokens (token ids, xorshift32 from --seed) streamed with
one generated token, and reads the server's VmRSS and VmHWM from /proc once the reply is done. The
strata rows: `--cache-mode off` (what the running sequence costs: the global layers' KV over the
context, the local layers' windows) and `--cache-mode hot` (the same, plus the prompt's blocks and
frozen boundary snapshots kept in the hot tier, whose bytes /admin/api/stats reports). Prints one
line per run, a table, and one JSON line.

    .venv/bin/python bench/swa_memory.py --strata build/bench/strata \\
        [--model ~/.cache/strata/models/gemma-3-270m-q4_k_m.gguf] \\
        [--llama-server "$(bench/llamacpp.sh)/llama-server"]

Options (defaults): --contexts (8192,32768) --modes (off,hot: strata's cache modes to run; empty: llama.cpp only) --seed (7) --threads (2) --vocab-from (300) --vocab-to (30000)
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

import httpx

from server_process import Server, Xorshift32

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--strata", required=True)
parser.add_argument("--model", default=os.path.expanduser("~/.cache/strata/models/gemma-3-270m-q4_k_m.gguf"))
parser.add_argument("--llama-server", default="")
parser.add_argument("--contexts", default="8192,32768")
parser.add_argument("--modes", default="off,hot")
for name, default in [("seed", 7), ("threads", 2), ("vocab-from", 300), ("vocab-to", 30000)]:
    parser.add_argument(f"--{name}", type=int, default=default)
opt = parser.parse_args()
print(f"swa_memory: seed {opt.seed}", file=sys.stderr)


def strata(ctx: int, cache_mode: str, conf_dir: str) -> Server:
    conf = os.path.join(conf_dir, f"strata-{ctx}.toml")
    with open(conf, "w") as f:
        f.write(f"[model]\nctx = {ctx}\ncompute_threads = {opt.threads}\n")
    return Server([opt.strata, "serve", "--port", "0", "--model", opt.model, "--config", conf, "--cache-mode", cache_mode,
                   "--cache-dir", conf_dir],
                  re.compile(r"listening on http://127\.0\.0\.1:(\d+)"), lambda m: f"http://127.0.0.1:{m.group(1)}")


def llama(ctx: int) -> Server:
    port = 18100 + os.getpid() % 1000
    return Server([opt.llama_server, "-m", opt.model, "--port", str(port), "--host", "127.0.0.1", "-c", str(ctx),
                   "-t", str(opt.threads), "-np", "1"],
                  None, lambda m: f"http://127.0.0.1:{port}")


def prefill(url: str, tokens: list[int], llama_api: bool) -> float:
    """Sends the prompt (streamed, one generated token); returns the seconds it took."""
    if llama_api:
        path, body = "/completion", {"prompt": tokens, "n_predict": 1, "temperature": 0, "stream": True,
                                     "cache_prompt": True}
    else:
        path, body = "/v1/completions", {"prompt": tokens, "max_tokens": 1, "temperature": 0, "stream": True}
    t0 = time.perf_counter()
    with httpx.stream("POST", url + path, json=body, timeout=3600) as r:
        if r.status_code != 200:
            sys.exit(f"swa_memory: {url}{path}: {r.status_code} {r.read()[:300]!r}")
        for _ in r.iter_lines():
            pass
    return time.perf_counter() - t0


rows = []
with tempfile.TemporaryDirectory() as tmp:
    for ctx in [int(c) for c in opt.contexts.split(",")]:
        tokens = Xorshift32(opt.seed, opt.vocab_from, opt.vocab_to).tokens(ctx - 192)
        runs = [(f"strata (cache {mode})", lambda mode=mode: strata(ctx, mode, tmp), False) for mode in opt.modes.split(",") if mode]
        if opt.llama_server:
            runs.append(("llama.cpp", lambda: llama(ctx), True))
        for name, start, llama_api in runs:
            s = start()
            try:
                idle, _ = s.memory_mib()
                seconds = prefill(s.url, tokens, llama_api)
                rss, hwm = s.memory_mib()
                snap = 0.0
                if not llama_api:
                    stats = httpx.get(f"{s.url}/admin/api/stats", timeout=30).json()
                    snap = stats["snapshot_bytes"] / 1048576
            finally:
                s.stop()
            row = {"engine": name, "context": ctx, "prompt": len(tokens), "idle_mib": round(idle, 1),
                   "rss_mib": round(rss, 1), "hwm_mib": round(hwm, 1), "snapshot_mib": round(snap, 1),
                   "prefill_s": round(seconds, 1)}
            print(f"{name}: context {ctx}, prompt {len(tokens)} tokens in {seconds:.1f} s: RSS idle {idle:.0f} MiB, "
                  f"after {rss:.0f} MiB, peak {hwm:.0f} MiB" + (f" (snapshots {snap:.0f} MiB)" if not llama_api else ""),
                  flush=True)
            rows.append(row)

print(f"model {os.path.basename(opt.model)}; MiB")
print(f"{'engine':<20} {'context':>7} {'idle':>7} {'RSS':>7} {'peak':>7} {'snapshots':>9}")
for r in rows:
    print(f"{r['engine']:<20} {r['context']:>7} {r['idle_mib']:>7.0f} {r['rss_mib']:>7.0f} {r['hwm_mib']:>7.0f} "
          f"{r['snapshot_mib']:>9.0f}")
print(json.dumps(rows))
