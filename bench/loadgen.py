#!/usr/bin/env python3
"""strata's load generator: drives any OpenAI-compatible server with N concurrent streaming chat
requests and reports TTFT, inter-token and end-to-end latency percentiles, throughput, errors and
cached prompt tokens, as JSON (and a PNG through gnuplot with --plot).

    .venv/bin/python bench/loadgen.py --url http://127.0.0.1:8080 --concurrency 16 --requests 64 \\
        --scenario independent|shared-system|multi-turn|documents --prompt-tokens 200 --max-tokens 64

Scenarios:
  independent    every request a fresh prompt
  shared-system  one long system prompt shared by all, a short distinct user question each
  multi-turn     each stream is a chat whose history grows by its own previous answers
  documents      --users users each own a long document, asked questions in turn (--pick cycle,
                 the default) or by a user drawn at random each time (--pick random)

Options (defaults): --url (http://127.0.0.1:8080) --model ('': none sent; the server's own) --api-key ('') --concurrency (16)
--requests (64) --scenario (independent) --prompt-tokens (200) --max-tokens (64) --users (64)
--turns (4; accepted, the documents scenario asks questions until --requests are sent)
--pick (cycle) --temperature (0) --timeout-s (600: for the whole run) --seed (1: the prompts' words;
printed to stderr) --label ('') --out (a file for the JSON too) --plot (a PNG: TTFT and end-to-end
latency of every request over time; its data goes to PLOT.dat) --connections (keep-alive: a stream's
requests share its connection; per-request: a new connection for each, for servers such as
llama-server that close idle kept-alive connections, which fails the request sent on one).

The JSON: label (when given), url, scenario, concurrency, requests (sent), ok, errors, statuses
(HTTP status -> count; 0: no response), first_errors (up to 3), wall_s, generated_tokens,
generated_tok_s (all completion tokens over the wall time), prompt_tokens, cached_tokens,
cached_fraction, and {p50, p90, p99, n} of ttft_ms, ttft_ms_after_first (the requests after each
stream's first: the opening burst of --concurrency prompts at once left out), itl_ms (the gaps between content chunks),
e2e_ms and decode_tok_s (each stream's tokens after the first over the time from its first content
to its last: what `strata bench` calls decode), and decode_aggregate, the streams' decode-only rate
together ({tok_s, streams, seconds}: each stream counts 1000 / its median inter-token gap while it
is between its first content and its last, so the steps slowed by other prompts' prefill, the long
gaps, are left out as the median leaves them; tok_s sums those rates over the streams decoding at
once, averaged over the `seconds` during which any stream decodes; `streams` is how many decode at
once on average: what llama-batched-bench's decode speed measures, from a served run).
Figures count successful requests only.
"""
import argparse
import asyncio
import json
import subprocess
import sys
import time

import aiohttp

from sse import sse_data


def num(text):
    """A number as JavaScript's Number() reads it: an int when it is whole."""
    value = float(text)
    return int(value) if value.is_integer() else value


parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
for name, default in [("url", "http://127.0.0.1:8080"), ("model", ""), ("api-key", ""),
                      ("concurrency", "16"), ("requests", "64"), ("scenario", "independent"),
                      ("prompt-tokens", "200"), ("max-tokens", "64"), ("users", "64"), ("turns", "4"),
                      ("pick", "cycle"), ("temperature", "0"), ("timeout-s", "600"), ("seed", "1"),
                      ("label", ""), ("out", ""), ("plot", ""), ("connections", "keep-alive")]:
    parser.add_argument(f"--{name}", default=default)
opt = parser.parse_args()

N = int(num(opt.concurrency))
total = int(num(opt.requests))
prompt_tokens = int(num(opt.prompt_tokens))
max_tokens = num(opt.max_tokens)
temperature = num(opt.temperature)
deadline = time.monotonic() + num(opt.timeout_s)
if opt.connections not in ("keep-alive", "per-request"):
    sys.exit(f"loadgen: --connections is keep-alive or per-request, not {opt.connections}")
if opt.scenario not in ("independent", "shared-system", "multi-turn", "documents"):
    sys.exit(f"loadgen: unknown scenario {opt.scenario}")

