"""The SSD tier through the real server: prefixes outlive the process.

A clean stop (SIGTERM) flushes what is queued and exits 0; a restarted server answers from the SSD
with the tokens of a server that caches nothing, and restores exactly the blocks it should. Then
50 rounds of kill -9 in the middle of heavy writes: no answer is ever wrong, the server always
starts again, and the directory holds nothing but segment files within its budget.

The prompts are pseudo-random token ids from a seed printed at the start (set STRATA_TEST_SEED,
as for every random test, to run with a given one): they differ between runs of the test, not
within one.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from strata_server import model_path, served_id, start_server

MODEL = model_path("tiny-llama-spm-f16")
SSD_MAX = 16 << 20
CONFIG = ('[cache]\nmode = "tiered"\nssd_max = "16MiB"\nhot_memory = "8MiB"\n'
          '[kv]\nmemory = "16MiB"\nblock_tokens = 16\n')

SEED = int(os.environ.get("STRATA_TEST_SEED") or os.environ.get("STRATA_E2E_SEED")  # the older name
          or ((int(time.time() * 1000) ^ os.getpid()) & 0xFFFFFFFF))
_state = SEED


def rand() -> int:
    """A fixed linear congruential generator (32 bits), seeded with SEED."""
    global _state
    _state = (_state * 1664525 + 1013904223) & 0xFFFFFFFF
    return _state


def tokens(n: int) -> list[int]:
    return [3 + rand() % 250 for _ in range(n)]


KNOWN = [tokens(80 + 30 * i) for i in range(6)]


@pytest.fixture(autouse=True)
def show_seed(capsys):
    with capsys.disabled():
        print(f"\nseed = {SEED} (rerun with STRATA_TEST_SEED={SEED})")


@pytest.fixture(scope="module")
def work():
    d = Path(tempfile.mkdtemp(prefix="strata-ssd-e2e-"))
    conf = d / "tiered.toml"
    conf.write_text(CONFIG)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def args(work):
    return ["--config", str(work / "tiered.toml"), "-m", MODEL]


@dataclass
class Answer:
    text: str
    cached: int
    prompt_tokens: int


def _body(prompt, max_tokens: int) -> dict:
    return {"model": served_id(MODEL), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}


def _answer(res: httpx.Response) -> Answer:
    assert res.status_code == 200, res.text
    body = res.json()
    return Answer(body["choices"][0]["text"], body["usage"]["prompt_tokens_details"]["cached_tokens"],
                  body["usage"]["prompt_tokens"])


def complete(server, prompt, max_tokens: int = 6) -> Answer:
    return _answer(httpx.post(f"{server.base_url}/v1/completions", json=_body(prompt, max_tokens), timeout=300))


async def acomplete(http: httpx.AsyncClient, server, prompt, max_tokens: int = 6) -> Answer:
    return _answer(await http.post(f"{server.base_url}/v1/completions", json=_body(prompt, max_tokens)))


def listing(cache_dir: Path) -> tuple[list[str], int]:
    """The files of the SSD tier's segment directory, and their bytes in all."""
    d = cache_dir / "kv"
    if not d.exists():
        return [], 0
    files = sorted(os.listdir(d))
    return files, sum((d / f).stat().st_size for f in files)


def counter(metrics: str, name: str, absent: int) -> int:
    m = re.search(rf"^{name} (\d+)", metrics, re.M)
    return int(m.group(1)) if m else absent


@pytest.fixture(scope="module")
def reference():
    """The answers to the known prompts of a server that caches nothing."""
    cold = start_server(["-m", MODEL, "--cache-mode", "off"])
    try:
        texts = [complete(cold, p).text for p in KNOWN]
    except BaseException:
        cold.kill9()
        raise
    assert cold.stop() == 0
    return texts


