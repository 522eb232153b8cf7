"""Cache salts through the real server: tenants cannot see each other's prompts in the prefix cache.

A prompt asked again under the same `cache_salt` is reused in full; under another salt, or none,
nothing of it is (its answer would come back faster, telling that someone asked it before). An
API key's salt is mixed with the request's, so a request cannot reach another key's cache by
naming a salt; the key's name appears in the access log. All of it in `cache.mode` hot and tiered,
and on the SSD across a restart.

Each test asks prompts that begin with a fresh random tag (the seed is printed; STRATA_E2E_SEED
reruns one), so that nothing asked before shares their first block.
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

import httpx
import openai
import pytest

from strata_server import access_line, model_path, served_id

pytestmark = pytest.mark.timeout(300)

MODEL = model_path("tiny-qwen2-gpt2-f16")
SEED = int(os.environ.get("STRATA_E2E_SEED") or ((int(time.time() * 1000) ^ os.getpid()) & 0xFFFFFFFF))
_rng = random.Random(SEED)

KEYS_TOML = """[server]
api_keys = [
  { key = "key-a", name = "team-a", salt = "salt-of-a" },
  { key = "key-b", name = "team-b", salt = "salt-of-b" },
  "key-plain",
]
"""


@pytest.fixture(scope="module", autouse=True)
def show_seed():
    print(f"\nseed {SEED}")


def fresh_prompt() -> str:
    """Several KV blocks of text that no earlier request shares, not even its first block."""
    tag = "".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(12))
    return f"[{tag}] " + "The river runs past the old mill, where the miller counts his sacks of grain. " * 6


@pytest.fixture(params=["hot", "tiered"])
def mode(request) -> str:
    return request.param


def cached(base_url: str, prompt: str, *, key: str = "none", salt: str | None = None, chat: bool = False):
    """Asks `prompt` for one token and returns (prompt_tokens, cached_tokens, x-request-id)."""
    extra = {"cache_salt": salt} if salt is not None else None
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0, timeout=120) as client:
        if chat:
            raw = client.chat.completions.with_raw_response.create(
                model=served_id(MODEL), messages=[{"role": "user", "content": prompt}], max_tokens=1, temperature=0, extra_body=extra)
        else:
            raw = client.completions.with_raw_response.create(
                model=served_id(MODEL), prompt=prompt, max_tokens=1, temperature=0, extra_body=extra)
    usage = raw.parse().usage
    details = usage.prompt_tokens_details
    return usage.prompt_tokens, (details.cached_tokens if details else 0) or 0, raw.headers["x-request-id"]


BLOCK_TOKENS = 32  # kv.block_tokens


def assert_full_reuse(got, what: str) -> None:
    prompt_tokens, cached_tokens, _ = got
    # An earlier ask of one token computed exactly the prompt: its full blocks and a tail. All of it
    # comes back but the last prompt token (always computed: its logits give the first sample);
    # when the prompt ends on a block boundary, that last block is full, not a tail, and is computed.
    expected = prompt_tokens - 1 if prompt_tokens % BLOCK_TOKENS else prompt_tokens - BLOCK_TOKENS
    assert cached_tokens == expected, f"{what}: {cached_tokens} of {prompt_tokens} prompt tokens reused"


def assert_no_reuse(got, what: str) -> None:
    assert got[1] == 0, f"{what}: {got[1]} of {got[0]} prompt tokens came from another salt's cache"


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_prompt_is_reused_under_its_own_salt_only(launch, mode, chat):
    s = launch(["-m", MODEL, "--cache-mode", mode])
    p = fresh_prompt()
    url = s.base_url
    assert_no_reuse(cached(url, p, salt="s1", chat=chat), "first ask")
    assert_full_reuse(cached(url, p, salt="s1", chat=chat), "again with the same salt")
    assert_no_reuse(cached(url, p, salt="s2", chat=chat), "another salt")
    assert_no_reuse(cached(url, p, chat=chat), "no salt after two salted asks")
    assert_full_reuse(cached(url, p, chat=chat), "no salt again: unsalted requests share as before")
    assert_full_reuse(cached(url, p, salt="s2", chat=chat), "the second salt again")
    assert s.stop() == 0


def test_the_salt_is_refused_unless_it_is_a_non_empty_string(launch):
    s = launch(["-m", MODEL])
    for bad in [7, "", ["a"], {"a": 1}, True]:
        res = httpx.post(f"{s.base_url}/v1/completions", json={"model": served_id(MODEL), "prompt": "hi", "max_tokens": 1, "cache_salt": bad},
                         timeout=60)
        assert res.status_code == 400, f"{bad!r}: {res.status_code} {res.text}"
        assert res.json()["error"]["param"] == "cache_salt", res.text
    assert s.stop() == 0




def test_keys_with_different_salts_share_nothing_and_a_request_cannot_leave_its_keys_salt(launch, mode, tmp_path: Path):
    conf = tmp_path / "keys.toml"
    conf.write_text(KEYS_TOML)
    s = launch(["-m", MODEL, "--cache-mode", mode, "--config", str(conf)])
    url = s.base_url
    p = fresh_prompt()
    first = cached(url, p, key="key-a")
    assert_no_reuse(first, "key a, first ask")
    assert_full_reuse(cached(url, p, key="key-a"), "key a again")
    assert_no_reuse(cached(url, p, key="key-b"), "key b")
    assert_full_reuse(cached(url, p, key="key-b"), "key b again")
    assert_no_reuse(cached(url, p, key="key-plain"), "a key without a salt")
    # Naming a salt, even another key's, never reaches that key's cache.
    assert_no_reuse(cached(url, p, key="key-plain", salt="salt-of-a"), "a's salt sent by a key without one")
    assert_no_reuse(cached(url, p, key="key-b", salt="salt-of-a"), "a's salt sent with key b")
    assert_no_reuse(cached(url, p, key="key-a", salt="x"), "key a with a salt of its own")
    assert_full_reuse(cached(url, p, key="key-a", salt="x"), "key a with that salt again")
    # The access log names the key when it has a name, and only then.
    assert access_line(s, first[2]).endswith(" key=team-a")
    plain = cached(url, "hello", key="key-plain")
    assert " key=" not in access_line(s, plain[2])
    assert s.stop() == 0


def test_salted_blocks_on_the_ssd_match_only_their_salt_after_a_restart(launch, tmp_path: Path):
    cache = tmp_path / "cache"
    args = ["-m", MODEL, "--cache-mode", "tiered"]
    p = fresh_prompt()
    s = launch(args, cache_dir=cache)
    assert_no_reuse(cached(s.base_url, p, salt="s1"), "first ask")
    assert s.stop() == 0
    # A fresh process: RAM is empty, the blocks come from the disk or not at all.
    s = launch(args, cache_dir=cache)
    assert_no_reuse(cached(s.base_url, p, salt="s2"), "another salt, from the SSD")
    assert_no_reuse(cached(s.base_url, p), "no salt, from the SSD")
    assert_full_reuse(cached(s.base_url, p, salt="s1"), "the same salt, from the SSD")
    metrics = httpx.get(f"{s.base_url}/metrics", timeout=60).text
    m = re.search(r"^strata_prefix_cache_ssd_hits_total (\d+)", metrics, re.M)
    assert m and int(m.group(1)) > 0, "the salted prompt was not restored from the SSD"
    assert s.stop() == 0