# A deterministic word stream (xorshift64): about one token per word for common BPE vocabularies.
MASK = (1 << 64) - 1
rng_state = int(opt.seed) or 1
print(f"loadgen: seed {opt.seed}", file=sys.stderr)


def rand():
    global rng_state
    rng_state = (rng_state ^ (rng_state << 13)) & MASK
    rng_state ^= rng_state >> 7
    rng_state = (rng_state ^ (rng_state << 17)) & MASK
    return (rng_state % 1000000) / 1000000


WORDS = ("time person year way day thing man world life hand part child eye woman place work week case "
         "point government company number group problem fact").split(" ")


def text(n):
    return " ".join(WORDS[int(rand() * len(WORDS))] for _ in range(n))


shared_system = text(prompt_tokens)
documents = [text(prompt_tokens) for _ in range(int(num(opt.users)))]
histories = {}


def next_request(i):
    if opt.scenario == "independent":
        return {"key": i, "messages": [{"role": "user", "content": text(prompt_tokens)}]}
    if opt.scenario == "shared-system":
        return {"key": i, "messages": [{"role": "system", "content": shared_system},
                                       {"role": "user", "content": text(16)}]}
    if opt.scenario == "multi-turn":
        stream = i % N
        h = histories.get(stream) or [{"role": "user", "content": text(prompt_tokens)}]
        histories[stream] = h
        return {"key": stream, "messages": list(h), "history": h}
    # documents
    user = int(rand() * len(documents)) if opt.pick == "random" else i % len(documents)
    return {"key": user, "messages": [{"role": "system", "content": documents[user]},
                                      {"role": "user", "content": f"Question {i // len(documents)}: {text(12)}"}]}


def now_ms():
    return time.perf_counter() * 1000


def describe(e):
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


async def run_one(session, req):
    t0 = now_ms()
    r = {"ok": False, "status": 0, "ttft": None, "last": None, "itl": [], "e2e": None, "completion_tokens": 0,
         "prompt_tokens": 0, "cached_tokens": 0, "error": None, "text": "", "first_at": None, "last_at": None}
    headers = {"Content-Type": "application/json"}
    if opt.api_key:
        headers["Authorization"] = f"Bearer {opt.api_key}"
    body = json.dumps({**({"model": opt.model} if opt.model else {}), "messages": req["messages"], "max_tokens": max_tokens,
                       "temperature": temperature, "stream": True, "stream_options": {"include_usage": True},
                       "ignore_eos": True})
    try:
        async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
            async with session.post(f"{opt.url}/v1/chat/completions", data=body, headers=headers) as res:
                r["status"] = res.status
                if not 200 <= res.status < 300:
                    r["error"] = (await res.text(errors="replace"))[:200]
                    return r
                last = None
                async for data in sse_data(res.content.iter_any()):
                    if data == "[DONE]":
                        continue
                    obj = json.loads(data)
                    usage = obj.get("usage")
                    if usage:
                        r["prompt_tokens"] = usage.get("prompt_tokens")
                        r["completion_tokens"] = usage.get("completion_tokens")
                        r["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
                    choices = obj.get("choices") or []
                    delta = ((choices[0] or {}).get("delta") or {}).get("content") if choices else None
                    if delta:
                        now = now_ms()
                        if r["ttft"] is None:
                            r["ttft"] = now - t0
                        else:
                            r["itl"].append(now - last)
                        last = now
                        r["last"] = now - t0
                        r["first_at"] = r["first_at"] if r["first_at"] is not None else now
                        r["last_at"] = now
                        r["text"] += delta
        r["e2e"] = now_ms() - t0
        r["ok"] = True
    except TimeoutError:
        r["error"] = "the run's time (--timeout-s) ran out"
    except Exception as e:  # noqa: BLE001 - every failure is counted and reported
        r["error"] = describe(e)
    return r


def pct(xs, p):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int((p / 100) * len(s)))]


def summary(xs):
    return {"p50": pct(xs, 50), "p90": pct(xs, 90), "p99": pct(xs, 99), "n": len(xs)}


