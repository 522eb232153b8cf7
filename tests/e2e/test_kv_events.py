"""KV events: a replica started with --kv-events publishes its blocks over ZeroMQ in vLLM's format,
decoded here with pyzmq and msgpack (independent of the server's encoder), and answers replays."""

from __future__ import annotations

import re
import time

import httpx
import msgpack
import zmq

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
