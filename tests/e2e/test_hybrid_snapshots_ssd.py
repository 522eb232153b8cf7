"""Frozen boundary snapshots in the SSD tier: a recurrent hybrid (qwen35, granitehybrid) served with
cache.mode = tiered writes each snapshot as a record of the segment files; after a restart on the
same cache directory a longer prompt resumes from the snapshot at the previous prompt's end
(chain blocks and snapshot read back from the SSD) and gives the same tokens as no cache; a
damaged snapshot record is a miss that still gives the right tokens."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import httpx
import pytest

from test_hybrid_snapshots import ARCHS, config, synth, tokenize

HEADER = 4096
SNAPSHOT_KIND = 1


def complete(base_url: str, tokens: list[int]) -> tuple[str, int]:
    """The text of a greedy completion of `tokens`, and how many prompt tokens came from the cache."""
    model = httpx.get(f"{base_url}/v1/models", timeout=30).json()["data"][0]["id"]
    r = httpx.post(f"{base_url}/v1/completions", timeout=300,
                   json={"model": model, "prompt": tokens, "max_tokens": 10, "temperature": 0, "ignore_eos": True})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["choices"][0]["text"], (body["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def snapshot_records(cache_dir: Path) -> list[tuple[Path, int, int]]:
    """(segment file, record offset, payload bytes) of every snapshot record under the SSD tier."""
    out = []
    for seg in sorted((cache_dir / "kv").glob("seg-*.kv")):
        data = seg.read_bytes()
        at = 0
        while at + HEADER <= len(data) and data[at:at + 8] == b"STRATAKV":
            version, kind = struct.unpack_from("<I", data, at + 8)[0], data[at + 14]
            payload = struct.unpack_from("<Q", data, at + 104)[0]
            if version >= 2 and kind == SNAPSHOT_KIND:
                out.append((seg, at, payload))
            at += HEADER + (payload + 4095) // 4096 * 4096
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_a_snapshot_on_the_ssd_resumes_a_longer_prompt_after_a_restart_and_a_damaged_one_is_a_miss(tmp_path: Path,
                                                                                                   launch, arch: str):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    words = ["tide", "shore", "wave", "salt", "gull", "reef", "foam", "drift"]
    first = " ".join(rng.choice(words) for _ in range(700))
    longer = first + " " + " ".join(rng.choice(words) for _ in range(60))
    model = synth(tmp_path, arch)
    conf = config(tmp_path)

    off = launch(["--model", str(model), "--config", str(conf), "--cache-mode", "off"])
    t1, t2 = tokenize(off.base_url, first), tokenize(off.base_url, longer)
    assert len(t1) > 500 and t2[:len(t1)] == t1
    want, _ = complete(off.base_url, t2)
    off.stop()

    cache = tmp_path / "cache"
    args = ["--model", str(model), "--config", str(conf), "--cache-mode", "tiered"]
    server = launch(args, cache_dir=cache)
    _, cached = complete(server.base_url, t1)
    assert cached == 0
    server.stop()
    assert snapshot_records(cache), "the prompt's snapshot was written to the SSD tier"

    server = launch(args, cache_dir=cache)
    got, cached = complete(server.base_url, t2)
    server.stop()
    assert got == want, f"seed {seed}"
    assert cached >= 0.95 * len(t1), f"cached {cached} of the previous prompt's {len(t1)} (seed {seed})"

    # Damage every snapshot record's payload: a miss, never the wrong state.
    for seg, at, payload in snapshot_records(cache):
        with open(seg, "r+b") as f:
            f.seek(at + HEADER + payload // 2)
            b = f.read(1)
            f.seek(at + HEADER + payload // 2)
            f.write(bytes([b[0] ^ 0x5A]))
    server = launch(args, cache_dir=cache)
    got, cached = complete(server.base_url, t2)
    server.stop()
    assert got == want, f"seed {seed}"
    assert cached < 0.5 * len(t1), f"cached {cached}: a damaged snapshot resumed a sequence (seed {seed})"
