"""The cluster directory: a replica started with --redis lists the blocks it holds in a real
three-master Redis cluster, under keys that carry the model, KV format, block size (and, through
the hash, the cache salt), with TTLs that let a dead replica's entries expire."""

from __future__ import annotations

import re
import time

import httpx

from redis_cluster import cli, redis_cluster  # noqa: F401 (a fixture)

KEY = re.compile(r"^strata:kv:[0-9a-f]{32}:f16:32:[0-9a-f]{64}$")
PROMPT = " ".join(f"w{i}" for i in range(400))


def complete(server, prompt: str, **extra) -> dict:
    r = httpx.post(f"{server.base_url}/v1/completions",
                   json={"prompt": prompt, "max_tokens": 1, "temperature": 0, **extra}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def all_keys(cluster) -> dict[int, list[str]]:
    return {p: cluster.keys(p) for p in cluster.ports}


def wait_for(cond, timeout: float = 15):
    end = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() > end:
            return v
        time.sleep(0.1)


def test_a_replica_lists_its_blocks_on_every_master_and_they_expire_after_it_dies(launch, redis_cluster):  # noqa: F811
    server = launch(["--demo", "--redis", redis_cluster.seeds, "--directory-ttl", "3s"])
    url = server.base_url
    usage = complete(server, PROMPT)["usage"]
    n_blocks = (usage["prompt_tokens"] - 1) // 32
    assert n_blocks >= 30, usage
    keys = wait_for(lambda: (lambda k: k if sum(map(len, k.values())) >= n_blocks else None)(all_keys(redis_cluster)))
    assert keys, all_keys(redis_cluster)
    assert all(len(k) > 0 for k in keys.values()), f"keys on every master: { {p: len(k) for p, k in keys.items()} }"
    port, key = next((p, k[0]) for p, k in keys.items() if k)
    assert KEY.match(key), key
    fields = cli(port, "HGETALL", key).splitlines()
    assert fields[0] == url and int(fields[1]) > time.time(), fields
    assert 0 < int(cli(port, "TTL", key)) <= 3

    # A salted request's blocks are other keys: no tenant's lookup can meet another's.
    before = set(k for ks in keys.values() for k in ks)
    complete(server, PROMPT, cache_salt="tenant-a")
    salted = wait_for(lambda: (lambda s: s if len(s - before) >= n_blocks else None)(
        set(k for ks in all_keys(redis_cluster).values() for k in ks)))
    assert salted, "the salted prompt adds its own keys"

    # Entries are refreshed while the replica lives...
    time.sleep(4)
    assert sum(map(len, all_keys(redis_cluster).values())) >= 2 * n_blocks
    # ... and expire once it is gone.
    server.kill9()
    assert wait_for(lambda: sum(map(len, all_keys(redis_cluster).values())) == 0, timeout=10), all_keys(redis_cluster)


def test_a_replica_whose_redis_is_unreachable_still_serves(launch):
    server = launch(["--demo", "--redis", "127.0.0.1:1", "--directory-ttl", "1s"])
    assert complete(server, PROMPT)["usage"]["prompt_tokens"] > 0
    assert complete(server, PROMPT)["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
