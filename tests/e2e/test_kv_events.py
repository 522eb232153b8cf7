"""KV events: a replica started with --kv-events publishes its blocks over ZeroMQ in vLLM's format,
decoded here with pyzmq and msgpack (independent of the server's encoder), and answers replays.
The host tier's blocks are published too, as "CPU" blocks (the pool's medium on the CPU as well)."""

from __future__ import annotations

import os
import re
import time

import httpx
import msgpack
import zmq

from strata_server import model_path

BLOCK = 32


def endpoints(server) -> tuple[str, str]:
    m = re.search(r"KV events: publishing on (\S+), replay on (\S+)", server.log())
    assert m, server.log()
    return m.group(1).rstrip(","), m.group(2)


def replay(ctx: zmq.Context, endpoint: str, start: int) -> list[tuple[int, bytes]]:
    """Asks for every batch from sequence `start` on; returns (sequence, payload) pairs."""
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.RCVTIMEO, 5000)
    s.connect(endpoint)
    s.send_multipart([b"", start.to_bytes(8, "big")])
    out = []
    while True:
        _, seq, payload = s.recv_multipart()
        n = int.from_bytes(seq, "big", signed=True)
        if n == -1:
            assert payload == b""
            break
        out.append((n, payload))
    s.close(0)
    return out


def complete(server, prompt: str) -> dict:
    r = httpx.post(f"{server.base_url}/v1/completions",
                   json={"prompt": prompt, "max_tokens": 1, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_prompt_of_several_blocks_is_published_as_one_block_stored_chain_with_its_tokens(launch):
    server = launch(["--demo", "--kv-events", "tcp://127.0.0.1:*", "--kv-events-replay", "tcp://127.0.0.1:*"])
    pub, rep = endpoints(server)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, 10000)
    sub.connect(pub)
    time.sleep(0.3)  # a subscriber misses what goes out while it joins
    prompt = " ".join(f"word{i}" for i in range(60))
    usage = complete(server, prompt)["usage"]
    n_blocks = (usage["prompt_tokens"] - 1) // BLOCK
    assert n_blocks >= 2, usage

    topic, seq, payload = sub.recv_multipart()
    assert topic == b"" and len(seq) == 8
    ts, events = msgpack.unpackb(payload)
    assert abs(ts - time.time()) < 60
    stored = [e for e in events if e[0] == "BlockStored"]
    assert stored, events
    tag, hashes, parent, token_ids, block_size, lora_id, medium = stored[0]
    assert block_size == BLOCK and lora_id is None and medium == "CPU"
    assert parent is None  # the chain's first block
    assert all(isinstance(h, bytes) and len(h) == 32 for h in hashes)
    assert len(hashes) >= n_blocks
    assert len(token_ids) == len(hashes) * BLOCK

    # The replay from 0: the start's AllBlocksCleared, then the batch above, sequence numbers in order.
    batches = replay(ctx, rep, 0)
    assert [n for n, _ in batches] == list(range(len(batches)))
    assert msgpack.unpackb(batches[0][1])[1] == [["AllBlocksCleared"]]
    assert batches[int.from_bytes(seq, "big")][1] == payload
    # From a later sequence: only what came after.
    assert [n for n, _ in replay(ctx, rep, 1)] == list(range(1, len(batches)))
    sub.close(0)
    ctx.term()


def test_an_endpoint_that_cannot_be_bound_stops_the_server_with_a_message_naming_it(tmp_path):
    import subprocess
    from strata_server import STRATA_BIN
    p = subprocess.run([STRATA_BIN, "serve", "--demo", "--port", "0", "--cache-dir", str(tmp_path),
                        "--kv-events", "nonsense://x"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "nonsense://x" in p.stdout + p.stderr


def fold_cpu(batches: list[tuple[int, bytes]]) -> tuple[set[bytes], list[list]]:
    """The blocks a consumer holds in medium "CPU" after these batches, and the CPU events in order."""
    held: set[bytes] = set()
    events = []
    for _, payload in batches:
        for e in msgpack.unpackb(payload)[1]:
            if e[0] == "AllBlocksCleared":
                held.clear()
            elif e[0] == "BlockStored" and e[6] == "CPU":
                assert not held & set(e[1]), f"stored twice in CPU: {e}"
                held |= set(e[1])
                events.append(e)
            elif e[0] == "BlockRemoved" and e[2] == "CPU":
                assert set(e[1]) <= held, f"removed, never stored: {e}"
                held -= set(e[1])
                events.append(e)
    return held, events


def test_host_tier_blocks_are_published_as_cpu_blocks_as_they_reach_it_and_as_it_is_cleared(launch, tmp_path):
    seed = int(os.environ.get("STRATA_TEST_SEED") or ((int(time.time() * 1000) ^ os.getpid()) & 0xFFFFFFFF))
    print(f"seed = {seed} (rerun with STRATA_TEST_SEED={seed})")
    config = tmp_path / "host.toml"
    config.write_text('[cache]\nmode = "hot"\nhot_memory = 0\n[kv]\nmemory = "16MiB"\nblock_tokens = 16\n')
    server = launch(["-m", model_path("tiny-llama-spm-f16"), "--config", str(config), "--host-memory", "8MiB",
                     "--kv-events", "tcp://127.0.0.1:*", "--kv-events-replay", "tcp://127.0.0.1:*"])
    _, rep = endpoints(server)
    state = seed
    prompt = []
    for _ in range(70):  # 4 full blocks of 16 computed, and a tail
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        prompt.append(3 + state % 250)
    r = httpx.post(f"{server.base_url}/v1/completions", json={"prompt": prompt, "max_tokens": 1, "temperature": 0}, timeout=120)
    assert r.status_code == 200, r.text

    # The pool keeps nothing: each block left it as the request ended, for the host tier.
    ctx = zmq.Context()
    end = time.time() + 15
    while True:
        held, events = fold_cpu(replay(ctx, rep, 0))
        if len(held) == 4 and len(events) >= 3:
            break
        assert time.time() < end, events
        time.sleep(0.1)
    stored = [e for e in events if e[0] == "BlockStored"]
    removed = [e for e in events if e[0] == "BlockRemoved"]
    # Stored from the pool (with tokens), removed as it evicts them, stored again as the host tier
    # holds them: the same chain, the same parent and tokens.
    assert set(stored[0][1]) == held and set(removed[0][1]) == held
    assert stored[-1][1] == stored[0][1] and stored[-1][2] is None
    assert stored[-1][3] == stored[0][3] == prompt[:64]
    assert [e[0] for e in events] == ["BlockStored", "BlockRemoved", "BlockStored"], events

    # Clearing the host tier removes them.
    r = httpx.post(f"{server.base_url}/admin/api/cache/clear", json={"tier": "host"}, timeout=60)
    assert r.status_code == 200, r.text
    end = time.time() + 15
    while fold_cpu(replay(ctx, rep, 0))[0]:
        assert time.time() < end, "the host tier's blocks were not reported removed"
        time.sleep(0.1)
    ctx.term()
