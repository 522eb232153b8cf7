#!/usr/bin/env python3
"""Soak: the server under a crowd, then under mixed load with kill -9 cycles. Prints one JSON object
per phase (one line each), then a verdict line, and exits 1 if a check failed.

  crowd   --streams N concurrent SSE streams (--max-tokens each); half are dropped after 3 chunks.
          Once it settles: nothing running or waiting, no KV block held by a request (no leak), and
          the server's RSS against its baseline (taken after a warm-up of the same shape).
  mixed   --minutes of mixed load from --clients concurrent clients: greedy chat requests about 24
          documents (streamed or not, some dropped mid-way, some over a WebSocket), while the
          server is killed with SIGKILL every --kill-every seconds and restarted on the same cache
          directory (cache.mode = tiered). Every answer must equal the first answer given to the
          same request (a cache fault must never change a token); after each restart, a document
          asked before the kill must come back with cached tokens (the SSD tier kept it). Errors
          of requests that a kill cut short are counted apart; any other error fails.
  final   after the last cycle and a warm-up: the same load without kills for a minute, then idle:
          no request running or waiting, no block held, RSS back within 25% (+32 MiB) of the
          process's baseline.

    .venv/bin/python bench/soak.py --bin build/bench/strata --model ../shared/models/tiny-llama-spm-f16.gguf \\
        [--minutes 10] [--kill-every 60] [--streams 1000] [--clients 8] [--max-tokens 48]
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import signal
import urllib.request
import subprocess
import sys
import tempfile
import time

import aiohttp
from websockets.asyncio.client import connect as ws_connect

from sse import sse_data

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--bin", required=True)
parser.add_argument("--model", required=True)
parser.add_argument("--minutes", type=float, default=10)
parser.add_argument("--kill-every", type=float, default=60)
parser.add_argument("--streams", type=int, default=1000)
parser.add_argument("--clients", type=int, default=8)
parser.add_argument("--max-tokens", type=int, default=48)
parser.add_argument("--seed", type=int, default=None)
opt = parser.parse_args()
seed = opt.seed if opt.seed is not None else random.SystemRandom().randrange(1 << 31)
rng = random.Random(seed)
print(json.dumps({"seed": seed}), flush=True)

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
failures: list[str] = []

DOCUMENTS = [" ".join(f"Section {d}.{k}: the ledger of station {d} lists {k * 7 + d} crates of cargo."
                      for k in range(40)) for d in range(24)]
QUESTIONS = ["How many crates are listed?", "Which station is this?", "Summarize the ledger."]


class Server:
    """strata serve on a fixed cache directory, restartable."""

    def __init__(self, cache_dir: str):
        self.cache_dir = cache_dir
        self.conf = os.path.join(cache_dir, "soak.toml")
        with open(self.conf, "w") as f:
            f.write('[cache]\nmode = "tiered"\nhot_memory = "96MiB"\nssd_max = "1GiB"\nwrite_through = true\n\n'
                    "[scheduler]\nmax_running = 16\nmax_queued = 4096\n\n[limits]\nmax_connections = 20000\n")
        self.proc = None
        self.url = ""

    def start(self):
        self.proc = subprocess.Popen([opt.bin, "serve", "--port", "0", "--config", self.conf, "--cache-dir",
                                      self.cache_dir, "--model", opt.model],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + 120
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.url = f"http://127.0.0.1:{int(m.group(1))}"
                break
            if not line and self.proc.poll() is not None:
                sys.exit(f"soak: strata exited at start ({self.proc.returncode})")
        # Keeps the pipe drained so the server never blocks on its log.
        asyncio.get_running_loop().run_in_executor(None, lambda p=self.proc: [None for _ in p.stdout])
        # It listens before it has loaded the model: ready once /health says 200.
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while self.url and time.time() < deadline:
            try:
                with direct.open(f"{self.url}/health", timeout=5) as res:
                    if res.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def session():
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, sock_read=300))


async def metrics(http, url):
    async with http.get(f"{url}/metrics") as res:
        text = await res.text()

    def get(name):
        m = re.search(rf"^{name} ([0-9.eE+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    in_use = sum(float(v) for v in re.findall(r'^strata_kv_blocks\{[^}]*state="in_use"[^}]*\} (\S+)$', text, re.M))
    return {"running": get("strata_requests_running"), "waiting": get("strata_requests_waiting"), "blocks_in_use": in_use}


async def settle(http, url, seconds=60):
    m = None
    for _ in range(seconds * 10):
        m = await metrics(http, url)
        if m["running"] == 0 and m["waiting"] == 0 and m["blocks_in_use"] == 0:
            return m, True
        await asyncio.sleep(0.1)
    return m, False


def chat_body(content, stream, tokens):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": tokens,
            "temperature": 0, "stream": stream, **({"stream_options": {"include_usage": True}} if stream else {})}


async def stream_chat(http, url, content, tokens, drop_after=None):
    """(text, cached_tokens, complete) of a streamed chat (cached None over a WebSocket); dropped after drop_after chunks if set."""
    text, cached, done, chunks = "", 0, False, 0
    async with http.post(f"{url}/v1/chat/completions", json=chat_body(content, True, tokens)) as res:
        if res.status != 200:
            raise RuntimeError(f"status {res.status}: {(await res.text())[:200]}")
        async for data in sse_data(res.content.iter_any()):
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(f"in-stream error {event['error']}")
            for choice in event.get("choices") or []:
                text += (choice.get("delta") or {}).get("content") or ""
            if event.get("usage"):
                cached = (event["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            chunks += 1
            if drop_after is not None and chunks >= drop_after:
                res.close()
                return text, cached, False
    return text, cached, done


async def plain_chat(http, url, content, tokens):
    async with http.post(f"{url}/v1/chat/completions", json=chat_body(content, False, tokens)) as res:
        body = await res.json()
        if res.status != 200:
            raise RuntimeError(f"status {res.status}: {json.dumps(body)[:200]}")
        usage = body["usage"]
        return body["choices"][0]["message"]["content"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0), True


async def ws_chat(url, content, tokens):
    text = ""
    async with ws_connect(url.replace("http", "ws", 1) + "/v1/ws", max_size=None) as ws:
        await ws.send(json.dumps({"type": "request", "id": "q", "endpoint": "chat.completions",
                                  "body": chat_body(content, True, tokens)}))
        async for frame in ws:
            msg = json.loads(frame)
            if msg["type"] == "chunk":
                for choice in msg["data"].get("choices") or []:
                    text += (choice.get("delta") or {}).get("content") or ""
            elif msg["type"] == "done":
                return text, None, True
            elif msg["type"] == "error":
                raise RuntimeError(f"ws error {msg['error']}")
    raise RuntimeError("ws closed before done")


async def crowd(server):
    """Phase 1: a crowd of streams, half dropped."""
    async with session() as http:
        for i in range(32):  # warm-up of the same shape, for the baseline
            await stream_chat(http, server.url, f"Warm-up {i}: tell me about day {i}.", opt.max_tokens)
        await settle(http, server.url)
        base = server.rss_mib()
        peak = base
        t0 = time.perf_counter()

        async def one(i):
            try:
                return await stream_chat(http, server.url, f"Stream {i}: tell me about the weather on day {i}.",
                                         opt.max_tokens, drop_after=3 if i % 2 else None)
            except Exception as e:  # noqa: BLE001
                return e

        tasks = [asyncio.create_task(one(i)) for i in range(opt.streams)]
        while not all(t.done() for t in tasks):
            peak = max(peak, server.rss_mib())
            await asyncio.sleep(0.2)
        results = [t.result() for t in tasks]
        errors = [r for r in results if isinstance(r, Exception)]
        complete = sum(1 for r in results if not isinstance(r, Exception) and r[2])
        after, clean = await settle(http, server.url)
        await asyncio.sleep(2)
        rss = server.rss_mib()
    report = {"phase": "crowd", "streams": opt.streams, "complete": complete, "dropped": opt.streams // 2,
              "errors": len(errors), "seconds": round(time.perf_counter() - t0, 1), "rss_base_mib": round(base, 1),
              "rss_peak_mib": round(peak, 1), "rss_after_mib": round(rss, 1), "after": after, "clean": clean}
    print(json.dumps(report), flush=True)
    if errors:
        failures.append(f"crowd: {len(errors)} errors, first: {errors[0]!r}")
    if complete != opt.streams - opt.streams // 2:
        failures.append(f"crowd: {complete} complete streams of {opt.streams - opt.streams // 2}")
    if not clean:
        failures.append(f"crowd: not clean after settling: {after}")


class Mixed:
    """Phase 2 and 3: the clients' loop, and what it checks."""

    def __init__(self, server):
        self.server = server
        self.first_answer: dict[tuple[int, int], str] = {}
        self.asked_before_kill: set[int] = set()
        self.asked_since_start: set[int] = set()
        self.counts = {"requests": 0, "dropped": 0, "ws": 0, "wrong_answers": 0, "down_errors": 0, "other_errors": 0,
                       "restored_after_restart": 0, "cold_after_restart": 0}
        self.generation = 0  # bumped by every kill: a request that spans one fails for it
        self.first_error = None

    async def request(self, http):
        d, q = rng.randrange(len(DOCUMENTS)), rng.randrange(len(QUESTIONS))
        content = DOCUMENTS[d] + "\n\n" + QUESTIONS[q]
        kind = rng.random()
        url = self.server.url
        generation = self.generation
        try:
            if kind < 0.15:
                await stream_chat(http, url, content, 24, drop_after=2)
                self.counts["dropped"] += 1
                return
            if kind < 0.25:
                text, cached, _ = await ws_chat(url, content, 16)
                self.counts["ws"] += 1
            elif kind < 0.6:
                text, cached, _ = await plain_chat(http, url, content, 16)
            else:
                text, cached, _ = await stream_chat(http, url, content, 16)
        except Exception as e:  # noqa: BLE001
            if generation != self.generation:
                self.counts["down_errors"] += 1
            else:
                self.counts["other_errors"] += 1
                self.first_error = self.first_error or repr(e)
            return
        self.counts["requests"] += 1
        key = (d, q)
        if key not in self.first_answer:
            self.first_answer[key] = text
        elif self.first_answer[key] != text:
            self.counts["wrong_answers"] += 1
        if cached is not None and d in self.asked_before_kill and d not in self.asked_since_start:
            self.counts["restored_after_restart" if cached > 0 else "cold_after_restart"] += 1
        self.asked_since_start.add(d)

    async def clients(self, seconds):
        deadline = time.monotonic() + seconds

        async def client():
            async with session() as http:
                while time.monotonic() < deadline:
                    await self.request(http)
                    await asyncio.sleep(0)

        await asyncio.gather(*[client() for _ in range(opt.clients)])

    async def killer(self, seconds):
        deadline = time.monotonic() + seconds
        cycles = 0
        while time.monotonic() + opt.kill_every < deadline:
            await asyncio.sleep(opt.kill_every)
            self.generation += 1
            self.server.kill9()
            # What was asked before the kill (and written through) must be found again.
            self.asked_before_kill |= self.asked_since_start
            self.asked_since_start = set()
            self.server.start()
            cycles += 1
        return cycles


