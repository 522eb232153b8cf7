"""Blocks moved between replicas by value: a conversation's second turn sent to another replica of
the same model fetches the blocks of its first turn from the replica that computed them (found
through a real three-master Redis cluster), reports them as cached and answers with the same
tokens; a holder that is dead or sends a corrupted record is a miss, and the replica computes. A
block the holder keeps only in its host tier (or on its SSD) is served from there, by value."""

from __future__ import annotations

import http.server
import threading
import time

import httpx
import pytest

from redis_cluster import cli, redis_cluster  # noqa: F401 (a fixture)
from strata_server import model_path

MODEL = model_path("tiny-qwen2-gpt2-f16")
FIRST = [{"role": "system", "content": " ".join(f"rule{i}" for i in range(150))},
         {"role": "user", "content": "Summarize the rules above in one line."}]


def chat(server, messages) -> dict:
    r = httpx.post(f"{server.base_url}/v1/chat/completions",
                   json={"messages": messages, "max_tokens": 12, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def second_turn(first: dict) -> list[dict]:
    return FIRST + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                    {"role": "user", "content": "And now in two lines, please."}]


def chain_keys(server, messages) -> list[str]:
    r = httpx.post(f"{server.base_url}/internal/chain", json={"messages": messages},
                   headers={"x-strata-path": "/v1/chat/completions"}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["keys"]


def holders(cluster, key: str) -> list[str]:
    """The fields (replica URLs) of a directory key, asked of every master (only one has it)."""
    for p in cluster.ports:
        out = cli(p, "-c", "HKEYS", key).splitlines()
        if out:
            return out
    return []


def wait_listed(cluster, keys: list[str], url: str, timeout: float = 15) -> None:
    end = time.time() + timeout
    while not all(url in holders(cluster, k) for k in keys):
        assert time.time() < end, f"{url} is not listed under every key of the first turn"
        time.sleep(0.1)


def metric(server, name: str) -> float:
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{"))


@pytest.fixture
def no_values(tmp_path):
    """A configuration that keeps no record in Redis itself: every block moves replica to replica."""
    path = tmp_path / "no-values.toml"
    path.write_text("[cluster]\nredis_value_max = 0\n")
    return ["--config", str(path)]


def replica(launch, cluster, *extra):
    return launch(["-m", MODEL, "--cache-mode", "hot", "--redis", cluster.seeds, *extra])


def shared_keys(a, first_turn_messages, second) -> list[str]:
    """The directory keys the first turn listed that the second turn's chain starts with."""
    first = chain_keys(a, first_turn_messages)
    keys = chain_keys(a, second)
    n = 0
    while n < min(len(first), len(keys)) and first[n] == keys[n]:
        n += 1
    assert n >= 3, "the turns share several blocks"
    return keys[:n]


def first_turn_on_a(launch, redis_cluster, *args):
    """Two replicas A and B; the first turn on A, listed in the directory. Returns A, B, the second
    turn's messages and the directory keys both turns share."""
    a = replica(launch, redis_cluster, *args)
    b = replica(launch, redis_cluster, *args)
    second = second_turn(chat(a, FIRST))
    keys = shared_keys(a, FIRST, second)
    wait_listed(redis_cluster, keys, a.base_url)
    return a, b, second, keys


def test_a_second_turn_on_another_replica_fetches_the_first_turns_blocks_and_answers_the_same(launch, redis_cluster, no_values):  # noqa: F811
    a, b, second, keys = first_turn_on_a(launch, redis_cluster, *no_values)

    on_b = chat(b, second)
    cached = on_b["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 32 * len(keys) - 32, on_b["usage"]
    on_a = chat(a, second)  # from A's own cache: the same KV bytes
    assert on_b["choices"][0]["message"]["content"] == on_a["choices"][0]["message"]["content"]
    assert metric(b, "strata_remote_fetch_blocks_total") >= len(keys) - 1
    assert metric(b, "strata_prefix_cache_remote_hits_total") == cached
    stats = httpx.get(f"{b.base_url}/admin/api/stats", timeout=10).json()
    assert stats["tiers"]["remote"]["blocks"] >= len(keys) - 1, stats["tiers"]["remote"]

    # A block by value: the record's header and payload; 404 for one not held, 400 for a bad hash.
    h = keys[0].rsplit(":", 1)[1]
    r = httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10)
    assert r.status_code == 200 and r.content[:8] == b"STRATAKV", r.status_code
    assert r.headers["content-type"] == "application/octet-stream"
    r = httpx.get(f"{a.base_url}/internal/kv/{'0' * 64}", timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "kv_not_held", r.text
    assert httpx.get(f"{a.base_url}/internal/kv/xyz", timeout=10).status_code == 400


def test_with_the_holder_killed_the_other_replica_computes_the_turn_itself(launch, redis_cluster, no_values):  # noqa: F811
    a, b, second, keys = first_turn_on_a(launch, redis_cluster, *no_values)
    expected = chat(a, second)["choices"][0]["message"]["content"]
    a.kill9()  # still listed: its entries outlive it by the TTL

    start = time.time()
    on_b = chat(b, second)
    assert time.time() - start < 30
    assert on_b["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, on_b["usage"]
    assert on_b["choices"][0]["message"]["content"] == expected
    assert metric(b, "strata_remote_fetch_failures_total") >= 1


class _Holder(http.server.ThreadingHTTPServer):
    """A replica impostor: answers GET /internal/kv/{hash} with the record it was given for it."""
    records: dict[str, bytes]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = self.server.records.get(self.path.rsplit("/", 1)[-1])
        self.send_response(200 if body else 404)
        self.send_header("content-length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("where", ["header", "payload"])
def test_a_corrupted_record_is_a_miss_and_the_turn_is_computed_correctly(launch, redis_cluster, no_values, where):  # noqa: F811
    a, b, second, keys = first_turn_on_a(launch, redis_cluster, *no_values)
    expected = chat(a, second)["choices"][0]["message"]["content"]
    records = {}
    for k in keys:
        h = k.rsplit(":", 1)[1]
        rec = bytearray(httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10).content)
        rec[40 if where == "header" else 4096 + len(rec) // 3] ^= 0x10  # a bit of the hash, or of the KV
        records[h] = bytes(rec)
    a.kill9()

    holder = _Holder(("127.0.0.1", 0), _Handler)
    holder.records = records
    threading.Thread(target=holder.serve_forever, daemon=True).start()
    fake = f"http://127.0.0.1:{holder.server_address[1]}"
    try:
        until = str(int(time.time()) + 60)
        for k in keys:
            for p in redis_cluster.ports:
                cli(p, "-c", "HDEL", k, a.base_url)
                cli(p, "-c", "HSET", k, fake, until)
        on_b = chat(b, second)
        assert on_b["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, on_b["usage"]
        assert on_b["choices"][0]["message"]["content"] == expected
        assert metric(b, "strata_remote_fetch_failures_total") >= 1
        assert metric(b, "strata_remote_fetch_blocks_total") == 0
    finally:
        holder.shutdown()


def value_key(key: str) -> str:
    return "strata:kvv:" + key[len("strata:kv:"):]


def test_small_records_are_kept_in_redis_and_read_from_there_even_with_the_holder_gone(launch, redis_cluster):  # noqa: F811
    # The tiny model's blocks (16 KiB of KV, 20 KiB with the header) are under the 64 KiB default.
    a, b, second, keys = first_turn_on_a(launch, redis_cluster)
    end = time.time() + 15
    while not all(cli(redis_cluster.ports[0], "-c", "EXISTS", value_key(k)) == "1" for k in keys):
        assert time.time() < end, "the records are not in Redis"
        time.sleep(0.1)
    assert cli(redis_cluster.ports[0], "-c", "GETRANGE", value_key(keys[0]), "0", "7") == "STRATAKV"
    expected = chat(a, second)["choices"][0]["message"]["content"]
    a.kill9()

    on_b = chat(b, second)
    assert on_b["usage"]["prompt_tokens_details"]["cached_tokens"] >= 32 * len(keys) - 32, on_b["usage"]
    assert on_b["choices"][0]["message"]["content"] == expected
    assert metric(b, "strata_remote_fetch_redis_blocks_total") >= len(keys)

    # A corrupted value is a miss: a third replica computes, and answers the same. (B, which
    # wrote the records again as it took the blocks in, is gone first.)
    wait_listed(redis_cluster, keys, b.base_url)
    time.sleep(1)
    b.kill9()
    for k in keys:
        cli(redis_cluster.ports[0], "-c", "SETRANGE", value_key(k), "5000", "garbage")
    c = replica(launch, redis_cluster)
    on_c = chat(c, second)
    assert on_c["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, on_c["usage"]
    assert on_c["choices"][0]["message"]["content"] == expected
    assert metric(c, "strata_remote_fetch_failures_total") >= 1


def test_a_block_that_left_ram_is_served_from_the_ssd_tier_with_the_same_kv(launch):
    a = launch(["-m", MODEL, "--cache-mode", "tiered"])
    chat(a, FIRST)
    h = chain_keys(a, FIRST)[0].rsplit(":", 1)[1]
    from_ram = httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10)
    assert from_ram.status_code == 200, from_ram.text
    end = time.time() + 15
    while metric(a, "strata_ssd_writes_total") < 3:
        assert time.time() < end, "the blocks reach the SSD"
        time.sleep(0.1)
    r = httpx.post(f"{a.base_url}/admin/api/cache/clear", json={"tier": "hot"}, timeout=10)
    assert r.status_code == 200, r.text
    from_ssd = httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10)
    assert from_ssd.status_code == 200, from_ssd.text
    assert from_ssd.content[:8] == b"STRATAKV"
    assert from_ssd.content[4096:] == from_ram.content[4096:]
    assert metric(a, "strata_ssd_reads_total") >= 1


def test_blocks_only_the_holders_host_tier_keeps_stay_listed_and_are_served_from_it_with_the_same_kv(launch, redis_cluster, no_values):  # noqa: F811
    a, b, second, keys = first_turn_on_a(launch, redis_cluster, *no_values, "--host-memory", "64MiB")
    hashes = [k.rsplit(":", 1)[1] for k in keys]
    from_ram = [httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10) for h in hashes]
    assert all(r.status_code == 200 for r in from_ram), [r.status_code for r in from_ram]

    # The pool lets every cached block go; they leave for the host tier, copied out by value.
    r = httpx.post(f"{a.base_url}/admin/api/cache/clear", json={"tier": "hot"}, timeout=10)
    assert r.status_code == 200, r.text
    end = time.time() + 15
    while metric(a, "strata_host_blocks") < len(keys):
        assert time.time() < end, "the blocks reach the host tier"
        time.sleep(0.1)
    wait_listed(redis_cluster, keys, a.base_url)  # held by this replica: its host tier has them
    held = metric(a, "strata_host_blocks")
    reads = metric(a, "strata_host_reads_total")
    for h, ram in zip(hashes, from_ram):
        from_host = httpx.get(f"{a.base_url}/internal/kv/{h}", timeout=10)
        assert from_host.status_code == 200, from_host.text
        assert from_host.content[:8] == b"STRATAKV"
        assert from_host.content[4096:] == ram.content[4096:], f"block {h}: the KV the pool held"

    # B's second turn fetches them from A's host tier, which keeps them.
    on_b = chat(b, second)
    cached = on_b["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 32 * len(keys) - 32, on_b["usage"]
    assert metric(b, "strata_remote_fetch_blocks_total") >= len(keys) - 1
    assert metric(a, "strata_host_blocks") == held, "an export takes nothing out of the tier"
    assert metric(a, "strata_host_reads_total") == reads, "nor counts as a restore"
    on_a = chat(a, second)  # A restores them from its host tier
    assert on_a["usage"]["prompt_tokens_details"]["cached_tokens"] >= cached, on_a["usage"]
    assert on_b["choices"][0]["message"]["content"] == on_a["choices"][0]["message"]["content"]
