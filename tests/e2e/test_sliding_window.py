"""Sliding-window models (gemma3, gpt-oss) served with bounded memory: a sliding-window layer keeps
only its window per running sequence (a ring in the sequence's state slot), the KV blocks hold the
global layers only, and a request resumes from a frozen boundary snapshot of the windows. The
prefix cache then gives the same tokens as no cache (temperature 0, concurrent requests, KV of 16,
8 and 4 bits), a second turn reuses almost all of its prompt, also after a restart (SSD tier), and
many distinct prefixes never push the snapshots past cache.hot_memory."""

from __future__ import annotations

import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from strata_server import STRATA_BIN, model_dir

# Small shapes whose windows (gemma3: 512, gpt-oss: 128) the prompts below pass several times.
SYNTH = {
    "gemma3": ["--arch", "gemma3", "--layers", "6", "--hidden", "64", "--heads", "2", "--kv-heads", "1",
               "--head-dim", "32", "--ffn", "128", "--vocab", "builtin", "--ctx", "4096", "--quiet"],
    "gpt-oss": ["--arch", "gpt-oss", "--layers", "2", "--hidden", "64", "--heads", "2", "--kv-heads", "1",
                "--head-dim", "32", "--ffn", "128", "--experts", "4", "--vocab", "builtin", "--ctx", "4096", "--quiet"],
}
REAL_GEMMA3 = model_dir() / "gemma-3-270m-q4_k_m.gguf"
WORDS = ["alpha", "beta", "gamma", "delta", "window", "chunk", "block", "river", "stone", "cloud", "seven", "nine"]
MAX_TOKENS = 8


def synth(tmp_path: Path, arch: str) -> Path:
    out = tmp_path / f"{arch}.gguf"
    subprocess.run([STRATA_BIN, "synth", *SYNTH[arch], "--out", str(out)], check=True, timeout=120)
    return out


def config(tmp_path: Path, extra: str = "") -> Path:
    conf = tmp_path / "strata.toml"
    conf.write_text("[scheduler]\ntoken_budget = 96\nmax_running = 4\n[kv]\nblock_tokens = 16\n" + extra, encoding="utf-8")
    return conf


