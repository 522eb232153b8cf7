#!/usr/bin/env python3
"""Time to first token of a long prompt whose prefix is cached, against the same prompt cold.

Each round sends a fresh random prompt of --tokens token ids (cold: nothing of it is cached), then a
prompt sharing its first --cached tokens and continuing differently (warm), both streamed to
/v1/completions for 2 tokens. Prints each round, then one JSON line: the medians of both TTFTs
(cold_ttft_ms, warm_ttft_ms), their ratio (warm_over_cold) and the median cached_tokens the server
reported for the warm prompts. Token ids are drawn (xorshift32, --seed) from [--vocab-from,
--vocab-to). --phase cold sends only the cold prompts and --phase warm only the warm ones (the same
prompts for the same --seed), so that the server can be killed and restarted in between.

    .venv/bin/python bench/prefix_ttft.py --url http://127.0.0.1:8080 --tokens 3000 --cached 2990 --rounds 3

Options (defaults): --url (http://127.0.0.1:8080) --tokens (3000) --cached (2990) --rounds (3)
--vocab-from (300) --vocab-to (50000) --seed (7) --phase (both | cold | warm)
--server-pid (none): the server's process id; the JSON line then also gives the CPU time (user +
system, from /proc) the server spent per cold and per warm request (cold_cpu_ms, warm_cpu_ms), a
figure that a busy shared machine disturbs far less than wall-clock TTFT.
"""
import argparse
import asyncio
import json
import os
import sys
import time

import aiohttp

from sse import sse_data

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
for name, default in [("url", "http://127.0.0.1:8080"), ("tokens", "3000"), ("cached", "2990"), ("rounds", "3"),
                      ("vocab-from", "300"), ("vocab-to", "50000"), ("seed", "7"), ("phase", "both"),
                      ("server-pid", "")]:
    parser.add_argument(f"--{name}", default=default)
opt = parser.parse_args()
if opt.phase not in ("both", "cold", "warm"):
    sys.exit(f"prefix_ttft: --phase is both, cold or warm, not {opt.phase}")
n = int(opt.tokens)
keep = int(opt.cached)
rounds = int(opt.rounds)
lo = int(opt.vocab_from)
span = int(opt.vocab_to) - lo
state = (int(opt.seed) & 0xFFFFFFFF) or 1
print(f"prefix_ttft: seed {opt.seed}", file=sys.stderr)


def rand():
    global state
    state = (state ^ (state << 13)) & 0xFFFFFFFF
    state ^= state >> 17
    state = (state ^ (state << 5)) & 0xFFFFFFFF
    return state


def tokens(k):
    return [lo + rand() % span for _ in range(k)]


async def ttft(http, prompt):
    t0 = time.perf_counter()
    body = json.dumps({"prompt": prompt, "max_tokens": 2, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    async with http.post(f"{opt.url}/v1/completions", data=body, headers={"Content-Type": "application/json"}) as res:
        if res.status != 200:
            sys.exit(f"prefix_ttft: HTTP {res.status}: {await res.text()}")
        first = None
        cached = 0
        async for data in sse_data(res.content.iter_any()):
            if data == "[DONE]":
                continue
            obj = json.loads(data)
            if first is None and obj.get("choices"):
                first = (time.perf_counter() - t0) * 1000
            if obj.get("usage"):
                cached = (obj["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    if first is None:
        sys.exit("prefix_ttft: the stream ended without a token")
    return {"ms": first, "cached": cached}


def server_cpu_ms():
    """User + system CPU time of the server process so far, in ms (None without --server-pid)."""
    if not opt.server_pid:
        return None
    with open(f"/proc/{opt.server_pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def timed(http, prompt, cpu):
    """ttft() of one prompt, adding the server's CPU time for it to cpu[0] when it is measured."""
    before = server_cpu_ms()
    out = await ttft(http, prompt)
    if before is not None:
        cpu[0] += server_cpu_ms() - before
    return out


def median(xs):
    return sorted(xs)[len(xs) // 2]


async def main():
    # The server keeps a long prefill's stream alive with SSE comments; a stream silent for 300 s fails.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=300)) as http:
        # The client's first request opens its connection: pay that here, untimed, so that a phase
        # run in a fresh process measures the server only.
        async with http.get(f"{opt.url}/health") as res:
            await res.read()
        cold, warm, cached_tokens = [], [], []
        cold_cpu, warm_cpu = [0.0], [0.0]
        run_cold, run_warm = opt.phase != "warm", opt.phase != "cold"
        for r in range(rounds):
            a = tokens(n)
            b = a[:keep] + tokens(n - keep)
            c = await timed(http, a, cold_cpu) if run_cold else None
            w = await timed(http, b, warm_cpu) if run_warm else None
            if c:
                cold.append(c["ms"])
            if w:
                warm.append(w["ms"])
                cached_tokens.append(w["cached"])
            line = f"round {r + 1}:"
            if c:
                line += f" cold {c['ms']:.0f} ms (cached {c['cached']})"
            if w:
                line += f" warm {w['ms']:.1f} ms (cached {w['cached']} of {n})"
            print(line, flush=True)
    mc = median(cold) if cold else None
    mw = median(warm) if warm else None
    print(json.dumps({"tokens": n, "shared_prefix": keep, "rounds": rounds, "cold_ttft_ms": mc, "warm_ttft_ms": mw,
                      "warm_over_cold": mw / mc if mc and mw else None,
                      "cached_tokens": median(cached_tokens) if cached_tokens else None,
                      "cold_cpu_ms": cold_cpu[0] / len(cold) if cold and opt.server_pid else None,
                      "warm_cpu_ms": warm_cpu[0] / len(warm) if warm and opt.server_pid else None}, separators=(",", ":")))


asyncio.run(main())
