"""The host tier through the real server and the official `openai` SDK.

A server whose KV pool keeps no cached block (cache.hot_memory = 0) and a host tier of 8 MiB
(`--host-memory`): a prompt's blocks leave the pool as soon as its request ends, copied out to the
host tier; asked again after other prompts, it comes back from there (usage.strata_cached_tokens
.host) with the tokens of a server that caches nothing, and /admin/api/stats and /metrics show the
tier within its budget. A bad --host-memory stops the server with a message naming it.

The prompts are pseudo-random token ids from a seed printed at the start (STRATA_TEST_SEED reruns
one).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import openai
import pytest

from strata_server import STRATA_BIN, configured_server, metric, model_path, served_id, start_server

pytestmark = pytest.mark.timeout(300)

MODEL = model_path("tiny-llama-spm-f16")
CONFIG = '[cache]\nmode = "hot"\nhot_memory = 0\n[kv]\nmemory = "16MiB"\nblock_tokens = 16\n'
HOST_MEMORY = 8 << 20

SEED = int(os.environ.get("STRATA_TEST_SEED") or ((int(time.time() * 1000) ^ os.getpid()) & 0xFFFFFFFF))


def prompts(n: int) -> list[list[int]]:
    state = SEED
    out = []
    for i in range(n):
        p = []
        for _ in range(70 + 13 * i):
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            p.append(3 + state % 250)
        out.append(p)
    return out


@pytest.fixture(autouse=True)
def show_seed(capsys):
    with capsys.disabled():
        print(f"\nseed = {SEED} (rerun with STRATA_TEST_SEED={SEED})")


def restored(n: int) -> int:
    """What a prompt of n tokens gets back after a request that computed it and 5 generated tokens
    (the 6th is sampled, not computed): its full blocks before its last token, and when the
    request's last, partly filled block (its tail) starts right after them, the tokens up to its
    last one too (a full block keeps no token ids below the pool: one that generation filled is
    not reused in part)."""
    full = (n - 1) // 16 * 16
    return n - 1 if (n + 5) // 16 * 16 == full else full


def complete(client: openai.OpenAI, prompt: list[int]):
    return client.completions.create(model=served_id(MODEL), prompt=prompt, max_tokens=6, temperature=0,
                                     extra_body={"ignore_eos": True})


def test_a_prompt_that_left_the_pool_comes_back_from_the_host_tier_with_the_same_tokens():
    known = prompts(4)
    cold = start_server(["-m", MODEL, "--cache-mode", "off"])
    try:
        client = openai.OpenAI(base_url=f"{cold.base_url}/v1", api_key="none")
        want = [complete(client, p).choices[0].text for p in known]
    finally:
        assert cold.stop() == 0
    with configured_server(CONFIG, ["-m", MODEL, "--host-memory", str(HOST_MEMORY)]) as server:
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="none")
        for i, p in enumerate(known):
            first = complete(client, p)
            assert first.choices[0].text == want[i]
            assert first.usage.prompt_tokens_details.cached_tokens == 0
        # Each prompt's blocks left the pool when its request ended; the others came in between.
        total = 0
        for i, p in enumerate(known):
            again = complete(client, p)
            assert again.choices[0].text == want[i], f"prompt {i}"
            cached = again.usage.prompt_tokens_details.cached_tokens
            tiers = again.usage.model_extra["strata_cached_tokens"]
            n = again.usage.prompt_tokens
            assert cached == restored(n), f"prompt {i} of {n} tokens"
            total += cached
            assert tiers["host"] == cached and tiers["ram"] == 0 and tiers["ssd"] == 0, tiers
        stats = httpx.get(f"{server.base_url}/admin/api/stats", timeout=60).json()
        host = stats["tiers"]["host"]
        assert host["budget_bytes"] == HOST_MEMORY
        assert 0 < host["bytes"] <= HOST_MEMORY
        assert host["blocks"] > 0 and host["stored"] >= host["blocks"]
        assert host["hits"] > 0
        assert host["restored_tokens"] == total
        assert stats["tiers"]["ram"]["bytes_cached"] == 0, "the pool itself keeps nothing"
        metrics = httpx.get(f"{server.base_url}/metrics", timeout=60).text
        assert metric(metrics, "strata_prefix_cache_host_hits_total") == host["restored_tokens"]
        assert metric(metrics, "strata_host_bytes") == host["bytes"]
        # Cleared from the admin API: the next request computes its prompt again.
        res = httpx.post(f"{server.base_url}/admin/api/cache/clear", json={"tier": "host"}, timeout=60)
        assert res.status_code == 200 and res.json() == {"cleared": "host"}, res.text
        deadline = time.monotonic() + 30
        while httpx.get(f"{server.base_url}/admin/api/stats", timeout=60).json()["tiers"]["host"]["blocks"] > 0:
            assert time.monotonic() < deadline, "the host tier was not emptied"
            time.sleep(0.05)
        again = complete(client, known[0])
        assert again.choices[0].text == want[0]
        assert again.usage.prompt_tokens_details.cached_tokens == 0


def test_the_cpu_keeps_no_host_tier_by_default():
    with configured_server(CONFIG, ["-m", MODEL]) as server:
        stats = httpx.get(f"{server.base_url}/admin/api/stats", timeout=60).json()
        assert stats["tiers"]["host"] is None
        res = httpx.post(f"{server.base_url}/admin/api/cache/clear", json={"tier": "host"}, timeout=60)
        assert res.status_code == 409 and res.json()["error"]["code"] == "tier_unavailable", res.text


@pytest.mark.parametrize("value", ["plenty", "-3", "1000"])
def test_a_bad_host_memory_stops_the_server_with_a_message_naming_it(value):
    with tempfile.TemporaryDirectory(prefix="strata-host-") as d:
        env = dict(os.environ, XDG_CACHE_HOME=d)
        run = subprocess.run([STRATA_BIN, "serve", "--port", "0", "--cache-dir", d, "-m", MODEL, f"--host-memory={value}"],
                             capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode != 0
        out = run.stdout + run.stderr
        assert "host-memory" in out or "cache.host_memory" in out, out
