#!/usr/bin/env python3
"""Scale-out: many users, each with a long document of their own and several turns, over three
replicas behind `strata route` (cached prefix and load), the same behind the router with prefix
choice off (--load-only: least busy, round robin among equals), and one single replica alone.
Each setup starts fresh (a real three-master Redis cluster for the two routed ones). Prints, per
setup, the prompt tokens sent and reused (usage.prompt_tokens_details.cached_tokens), the reuse
as a share of the prompt tokens and of the single replica's, and TTFT p50/p99 (streamed chat
completions); then one JSON line. Goal: the router keeps >= 90 % of the single replica's reuse.

    .venv/bin/python bench/scale_out.py --bin build/strata --users 12 --turns 4 --doc-tokens 1500

--doc-tokens counts for BPE vocabularies (a real --model); the demo model's byte vocabulary makes
each word about twice as many tokens, so --doc-tokens 700 gives it prompts of about 1,500 tokens.

Options (defaults): --bin (build/strata) --model (none: --demo; else a GGUF path) --users (12)
--turns (4) --doc-tokens (1500) --max-tokens (16) --concurrency (users) --seed (1)
--modes (router,round-robin,single)
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
for name, default in [("bin", "build/strata"), ("model", ""), ("users", "12"), ("turns", "4"), ("doc-tokens", "1500"),
                      ("max-tokens", "16"), ("concurrency", ""), ("seed", "1"), ("modes", "router,round-robin,single")]:
    parser.add_argument(f"--{name}", default=default)
opt = parser.parse_args()
os.environ["STRATA_BIN"] = str(Path(opt.bin).resolve())

from redis_cluster import RedisCluster  # noqa: E402 (needs STRATA_BIN set first)
from route_cluster import route, serve  # noqa: E402

print(f"scale_out: seed {opt.seed}", file=sys.stderr)
rng = random.Random(int(opt.seed))
WORDS = [f"w{rng.randrange(10_000)}" for _ in range(5000)]


def document(user: int) -> str:
    """About --doc-tokens tokens of text of the user's own (words drawn with the seed)."""
    r = random.Random(int(opt.seed) * 1000 + user)
    # A drawn word "wNNNN" is a few tokens in the models' vocabularies; 1 word ~ 2.5 tokens.
    return f"Document of user {user}:\n" + " ".join(r.choice(WORDS) for _ in range(int(int(opt.doc_tokens) / 2.5)))


def conversation(user: int, turn: int) -> list[dict]:
    messages = [{"role": "system", "content": document(user)}]
    for t in range(turn + 1):
        messages.append({"role": "user", "content": f"Question {t}: what does part {t} of the document say?"})
        if t < turn:
            messages.append({"role": "assistant", "content": f"Part {t} lists some words."})
    return messages


def one_turn(base: str, user: int, turn: int) -> tuple[float, int, int]:
    """(TTFT in s, prompt tokens, cached tokens) of a streamed turn."""
    body = {"messages": conversation(user, turn), "max_tokens": int(opt.max_tokens), "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    ttft, usage = None, None
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=600) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if ttft is None and chunk.get("choices"):
                ttft = time.perf_counter() - t0
            if chunk.get("usage"):
                usage = chunk["usage"]
    return ttft, usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


def workload(base: str) -> dict:
    """Every user's turns in order, users side by side (--concurrency at once)."""
    users = list(range(int(opt.users)))
    sem = threading.Semaphore(int(opt.concurrency or opt.users))
    results, lock = [], threading.Lock()

    def user_run(u: int) -> None:
        for turn in range(int(opt.turns)):
            with sem:
                got = one_turn(base, u, turn)
            with lock:
                results.append(got)
            time.sleep(0.2)  # the user reads; the replicas publish their blocks meanwhile

    threads = [threading.Thread(target=user_run, args=(u,)) for u in users]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttfts = sorted(r[0] for r in results)
    pct = lambda q: ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))]  # noqa: E731
    return {"requests": len(results), "prompt_tokens": sum(r[1] for r in results), "cached_tokens": sum(r[2] for r in results),
            "ttft_p50_ms": round(pct(0.5) * 1000, 1), "ttft_p99_ms": round(pct(0.99) * 1000, 1), "wall_s": round(wall, 1)}


def replica_args(redis) -> list[str]:
    return ["--cache-mode", "hot"] + (["--redis", redis.seeds] if redis else [])


def run_mode(mode: str) -> dict:
    redis = RedisCluster() if mode != "single" else None
    replicas, router = [], None
    try:
        n = 1 if mode == "single" else 3
        model = str(Path(opt.model).resolve()) if opt.model else None
        replicas = [serve(replica_args(redis), model=model) for _ in range(n)]
        base = replicas[0].base_url
        if mode != "single":
            router = route([r.base_url for r in replicas], ["--redis", redis.seeds] + (["--load-only"] if mode == "round-robin" else []))
            base = router.base_url
        return workload(base)
    finally:
        if router:
            router.stop()
        for r in replicas:
            r.stop()
        if redis:
            redis.stop()


out = {}
for mode in opt.modes.split(","):
    print(f"scale_out: running {mode} ...", file=sys.stderr)
    out[mode] = run_mode(mode)
single = out.get("single", {}).get("cached_tokens")
print(f"\n{opt.users} users x {opt.turns} turns, ~{opt.doc_tokens}-token documents, {opt.max_tokens} tokens per answer")
print(f"{'setup':<12} {'requests':>8} {'prompt tok':>11} {'reused':>9} {'reuse':>7} {'vs single':>10} {'TTFT p50':>10} {'TTFT p99':>10}")
for mode, r in out.items():
    share = 100 * r["cached_tokens"] / max(1, r["prompt_tokens"])
    vs = f"{100 * r['cached_tokens'] / single:.1f} %" if single else "-"
    r["reuse_pct"] = round(share, 1)
    r["vs_single_pct"] = round(100 * r["cached_tokens"] / single, 1) if single else None
    print(f"{mode:<12} {r['requests']:>8} {r['prompt_tokens']:>11} {r['cached_tokens']:>9} {share:>6.1f}% {vs:>10} "
          f"{r['ttft_p50_ms']:>8.1f}ms {r['ttft_p99_ms']:>8.1f}ms")
print(json.dumps(out))