def tokenize(base_url: str, text: str) -> list[int]:
    r = httpx.post(f"{base_url}/tokenize", json={"content": text}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def complete(base_url: str, tokens: list[int], bits: int = 16, max_tokens: int = MAX_TOKENS) -> tuple[str, int]:
    """The text of a greedy completion of `tokens`, and how many prompt tokens came from the cache."""
    r = httpx.post(f"{base_url}/v1/completions", timeout=600,
                   json={"prompt": tokens, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                         "kv_bits": bits})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["choices"][0]["text"], (body["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def prompts(rng: random.Random, n_stems: int, words: tuple[int, int], per_stem: int = 3) -> list[str]:
    """Prompts that share stems longer than a window, then part ways (so many resume from a snapshot)."""
    stems = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) for _ in range(n_stems)]
    return [stem + " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 80))) for stem in stems
            for _ in range(per_stem)]


def run_all(base_url: str, token_lists: list[list[int]], workers: int = 8, rounds: int = 2) -> list[tuple[str, int]]:
    """Every prompt at 16, 8 and 4 bits, all at once, `rounds` times over (a second round finds the
    first one's snapshots)."""
    jobs = [(t, bits) for bits in (16, 8, 4) for t in token_lists]
    out = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(rounds):
            out += list(pool.map(lambda j: complete(base_url, *j), jobs))
    return out


def stats(base_url: str) -> dict:
    return httpx.get(f"{base_url}/admin/api/stats", timeout=30).json()


def check_cache_on_and_off(launch, model: Path, conf: Path, token_lists: list[list[int]], seed: int, workers: int = 8):
    off = launch(["--model", str(model), "--config", str(conf), "--cache-mode", "off"])
    want = run_all(off.base_url, token_lists, workers, rounds=1) * 2  # without a cache both rounds are the same
    off.stop()
    on = launch(["--model", str(model), "--config", str(conf), "--cache-mode", "hot", "--snapshot-every", "4"])
    got = run_all(on.base_url, token_lists, workers)
    s = stats(on.base_url)
    on.stop()
    assert [text for text, _ in got] == [text for text, _ in want], f"seed {seed}"
    assert all(cached == 0 for _, cached in want)
    assert sum(cached for _, cached in got) > 0, "the second round resumed from snapshots"
    assert s["snapshots"]["restores"] > 0 and s["snapshots"]["count"] > 0 and s["snapshot_bytes"] > 0


@pytest.mark.parametrize("arch", ["gemma3", "gpt-oss"])
def test_cache_on_and_off_give_the_same_tokens_for_many_concurrent_prompts_at_every_kv_width(tmp_path: Path, launch, arch):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    model = synth(tmp_path, arch)
    conf = config(tmp_path)
    probe = launch(["--model", str(model), "--config", str(conf), "--cache-mode", "off"])
    token_lists = [tokenize(probe.base_url, p) for p in prompts(random.Random(seed), 4, (200, 500))]
    probe.stop()
    assert max(len(t) for t in token_lists) > 600, "prompts pass the window"
    check_cache_on_and_off(launch, model, conf, token_lists, seed)


def test_the_kv_blocks_hold_only_the_global_layers(tmp_path: Path, launch):
    server = launch(["--model", str(synth(tmp_path, "gemma3")), "--config", str(config(tmp_path))])
    s = stats(server.base_url)
    server.stop()
    # One global layer of six (every sixth), a 32-value row of keys and one of values, in f16.
    assert s["kv_bytes_per_token"]["f16"] == 1 * 2 * 32 * 2


def second_turn(base_url: str, first: str) -> tuple[int, int]:
    """Runs a first turn, then a second one on its prompt and reply: (cached tokens of the second
    turn, what a pure-attention cache could reuse of it)."""
    t1 = tokenize(base_url, first)
    reply, cached1 = complete(base_url, t1, max_tokens=24)
    assert cached1 == 0
    second = first + reply + "\nUser: and then what happened?\nAssistant:"
    t2 = tokenize(base_url, second)
    shared = tokenize(base_url, first + reply)
    pure = 0
    while pure < min(len(shared), len(t2) - 1) and shared[pure] == t2[pure]:
        pure += 1
    _, cached2 = complete(base_url, t2)
    return cached2, pure


def test_a_second_turn_reuses_at_least_95_percent_of_what_a_pure_attention_model_would(tmp_path: Path, launch):
    server = launch(["--model", str(synth(tmp_path, "gemma3")), "--config", str(config(tmp_path))])
    rng = random.Random(7)
    first = "User: " + " ".join(rng.choice(["tell", "me", "about", "the", "sea", "and", "its", "waves"]) for _ in range(1500))
    cached2, pure = second_turn(server.base_url, first)
    server.stop()
    assert pure > 1000
    assert cached2 >= 0.95 * pure, f"cached {cached2}; a pure-attention cache: {pure}"


def test_a_longer_prompt_resumes_from_the_ssd_after_a_restart_with_the_tokens_of_no_cache(tmp_path: Path, launch):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    first = " ".join(rng.choice(WORDS) for _ in range(900))
    longer = first + " " + " ".join(rng.choice(WORDS) for _ in range(60))
    model = synth(tmp_path, "gemma3")
    conf = config(tmp_path)
    off = launch(["--model", str(model), "--config", str(conf), "--cache-mode", "off"])
    t1, t2 = tokenize(off.base_url, first), tokenize(off.base_url, longer)
    assert len(t1) > 700 and t2[:len(t1)] == t1
    want, _ = complete(off.base_url, t2)
    off.stop()
    cache = tmp_path / "cache"
    args = ["--model", str(model), "--config", str(conf), "--cache-mode", "tiered"]
    server = launch(args, cache_dir=cache)
    complete(server.base_url, t1)
    server.stop()
    server = launch(args, cache_dir=cache)
    got, cached = complete(server.base_url, t2)
    server.stop()
    assert got == want, f"seed {seed}"
    assert cached >= 0.95 * len(t1), f"cached {cached} of the previous prompt's {len(t1)} (seed {seed})"


def test_200_distinct_prefixes_never_push_the_snapshots_past_the_hot_memory_budget(tmp_path: Path, launch):
    budget = 4 << 20
    server = launch(["--model", str(synth(tmp_path, "gemma3")), "--config",
                     str(config(tmp_path, f'[cache]\nhot_memory = "{budget}"\n'))])
    rng = random.Random(3)
    prefixes = [f"prefix {i}: " + " ".join(rng.choice(WORDS) for _ in range(300)) for i in range(200)]
    token_lists = [tokenize(server.base_url, p) for p in prefixes]
    peak = 0
    with ThreadPoolExecutor(max_workers=4) as pool:
        for i in range(0, len(token_lists), 20):
            list(pool.map(lambda t: complete(server.base_url, t, max_tokens=1), token_lists[i:i + 20]))
            s = stats(server.base_url)
            peak = max(peak, s["snapshot_bytes"])
            assert s["snapshot_bytes"] <= budget and s["tiers"]["ram"]["bytes_cached"] <= budget, s
    s = stats(server.base_url)
    server.stop()
    assert s["snapshots"]["taken"] >= 200
    assert 0 < peak <= budget


# Prefill is batch-invariant (kernels/batch_invariance.test.cpp): a position's KV and logits are
# the same bits whether it was computed in one chunk, after a prefix resumed from a snapshot, or
# decoded, and whatever else shares its steps. So even on a real model, where the 8-bit rounding
# of every quantized matmul's activations would carry a last-bit difference on to a near tie
# between the two best tokens, the cache changes no token.
@pytest.mark.skipif(not REAL_GEMMA3.exists(), reason="the real Gemma 3 is fetched by scripts/fetch-model.sh")
def test_the_real_gemma3_gives_the_same_tokens_with_the_cache_on_and_off(tmp_path: Path, launch):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    conf = config(tmp_path)
    probe = launch(["--model", str(REAL_GEMMA3), "--config", str(conf), "--cache-mode", "off"])
    token_lists = [tokenize(probe.base_url, p) for p in prompts(random.Random(seed), 1, (620, 680), per_stem=2)]
    probe.stop()
    assert max(len(t) for t in token_lists) > 600, "prompts pass the window"
    check_cache_on_and_off(launch, REAL_GEMMA3, conf, token_lists, seed, workers=3)
