#!/usr/bin/env python3
"""An agent loop against OpenAI-compatible servers: time to first token per tool step as the context grows.

--agents agents run at once, each a conversation of --steps steps. A step sends the conversation so
far to /v1/chat/completions (with one function tool, as agent frameworks send it, temperature 0)
and times the answer's first token; then the agent appends an assistant tool call and a tool result
of about --result-tokens tokens and asks again, so that each prompt is the previous one plus a few
hundred tokens. The calls and results are written by this script (seeded words, different for every
agent), not by the model, so that every server sees the same conversations.

The TTFT is the time to a streamed answer's first token: the request asks for one token
(max_tokens 1), and the first token is timed as the stream's end, which a server that holds back
text that may begin a tool call cannot delay. The cached share is the prompt tokens the server
reported as served by its prefix cache (usage.prompt_tokens_details.cached_tokens, else llama.cpp's
timings.cache_n) over all prompt tokens.

Each --server LABEL=URL is run in turn (the next starts when the previous has finished). Prints, at
each step, the median prompt length and TTFT over the agents and the cached share, the servers side
by side; then per server the total of all TTFTs and the cached share. --json FILE keeps the figures
of a run, and --report FILE... prints the table of runs made apart (bench/agent_loop.sh runs each
server alone, then reports them together).

    .venv/bin/python bench/agent_loop.py --server strata=http://127.0.0.1:18090 --server llama.cpp=http://127.0.0.1:18091

Options (defaults): --server (repeatable) --agents (8) --steps (12) --result-tokens (300) --seed (11)
--json FILE; --report FILE... [--out FILE]
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time

import aiohttp

from sse import sse_data

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--server", action="append", help="LABEL=URL")
parser.add_argument("--agents", type=int, default=8)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--result-tokens", type=int, default=300)
parser.add_argument("--seed", type=int, default=11)
parser.add_argument("--json", help="write the (last) server's figures to this file")
parser.add_argument("--report", nargs="+", help="print the table of these --json files instead of running")
parser.add_argument("--out", help="with --report: write them together to this file")
opt = parser.parse_args()
print(f"agent_loop: seed {opt.seed}", file=sys.stderr)

SYSTEM = ("You are a research agent. Answer the user's question about the city's archives by calling the "
          "search_archive tool as often as you need, then answer in one paragraph.")
TOOL = {"type": "function", "function": {
    "name": "search_archive", "description": "Search the city archive and return the matching records.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "page": {"type": "integer"}},
                   "required": ["query", "page"]}}}
WORDS = ("harbour ledger council bridge mill charter toll granary census parish guild market river "
         "warden canal tower lantern quarry forge tannery ferry orchard archive deed survey").split()
SUBJECTS = ["the old harbour", "the river mills", "the grain market", "the city walls", "the canal works",
            "the guild halls", "the stone bridge", "the lantern makers"]


def record_text(rng: random.Random, tokens: int) -> str:
    """About TOKENS tokens of archive records: short lines of numbered words (a word is about 1.3
    tokens, a number about 2, a line about 18)."""
    lines, n = [], 0
    while n < tokens:
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        lines.append(f"record {rng.randrange(10000)}: {words}.")
        n += 18
    return "\n".join(lines)


def conversation(agent: int) -> list[dict]:
    subject = SUBJECTS[agent % len(SUBJECTS)]
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Agent {agent}: what do the archives say about {subject}?"}]


def add_step(messages: list[dict], rng: random.Random, agent: int, step: int) -> None:
    """The call the agent made at STEP and the tool's result."""
    call_id = f"call_{agent:02d}{step:02d}{rng.randrange(16 ** 8):08x}"
    arguments = json.dumps({"query": f"{rng.choice(WORDS)} {rng.choice(WORDS)}", "page": step + 1})
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "search_archive", "arguments": arguments}}]})
    messages.append({"role": "tool", "tool_call_id": call_id, "content": record_text(rng, opt.result_tokens)})


