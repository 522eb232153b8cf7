#!/usr/bin/env python3
"""Connection-level load on a running strata server: many SSE streams at once, many idle WebSocket
connections, and a storm of clients that disconnect mid-stream. Prints one JSON object per
scenario (one line each), in this order:

  sse      --sse N concurrent streaming chat requests of --max-tokens tokens: the HTTP statuses,
           how many streams ended with [DONE] (complete) or without (broken), statuses other than
           200 and 429 (unexpected), the server's peak RSS, and /metrics once it settles (after:
           running, waiting, kv_blocks_used, rejected_total)
  ws-idle  --ws-idle N WebSocket connections to /v1/ws, opened in waves of 500 and held --hold-s
           seconds: the server's RSS before, with them open, after the hold and after closing them,
           the RSS per connection, how many are still open after the hold, and how many of a
           sample of about 20 of them answer a request afterwards
  storm    --storm N streaming requests of 256 tokens, each dropped after 2 to 4 chunks: how many
           were dropped or rejected, /metrics before and after, and clean (nothing running, waiting
           or holding KV blocks once it settles)

    .venv/bin/python bench/connections.py --url http://127.0.0.1:8080 --pid PID \\
        [--sse 1000] [--ws-idle 10000] [--storm 500] [--max-tokens 32] [--hold-s 10]

--pid names the server process, for its resident memory (from /proc/PID/status). A scenario whose
count is 0 (the default for all three) is skipped. The open-file limit is raised to its hard limit.
"""
import argparse
import asyncio
import errno
import json
import re
import resource
import sys
import time

import aiohttp
from websockets.asyncio.client import connect as ws_connect
from websockets.protocol import State

from sse import sse_data

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
for name, default in [("url", "http://127.0.0.1:8080"), ("pid", ""), ("sse", "0"), ("ws-idle", "0"),
                      ("storm", "0"), ("max-tokens", "32"), ("hold-s", "10")]:
    parser.add_argument(f"--{name}", default=default)
opt = parser.parse_args()
max_tokens = int(opt.max_tokens)
n_sse, n_ws, n_storm = int(opt.sse), int(opt.ws_idle), int(opt.storm)

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft != hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
need = max(n_sse, n_ws, n_storm) + 100
if hard != resource.RLIM_INFINITY and hard < need:
    sys.exit(f"connections: {need} open files needed, the limit is {hard}")


def now_s():
    return time.perf_counter()


def as_number(text):
    value = float(text)
    return int(value) if value.is_integer() else value


def rss_mib():
    if not opt.pid:
        return None
    with open(f"/proc/{opt.pid}/status") as f:
        m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
    return int(m.group(1)) / 1024 if m else None


def error_code(e):
    """The errno name of a network error (ECONNREFUSED, ECONNRESET, ...), else its type and text."""
    seen = e
    while seen is not None:
        for candidate in (seen, getattr(seen, "os_error", None)):
            if isinstance(candidate, OSError) and candidate.errno in errno.errorcode:
                return errno.errorcode[candidate.errno]
        seen = seen.__cause__ or seen.__context__
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def session():
    # One connection per concurrent request, as many as asked for; no overall client timeout, but a
    # stream that stays silent for 300 s fails.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                 timeout=aiohttp.ClientTimeout(total=None, sock_read=300))


async def metrics(http):
    async with http.get(f"{opt.url}/metrics") as res:
        text = await res.text()

    def get(name):
        m = re.search(rf"^{name} ([0-9.eE+-]+)$", text, re.M)
        return as_number(m.group(1)) if m else None

    return {"running": get("strata_requests_running"), "waiting": get("strata_requests_waiting"),
            "kv_blocks_used": get("strata_kv_blocks_used"), "rejected_total": get("strata_requests_rejected_total")}


async def settle(http, seconds):
    """Waits until nothing runs or waits and no KV block is held (or the time runs out)."""
    m = None
    for _ in range(seconds * 10):
        m = await metrics(http)
        if m["running"] == 0 and m["waiting"] == 0 and m["kv_blocks_used"] == 0:
            break
        await asyncio.sleep(0.1)
    return m


def body(i, tokens=None):
    return json.dumps({"stream": True, "max_tokens": tokens or max_tokens, "temperature": 0,
                       "ignore_eos": True,
                       "messages": [{"role": "user", "content": f"Stream {i}: tell me about the weather on day {i}."}]})


HEADERS = {"Content-Type": "application/json"}


async def read_stream(res, stop_after=None):
    """Reads an SSE response to its end, or until stop_after chunks came, then drops the connection.
    Returns whether [DONE] came and how many chunks."""
    chunks = 0
    done = False
    async for data in sse_data(res.content.iter_any()):
        if data == "[DONE]":
            done = True
        else:
            chunks += 1
        if stop_after is not None and chunks >= stop_after:
            res.close()  # closes the connection itself: the server sees the client go
            break
    return done, chunks


