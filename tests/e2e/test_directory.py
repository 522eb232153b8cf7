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


def chain_keys(server, path: str, body: dict) -> list[str]:
    r = httpx.post(f"{server.base_url}/internal/chain", json=body, headers={"x-strata-path": path}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["keys"]


def test_internal_chain_names_the_keys_the_replica_lists_once_it_ran_the_request(launch, redis_cluster):  # noqa: F811
    server = launch(["--demo", "--redis", redis_cluster.seeds])
    port = redis_cluster.ports[0]
    chat = {"messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": "hi"}], "max_tokens": 1}
    for path, body in [("/v1/completions", {"prompt": PROMPT, "max_tokens": 1}), ("/v1/chat/completions", chat)]:
        keys = chain_keys(server, path, body)
        assert len(keys) >= 30 and all(KEY.match(k) for k in keys), keys[:2]
        assert all(cli(port, "-c", "EXISTS", k) == "0" for k in keys[:3]), "nothing listed before the request ran"
        r = httpx.post(f"{server.base_url}{path}", json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert wait_for(lambda: all(cli(port, "-c", "HGET", k, server.base_url) for k in keys)), path
    salted = chain_keys(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1, "cache_salt": "t"})
    assert not set(salted) & set(chain_keys(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1}))
    r = httpx.post(f"{server.base_url}/internal/chain", json={}, headers={"x-strata-path": "/v1/nothing"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "x-strata-path"