async def ask(http: aiohttp.ClientSession, url: str, model: str, messages: list[dict]) -> dict:
    """One step: the TTFT in ms, the prompt tokens and the cached ones."""
    body = {"model": model, "messages": messages, "tools": [TOOL], "temperature": 0, "max_tokens": 1,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    async with http.post(f"{url}/v1/chat/completions", json=body) as res:
        if res.status != 200:
            sys.exit(f"agent_loop: {url}: HTTP {res.status}: {await res.text()}")
        usage, timings = None, None
        async for data in sse_data(res.content.iter_any()):
            if data == "[DONE]":
                continue
            obj = json.loads(data)
            usage = obj.get("usage") or usage
            timings = obj.get("timings") or timings
    ms = (time.perf_counter() - t0) * 1000
    if not usage:
        sys.exit(f"agent_loop: {url}: the stream ended without usage")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached is None and timings:
        cached = timings.get("cache_n")
    return {"ms": ms, "prompt": usage["prompt_tokens"], "cached": cached or 0}


async def agent(http: aiohttp.ClientSession, url: str, model: str, index: int) -> list[dict]:
    rng = random.Random(opt.seed * 1000 + index)
    messages = conversation(index)
    steps = []
    for step in range(opt.steps):
        steps.append(await ask(http, url, model, messages))
        add_step(messages, rng, index, step)
    return steps


async def run(url: str) -> list[list[dict]]:
    """Every agent's steps, agents in order."""
    # A connection per request: llama-server closes idle keep-alive connections, and a request sent
    # on one it has just closed fails.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=600),
                                     connector=aiohttp.TCPConnector(force_close=True)) as http:
        async with http.get(f"{url}/v1/models") as res:
            model = (await res.json())["data"][0]["id"]
        # Warm up untimed: the connection pool and the system prompt.
        await ask(http, url, model, conversation(-1))
        return await asyncio.gather(*(agent(http, url, model, i) for i in range(opt.agents)))


def summary(label: str, runs: list[list[dict]]) -> dict:
    per_step = []
    for s in range(opt.steps):
        at = [r[s] for r in runs]
        per_step.append({"step": s + 1, "ttft_ms": statistics.median(x["ms"] for x in at),
                         "prompt_tokens": statistics.median(x["prompt"] for x in at),
                         "cached_share": sum(x["cached"] for x in at) / max(1, sum(x["prompt"] for x in at))})
    every = [x for r in runs for x in r]
    return {"label": label, "agents": opt.agents, "steps": opt.steps, "result_tokens": opt.result_tokens,
            "seed": opt.seed, "per_step": per_step, "total_ttft_s": sum(x["ms"] for x in every) / 1000,
            "cached_share": sum(x["cached"] for x in every) / max(1, sum(x["prompt"] for x in every)),
            "prompt_tokens": sum(x["prompt"] for x in every), "raw": runs}


def report(results: list[dict]) -> None:
    """The table of steps, the servers side by side, then a line per server."""
    first = results[0]
    print(f"{first['agents']} agents x {first['steps']} tool steps, ~{first['result_tokens']}-token tool results; "
          "per step: median prompt tokens, median TTFT over the agents (ms), share of the prompt tokens cached")
    print("step " + "".join(f" | {r['label']:>10}: prompt  ttft  cached" for r in results))
    for s in range(first["steps"]):
        cells = "".join(f" | {r['per_step'][s]['prompt_tokens']:18.0f} {r['per_step'][s]['ttft_ms']:5.0f} "
                        f"{100 * r['per_step'][s]['cached_share']:6.1f}%" for r in results)
        print(f"{s + 1:4d} {cells}")
    for r in results:
        print(f"{r['label']}: total TTFT {r['total_ttft_s']:.1f} s over {r['agents'] * r['steps']} steps, "
              f"{100 * r['cached_share']:.1f}% of {r['prompt_tokens']} prompt tokens cached, wall {r['wall_s']:.1f} s")


def main() -> None:
    if opt.report:
        results = [json.load(open(path)) for path in opt.report]
        report(results)
        if opt.out:
            json.dump({"results": results}, open(opt.out, "w"), indent=1)
        return
    results = []
    for spec in opt.server or []:
        label, _, url = spec.partition("=")
        if not url:
            sys.exit(f"agent_loop: --server is LABEL=URL, not {spec}")
        t0 = time.perf_counter()
        r = summary(label, asyncio.run(run(url.rstrip("/"))))
        r["wall_s"] = time.perf_counter() - t0
        results.append(r)
        if opt.json:
            json.dump(r, open(opt.json, "w"))
    if not results:
        sys.exit("agent_loop: give --server LABEL=URL (or --report FILES)")
    report(results)


main()
