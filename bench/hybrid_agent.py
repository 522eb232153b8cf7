#!/usr/bin/env python3
"""Multi-turn agent workload on a model with non-sliceable state (a recurrent hybrid such as
qwen35, or a sliding-window model such as Gemma 3 with --model): time to first token per turn with
frozen boundary snapshots on and off, and on llama.cpp's server, in one run.

An agent's conversation: a shared system prompt of --system tokens (tool definitions and the like,
which an earlier conversation left cached: it is sent once before the turns and not counted), then
--turns turns; each turn sends the whole conversation so far plus --grow new tokens and generates
--gen tokens, which the next turn's prompt repeats. Prompts are token ids (xorshift32, --seed), sent
to the completions endpoint streamed, and TTFT is the time to the first streamed piece. Then a
second turn at --long tokens against the same prompt cold. Last, the same after a restart: a cold
--long-token prompt on `strata serve --cache-mode tiered`, the server stopped and started again on
the same --cache-dir, then the second turn, whose snapshot and blocks come back from the SSD tier.

Servers: `strata serve --cache-mode hot` (snapshots on) and `--cache-mode off` (snapshots off),
each started by this script on a free port with --strata; and llama.cpp's llama-server (--llama-server,
when given: one slot, its default context checkpoints per slot, the prompt cached). Prints one line
per turn and engine, the totals, the second turns and one JSON line.

    .venv/bin/python bench/hybrid_agent.py --strata build/bench/strata [--model M.gguf] \
        [--llama-server "$(bench/llamacpp.sh)/llama-server"]

Without --model it synthesizes the qwen35 it was measured on (8 layers, every 4th attending in full;
hidden 512, q8_0, GPT-2 vocabulary from ../shared) into the system's temporary folder; with
--arch granitehybrid, a Mamba-2 hybrid of the same shape.

Options (defaults): --turns (10) --system (4000) --grow (100) --gen (16) --long (8000) --seed (7)
--threads (2) --vocab-from (300) --vocab-to (30000) --restart (1; 0: skip the restart run)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import httpx

from server_process import Server, Xorshift32

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--strata", required=True)
parser.add_argument("--model", default="")
parser.add_argument("--arch", default="qwen35", choices=["qwen35", "granitehybrid"])
parser.add_argument("--llama-server", default="")
for name, default in [("turns", 10), ("system", 4000), ("grow", 100), ("gen", 16), ("long", 8000), ("seed", 7),
                      ("threads", 2), ("vocab-from", 300), ("vocab-to", 30000), ("restart", 1)]:
    parser.add_argument(f"--{name}", type=int, default=default)
opt = parser.parse_args()
print(f"hybrid_agent: seed {opt.seed}", file=sys.stderr)
if not opt.model:
    opt.model = os.path.join(tempfile.gettempdir(), f"strata-hybrid-agent-{opt.arch}.gguf")
    if not os.path.exists(opt.model):
        subprocess.run([opt.strata, "synth", "--arch", opt.arch, "--layers", "8", "--hidden", "512", "--heads", "4",
                        "--kv-heads", "1", "--head-dim", "128", "--ffn", "1408", "--vocab",
                        "../shared/vocab/ggml-vocab-gpt-2.gguf", "--type", "q8_0", "--ctx", "16384", "--quiet",
                        "--out", opt.model], check=True)
ids = Xorshift32(opt.seed, opt.vocab_from, opt.vocab_to)
rand_tokens = ids.tokens


def strata(cache_mode: str, cache_dir: str) -> Server:
    return Server([opt.strata, "serve", "--port", "0", "--model", opt.model, "--cache-mode", cache_mode,
                   "--cache-dir", cache_dir],
                  re.compile(r"listening on http://127\.0\.0\.1:(\d+)"), lambda m: f"http://127.0.0.1:{m.group(1)}", timeout=300)


def llama(port: int, ctx: int) -> Server:
    return Server([opt.llama_server, "-m", opt.model, "--port", str(port), "--host", "127.0.0.1", "-c", str(ctx),
                   "-t", str(opt.threads), "-np", "1"],
                  None, lambda m: f"http://127.0.0.1:{port}", timeout=300)


def first_token(url: str, tokens: list[int], gen: int, llama_api: bool) -> tuple[float, list[int]]:
    """Streams a greedy completion of `tokens`; returns the TTFT in seconds and the reply as the next
    turn repeats it: `gen` filler ids made from the prompt's length, the same for every engine (the
    engines' replies differ, and a tokenizer round trip is no part of what is measured)."""
    if llama_api:
        path, body = "/completion", {"prompt": tokens, "n_predict": gen, "temperature": 0, "stream": True,
                                     "cache_prompt": True, "ignore_eos": True}
    else:
        path, body = "/v1/completions", {"prompt": tokens, "max_tokens": gen, "temperature": 0,
                                         "stream": True, "ignore_eos": True}
    t0 = time.perf_counter()
    ttft = None
    with httpx.stream("POST", url + path, json=body, timeout=600) as r:
        if r.status_code != 200:
            sys.exit(f"hybrid_agent: {url}{path}: {r.status_code} {r.read()[:300]!r}")
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            if ttft is None:
                ttft = time.perf_counter() - t0
    return ttft or 0.0, rand_tokens_fixed(len(tokens), gen)