def decode_aggregate(ok):
    """The streams' decode-only rate together: each stream decodes at 1000 / its median inter-token
    gap (the steps that also carried other prompts' prefill are the long gaps the median leaves out)
    while between its first content and its last; those rates summed over the streams decoding at
    once, averaged over the time any stream decodes (the union of their spans)."""
    spans = sorted((r["first_at"], r["last_at"]) for r in ok if r["first_at"] is not None and r["last_at"] > r["first_at"])
    union, end = 0.0, None
    for a, b in spans:
        union += max(0.0, b - max(a, end if end is not None else a))
        end = b if end is None else max(end, b)
    if union <= 0:
        return {"tok_s": 0, "streams": 0, "seconds": 0}
    rate_time = sum(1000 / pct(r["itl"], 50) * (r["last_at"] - r["first_at"]) for r in ok
                    if r["itl"] and pct(r["itl"], 50) > 0 and r["first_at"] is not None)
    busy = sum(b - a for a, b in spans)
    return {"tok_s": rate_time / union, "streams": busy / union, "seconds": union / 1000}


async def main():
    results = []
    timeline = []
    issued = 0
    start = now_ms()
    # As many connections as streams, kept alive between one stream's requests (unless
    # --connections per-request); no client timeout but the run's own (--timeout-s).
    connector = aiohttp.TCPConnector(limit=0, force_close=opt.connections == "per-request")
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        async def worker():
            nonlocal issued
            while issued < total and time.monotonic() < deadline:
                i = issued
                issued += 1
                req = next_request(i)
                r = await run_one(session, req)
                r["after_first"] = i >= N
                if "history" in req and r["ok"]:
                    req["history"].extend([{"role": "assistant", "content": r["text"]},
                                           {"role": "user", "content": text(24)}])
                del r["text"]
                results.append(r)
                timeline.append([(now_ms() - start) / 1000, r["ttft"], r["e2e"]])

        await asyncio.gather(*(worker() for _ in range(N)))
    wall = (now_ms() - start) / 1000

    ok = [r for r in results if r["ok"]]
    generated = sum(r["completion_tokens"] or 0 for r in ok)
    prompt = sum(r["prompt_tokens"] or 0 for r in ok)
    cached = sum(r["cached_tokens"] or 0 for r in ok)
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    statuses = {str(s): counts[s] for s in sorted(counts)}
    report = {}
    if opt.label:
        report["label"] = opt.label
    report.update({
        "url": opt.url,
        "scenario": opt.scenario,
        "concurrency": N,
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "statuses": statuses,
        "first_errors": [r["error"] for r in results if not r["ok"]][:3],
        "wall_s": wall,
        "generated_tokens": generated,
        "generated_tok_s": generated / wall if wall > 0 else 0,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "cached_fraction": cached / prompt if prompt else 0,
        "ttft_ms": summary([r["ttft"] for r in ok if r["ttft"] is not None]),
        "ttft_ms_after_first": summary([r["ttft"] for r in ok if r["ttft"] is not None and r["after_first"]]),
        "itl_ms": summary([x for r in ok for x in r["itl"]]),
        "e2e_ms": summary([r["e2e"] for r in ok]),
        # Each stream's decode speed: the tokens after the first over the time from the first
        # content to the last (what `strata bench` calls decode).
        "decode_tok_s": summary([(r["completion_tokens"] - 1) / ((r["last"] - r["ttft"]) / 1000) for r in ok
                                 if (r["completion_tokens"] or 0) > 1 and r["ttft"] is not None
                                 and r["last"] > r["ttft"]]),
        "decode_aggregate": decode_aggregate(ok),
    })
    out = json.dumps(report, indent=2)
    if opt.out:
        with open(opt.out, "w") as f:
            f.write(out + "\n")
    print(out)

    if opt.plot:
        dat = f"{opt.plot}.dat"
        with open(dat, "w") as f:
            for row in timeline:
                f.write(" ".join("NaN" if x is None else repr(x) for x in row) + "\n")
        script = (f"set terminal png size 900,500; set output '{opt.plot}';\n"
                  f"set title 'strata loadgen: {opt.scenario}, {N} streams'; set xlabel 'time (s)'; "
                  f"set ylabel 'ms'; set key left top;\n"
                  f"plot '{dat}' using 1:2 with points title 'TTFT', '{dat}' using 1:3 with points title 'end-to-end'")
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


asyncio.run(main())