@pytest.mark.timeout(300)
def test_a_clean_stop_flushes_the_tier_and_a_restarted_server_restores_the_prefixes_with_the_same_tokens(
        work, args, reference, launch):
    cache = work / "clean"
    server = launch(args, cache_dir=cache)
    for i, p in enumerate(KNOWN):
        assert complete(server, p).text == reference[i]
    written = httpx.get(f"{server.base_url}/metrics", timeout=60).text
    assert re.search(r"^strata_ssd_write_bytes_total [1-9]\d*$", written, re.M), \
        "no SSD bytes written (or not yet: writes are queued)"
    t0 = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - t0 < 10, "SIGTERM took more than 10 s"
    assert re.search(r"SSD tier: queued writes flushed", server.log())
    assert len(listing(cache)[0]) > 0, "nothing on the SSD after a clean stop"

    server = launch(args, cache_dir=cache)
    blocks_read = tokens_restored = 0
    for i, p in enumerate(KNOWN):
        r = complete(server, p)
        assert r.text == reference[i], f"prompt {i} after restart"
        # Before the restart the prompt and 5 of its 6 generated tokens were computed: full blocks,
        # then a tail (the last block, partly filled) starting at `tail`. The full blocks before the
        # last prompt token come back; so does the tail when it starts right after them, and then
        # everything but the last prompt token (always computed) is reused.
        full = (r.prompt_tokens - 1) // 16 * 16
        tail = (r.prompt_tokens + 5) // 16 * 16
        expected = r.prompt_tokens - 1 if tail == full else full
        assert r.cached == expected, f"prompt {i}: cached_tokens after restart"
        blocks_read += full // 16 + (1 if tail == full else 0)
        tokens_restored += expected
    metrics = httpx.get(f"{server.base_url}/metrics", timeout=60).text
    restored = counter(metrics, "strata_prefix_cache_ssd_hits_total", 0)
    assert restored > 0, "strata_prefix_cache_ssd_hits_total is 0"
    # Every restored token came in a block read from the disk.
    assert restored == tokens_restored
    assert counter(metrics, "strata_ssd_reads_total", -1) == blocks_read
    assert counter(metrics, "strata_ssd_read_bytes_total", -1) > 0, "no SSD bytes read"
    assert counter(metrics, "strata_ssd_read_failures_total", -1) == 0
    assert server.stop() == 0


async def _swallow(request) -> Answer | None:
    """A request of the burst: it may fail in any way, the server being killed under it."""
    try:
        return await request
    except Exception:
        return None


@pytest.mark.timeout(560)
def test_kill_9_during_heavy_writes_50_times_never_gives_a_wrong_token_nor_garbage_that_grows(
        work, args, reference, launch, capsys):
    cache = work / "crash"
    hits = torn_starts = read_failures = 0

    async def rounds() -> None:
        nonlocal hits, torn_starts, read_failures
        for cycle in range(50):
            server = launch(args, cache_dir=cache)
            if re.search(r"[1-9]\d* torn tails", server.log()):
                torn_starts += 1
            async with httpx.AsyncClient(timeout=300) as http:
                # Known prompts first (answers checked), then a burst of new long prompts, killed
                # mid-write.
                order = [i for i in range(len(KNOWN)) if rand() % 2 == 0]
                answers = await asyncio.gather(*(acomplete(http, server, KNOWN[i]) for i in order))
                for k, r in enumerate(answers):
                    assert r.text == reference[order[k]], \
                        f"seed {SEED} cycle {cycle}: prompt {order[k]} (cached {r.cached})"
                    hits += r.cached > 0
                burst = [asyncio.ensure_future(_swallow(acomplete(http, server, tokens(300 + rand() % 300), 1)))
                         for _ in range(12)]
                await asyncio.sleep((10 + rand() % 150) / 1000)
                try:
                    metrics = (await http.get(f"{server.base_url}/metrics")).text
                except httpx.HTTPError:
                    metrics = ""
                read_failures += counter(metrics, "strata_ssd_read_failures_total", 0)
                assert server.kill9() == -signal.SIGKILL
                await asyncio.gather(*burst)
            files, size = listing(cache)
            for f in files:
                assert re.match(r"^seg-[0-9a-f]{16}\.kv$", f), f"seed {SEED} cycle {cycle}: stray file {f}"
            # Past the budget by at most what the last run wrote before the next start evicts it.
            assert size <= 2 * SSD_MAX, f"seed {SEED} cycle {cycle}: {size} bytes of segments, budget {SSD_MAX}"

    asyncio.run(rounds())
    with capsys.disabled():
        print(f"{hits} answers with restored prefixes; {torn_starts} starts found a torn segment tail; "
              f"{read_failures} reads failed their checks")
    assert hits > 0, f"seed {SEED}: no known prompt was ever restored from the SSD"
    server = launch(args, cache_dir=cache)
    for i, p in enumerate(KNOWN):
        assert complete(server, p).text == reference[i], f"seed {SEED}: prompt {i} at the end"
    assert server.stop() == 0
    size = listing(cache)[1]
    assert size <= SSD_MAX + (SSD_MAX >> 3), f"segments over budget after a clean start: {size}"