async def sse_scenario(n):
    t0 = now_s()
    statuses = {}
    complete = broken = 0
    errors = []
    peak_rss = rss_mib()

    async def watch():
        nonlocal peak_rss
        while True:
            await asyncio.sleep(0.2)
            r = rss_mib()
            if r is not None and r > peak_rss:
                peak_rss = r

    async with session() as http:
        async def one(i):
            nonlocal complete, broken
            try:
                async with http.post(f"{opt.url}/v1/chat/completions", data=body(i), headers=HEADERS) as res:
                    statuses[str(res.status)] = statuses.get(str(res.status), 0) + 1
                    if res.status != 200:
                        await res.read()
                        return
                    done, _ = await read_stream(res)
                    if done:
                        complete += 1
                    else:
                        broken += 1
            except Exception as e:  # noqa: BLE001 - counted as a network error
                statuses["network_error"] = statuses.get("network_error", 0) + 1
                if len(errors) < 3:
                    errors.append(error_code(e))

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(one(i) for i in range(n)))
        watcher.cancel()
        after = await settle(http, 30)
    unexpected = sum(c for s, c in statuses.items() if s not in ("200", "429"))
    return {"scenario": "sse", "streams": n, "statuses": statuses, "complete": complete, "broken": broken,
            "unexpected": unexpected, "errors": errors, "wall_s": now_s() - t0, "peak_rss_mib": peak_rss,
            "after": after}


async def ws_idle_scenario(n):
    ws_url = re.sub(r"^http", "ws", opt.url) + "/v1/ws"
    before = rss_mib()
    sockets = []
    failed = 0
    errors = []
    t0 = now_s()

    async def open_one():
        nonlocal failed
        try:
            # No keep-alive pings and no compression: an idle connection sends nothing.
            ws = await ws_connect(ws_url, ping_interval=None, compression=None, open_timeout=60,
                                  close_timeout=1)
            sockets.append(ws)
        except Exception as e:  # noqa: BLE001 - counted as a failed connection
            failed += 1
            if len(errors) < 3:
                errors.append(error_code(e))

    # Opened in waves so that the listen backlog is not the thing measured.
    for i in range(0, n, 500):
        await asyncio.gather(*(open_one() for _ in range(min(500, n - i))))
    opened = now_s() - t0
    at_open = rss_mib()
    await asyncio.sleep(float(opt.hold_s))
    after_hold = rss_mib()

    # Every socket still answers: one request on a sample of them.
    answered = 0
    step = max(1, len(sockets) // 20)
    sample = [ws for i, ws in enumerate(sockets) if i % step == 0]

    async def ask(i, ws):
        nonlocal answered
        try:
            async with asyncio.timeout(60):
                await ws.send(json.dumps({"type": "request", "id": f"s{i}", "endpoint": "chat.completions",
                                          "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                                   "temperature": 0}}))
                async for message in ws:
                    frame = json.loads(message)
                    if frame.get("type") in ("done", "error"):
                        if frame["type"] == "done":
                            answered += 1
                        return
        except Exception:  # noqa: BLE001 - not answered (TimeoutError included)
            return

    await asyncio.gather(*(ask(i, ws) for i, ws in enumerate(sample)))
    still_open = sum(1 for ws in sockets if ws.state is State.OPEN)
    for ws in sockets:
        ws.transport.abort()  # dropped without a closing handshake
    await asyncio.sleep(1)
    return {"scenario": "ws-idle", "connections": n, "opened": len(sockets), "failed": failed, "errors": errors,
            "open_s": opened, "rss_before_mib": before, "rss_open_mib": at_open, "rss_after_hold_mib": after_hold,
            "rss_after_close_mib": rss_mib(),
            "per_connection_kib": ((at_open - before) * 1024) / max(1, len(sockets)) if before is not None else None,
            "still_open_after_hold": still_open, "sample_answered": f"{answered}/{len(sample)}"}


async def storm_scenario(n):
    async with session() as http:
        before = await settle(http, 30)
        t0 = now_s()
        dropped = rejected = 0

        async def one(i):
            nonlocal dropped, rejected
            try:
                async with http.post(f"{opt.url}/v1/chat/completions", data=body(i, 256), headers=HEADERS) as res:
                    if res.status != 200:
                        rejected += 1
                        await res.read()
                        return
                    # Drop the connection after a few chunks (the role chunk and a token or two): mid-stream.
                    await read_stream(res, 2 + i % 3)
                    dropped += 1
            except Exception:  # noqa: BLE001 - neither dropped by us nor rejected
                pass

        await asyncio.gather(*(one(i) for i in range(n)))
        after = await settle(http, 60)
    return {"scenario": "storm", "streams": n, "dropped": dropped, "rejected": rejected, "wall_s": now_s() - t0,
            "before": before, "after": after,
            "clean": after["running"] == 0 and after["waiting"] == 0 and after["kv_blocks_used"] == 0}


def emit(report):
    print(json.dumps(report, separators=(",", ":")), flush=True)


async def main():
    if n_sse > 0:
        emit(await sse_scenario(n_sse))
    if n_ws > 0:
        emit(await ws_idle_scenario(n_ws))
    if n_storm > 0:
        emit(await storm_scenario(n_storm))


asyncio.run(main())