def rand_tokens_fixed(salt: int, n: int) -> list[int]:
    return [opt.vocab_from + (salt * 2654435761 + i * 40503) % (opt.vocab_to - opt.vocab_from) for i in range(n)]


def conversation(url: str, llama_api: bool) -> list[float]:
    """The turns' TTFTs (seconds), after the system prompt was sent once."""
    ids.reset()
    context = rand_tokens(opt.system)
    first_token(url, context + rand_tokens_fixed(1, 4), 1, llama_api)  # an earlier conversation
    out = []
    for _ in range(opt.turns):
        context = context + rand_tokens(opt.grow)
        ttft, reply = first_token(url, context, opt.gen, llama_api)
        out.append(ttft)
        context = context + reply
    return out


def second_turn(url: str, llama_api: bool) -> tuple[float, float]:
    """TTFT of a --long-token prompt cold, and of the next turn that repeats it."""
    first = rand_tokens(opt.long)
    cold, reply = first_token(url, first, opt.gen, llama_api)
    warm, _ = first_token(url, first + reply + rand_tokens(32), opt.gen, llama_api)
    return cold, warm


def second_turn_after_restart(cache_dir: str) -> tuple[float, float, dict]:
    """TTFT of a --long-token prompt cold on a tiered strata, and of the next turn on a strata started
    again on the same cache folder; with the restarted server's snapshot counters."""
    first = rand_tokens(opt.long)
    s = strata("tiered", cache_dir)
    try:
        cold, reply = first_token(s.url, first, opt.gen, False)
    finally:
        s.stop()
    s = strata("tiered", cache_dir)
    try:
        warm, _ = first_token(s.url, first + reply + rand_tokens(32), opt.gen, False)
        snapshots = httpx.get(f"{s.url}/admin/api/stats", timeout=30).json().get("snapshots", {})
    finally:
        s.stop()
    return cold, warm, snapshots


results = {}
restart = None
with tempfile.TemporaryDirectory() as cache_dir:
    for name, mode in [("snapshots on", "hot"), ("snapshots off", "off")]:
        s = strata(mode, cache_dir)
        try:
            results[name] = {"turns": conversation(s.url, False), "second_turn": second_turn(s.url, False)}
        finally:
            s.stop()
if opt.restart:
    with tempfile.TemporaryDirectory() as cache_dir:
        restart = second_turn_after_restart(cache_dir)
if opt.llama_server:
    ctx = max(opt.system + opt.turns * (opt.grow + opt.gen), opt.long + opt.gen + 64) + 256
    s = llama(18000 + os.getpid() % 1000, ctx)
    try:
        results["llama.cpp"] = {"turns": conversation(s.url, True), "second_turn": second_turn(s.url, True)}
    finally:
        s.stop()

print(f"{opt.turns} turns: system prompt {opt.system} tokens (cached before), +{opt.grow} tokens and {opt.gen} "
      f"generated per turn; TTFT in ms")
names = list(results)
print("turn  context  " + "  ".join(f"{n:>14}" for n in names))
for t in range(opt.turns):
    ctx = opt.system + (t + 1) * opt.grow + t * opt.gen
    print(f"{t + 1:>4}  {ctx:>7}  " + "  ".join(f"{results[n]['turns'][t] * 1000:>14.1f}" for n in names))
totals = {n: sum(results[n]["turns"]) for n in names}
print("total          " + "  ".join(f"{totals[n] * 1000:>14.1f}" for n in names))
for n in names:
    cold, warm = results[n]["second_turn"]
    print(f"{n}: second turn at {opt.long} tokens: cold {cold * 1000:.1f} ms, warm {warm * 1000:.1f} ms "
          f"({100 * warm / cold:.1f}% of cold)")
if restart:
    print(f"snapshots on (tiered), after a restart: second turn at {opt.long} tokens: cold {restart[0] * 1000:.1f} ms, "
          f"warm {restart[1] * 1000:.1f} ms ({100 * restart[1] / restart[0]:.1f}% of cold); snapshots {restart[2]}")
summary = {"total_ttft_ms": {n: round(totals[n] * 1000, 1) for n in names},
           "on_over_off": round(totals["snapshots off"] / totals["snapshots on"], 2),
           "second_turn_pct_of_cold": {n: round(100 * results[n]["second_turn"][1] / results[n]["second_turn"][0], 2)
                                       for n in names}}
if restart:
    summary["after_restart"] = {"cold_ms": round(restart[0] * 1000, 1), "warm_ms": round(restart[1] * 1000, 1),
                                "pct_of_cold": round(100 * restart[1] / restart[0], 2),
                                "snapshot_restores": restart[2].get("restores")}
if "llama.cpp" in totals:
    summary["llamacpp_over_on"] = round(totals["llama.cpp"] / totals["snapshots on"], 2)
print(json.dumps(summary))