async def main():
    cache_dir = tempfile.mkdtemp(prefix="strata-soak-")
    server = Server(cache_dir)
    server.start()
    try:
        await crowd(server)
        mixed = Mixed(server)
        t0 = time.perf_counter()
        _, cycles = await asyncio.gather(mixed.clients(opt.minutes * 60), mixed.killer(opt.minutes * 60))
        report = {"phase": "mixed", "minutes": opt.minutes, "kill9_cycles": cycles, **mixed.counts,
                  "seconds": round(time.perf_counter() - t0, 1), "first_error": mixed.first_error}
        print(json.dumps(report), flush=True)
        if mixed.counts["wrong_answers"]:
            failures.append(f"mixed: {mixed.counts['wrong_answers']} answers differed from the first ones")
        if mixed.counts["other_errors"]:
            failures.append(f"mixed: {mixed.counts['other_errors']} errors while the server was up: {mixed.first_error}")
        if cycles and mixed.counts["cold_after_restart"] > mixed.counts["restored_after_restart"]:
            failures.append("mixed: documents asked before a kill came back cold more often than restored")

        # Final: this process's baseline after a warm-up, a minute of the same load, then idle.
        async with session() as http:
            for i in range(16):
                await mixed.request(http)
            await settle(http, server.url)
        base = server.rss_mib()
        await mixed.clients(60)
        async with session() as http:
            after, clean = await settle(http, server.url)
        await asyncio.sleep(2)
        rss = server.rss_mib()
        ok_rss = rss <= base * 1.25 + 32
        print(json.dumps({"phase": "final", "rss_base_mib": round(base, 1), "rss_after_mib": round(rss, 1),
                          "after": after, "clean": clean, "rss_ok": ok_rss}), flush=True)
        if not clean:
            failures.append(f"final: not clean after settling: {after}")
        if not ok_rss:
            failures.append(f"final: RSS {rss:.1f} MiB against a baseline of {base:.1f} MiB")
        code = server.stop()
        if code != 0:
            failures.append(f"SIGTERM exit status {code}")
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(json.dumps({"verdict": "pass" if not failures else "fail", "failures": failures}), flush=True)
    return 1 if failures else 0


sys.exit(asyncio.run(main()))
