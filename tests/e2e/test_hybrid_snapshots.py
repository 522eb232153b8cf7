"""Frozen boundary snapshots on the recurrent hybrids (qwen35's Gated DeltaNet, granitehybrid's
Mamba-2): a request resumes from the deepest
block boundary whose chain and snapshot are cached, so the prefix cache gives the same tokens as no
cache at all (temperature 0, concurrent requests, KV of 16, 8 and 4 bits), and a second turn reuses
almost all of what a pure-attention model would."""

from __future__ import annotations

import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from strata_server import STRATA_BIN

SYNTH = ["--layers", "4", "--hidden", "64", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
         "--ffn", "128", "--vocab", "builtin", "--ctx", "4096", "--quiet"]
# Each hybrid's own flags: granitehybrid's Mamba-2 layers with 16 state values per channel.
ARCHS = {"qwen35": [], "granitehybrid": ["--ssm-state", "16"]}
MAX_TOKENS = 10


def synth(tmp_path: Path, arch: str = "qwen35") -> Path:
    out = tmp_path / f"{arch}.gguf"
    subprocess.run([STRATA_BIN, "synth", "--arch", arch, *ARCHS[arch], *SYNTH, "--out", str(out)], check=True, timeout=120)
    return out


def config(tmp_path: Path) -> Path:
    conf = tmp_path / "strata.toml"
    conf.write_text("[scheduler]\ntoken_budget = 64\nmax_running = 4\n[kv]\nblock_tokens = 16\n", encoding="utf-8")
    return conf


def tokenize(base_url: str, text: str) -> list[int]:
    r = httpx.post(f"{base_url}/tokenize", json={"content": text}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def complete(base_url: str, tokens: list[int], bits: int, max_tokens: int = MAX_TOKENS) -> tuple[str, int]:
    """The text of a greedy completion of `tokens`, and how many prompt tokens came from the cache."""
    r = httpx.post(f"{base_url}/v1/completions", timeout=300,
                   json={"prompt": tokens, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                         "kv_bits": bits})
    assert r.status_code == 200, r.text
    body = r.json()
    details = body["usage"].get("prompt_tokens_details") or {}
    return body["choices"][0]["text"], details.get("cached_tokens") or 0


def prompts(seed: int) -> list[str]:
    """Prompts that share prefixes of different lengths (so many resume from a snapshot)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "state", "chunk", "block", "river", "stone", "cloud", "seven", "nine"]
    stems = [" ".join(rng.choice(words) for _ in range(rng.randint(40, 160))) for _ in range(3)]
    out = []
    for stem in stems:
        for _ in range(4):
            out.append(stem + " " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 60))))
    return out


def run_all(base_url: str, token_lists: list[list[int]]) -> list[tuple[str, int]]:
    """Every prompt at 16, 8 and 4 bits, all at once, twice over (the second round finds the
    first one's snapshots)."""
    jobs = [(t, bits) for bits in (16, 8, 4) for t in token_lists]
    with ThreadPoolExecutor(max_workers=8) as pool:
        first = list(pool.map(lambda j: complete(base_url, *j), jobs))
        second = list(pool.map(lambda j: complete(base_url, *j), jobs))
    return first + second


@pytest.mark.parametrize("arch", ARCHS)
def test_cache_on_and_off_give_the_same_tokens_for_many_concurrent_prompts_at_every_kv_width(tmp_path: Path, launch, arch: str):
    seed = int(os.environ.get("STRATA_TEST_SEED") or random.randrange(1 << 30))
    print(f"seed {seed} (rerun with STRATA_TEST_SEED={seed})")
    model = synth(tmp_path, arch)
    off = launch(["--model", str(model), "--config", str(config(tmp_path)), "--cache-mode", "off"])
    token_lists = [tokenize(off.base_url, p) for p in prompts(seed)]
    want = run_all(off.base_url, token_lists)
    off.stop()
    on = launch(["--model", str(model), "--config", str(config(tmp_path)), "--cache-mode", "hot", "--snapshot-every", "2"])
    got = run_all(on.base_url, token_lists)
    stats = httpx.get(f"{on.base_url}/admin/api/stats", timeout=30).json()
    on.stop()
    assert [text for text, _ in got] == [text for text, _ in want], f"seed {seed}"
    assert all(cached == 0 for _, cached in want)
    assert sum(cached for _, cached in got) > 0, "the second round resumed from snapshots"
    assert stats["snapshots"]["restores"] > 0
    assert stats["snapshots"]["count"] > 0 and stats["snapshot_bytes"] > 0


@pytest.mark.parametrize("reply_tokens", [24, 400])
@pytest.mark.parametrize("arch", ARCHS)
def test_a_second_turn_reuses_at_least_95_percent_of_what_a_pure_attention_model_would(tmp_path: Path, launch, arch: str,
                                                                                     reply_tokens: int):
    # A long reply is repeated by the next prompt too: the turn resumes at the reply's last
    # boundary, not at the previous prompt's end.
    model = synth(tmp_path, arch)
    server = launch(["--model", str(model), "--config", str(config(tmp_path))])
    rng = random.Random(7)
    first = "User: " + " ".join(rng.choice(["tell", "me", "about", "the", "sea", "and", "its", "waves"]) for _ in range(1500))
    t1 = tokenize(server.base_url, first)
    assert len(t1) > 1000
    r = httpx.post(f"{server.base_url}/v1/completions", timeout=300,
                   json={"prompt": t1, "max_tokens": reply_tokens, "temperature": 0, "ignore_eos": True, "return_token_ids": True})
    assert r.status_code == 200, r.text
    assert (r.json()["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0) == 0
    reply = r.json()["choices"][0]["token_ids"]
    assert len(reply) == reply_tokens
    # The next turn repeats the prompt and the reply as they were generated, then a new question.
    t2 = t1 + reply + tokenize(server.base_url, "\nUser: and then what happened?\nAssistant:")
    # A pure-attention cache reuses every computed token: the prompt and the reply but its last
    # token, which was sampled and never fed back.
    pure = len(t1) + len(reply) - 1
    _, cached2 = complete(server.base_url, t2, 16)
    server.stop()
    assert cached2 >= 0.95 * pure, f"cached {cached2} of {len(t2)}; a pure-attention cache: {pure}"
