"""The recurrent hybrid models (qwen35: Gated DeltaNet layers; granitehybrid: Mamba-2 layers) served
by `strata serve`: each running
sequence keeps its own recurrent state, carried from chunk to chunk of its prompt, so concurrent
requests at temperature 0 give the same tokens as one at a time and as `strata logits` (greedy)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from strata_server import STRATA_BIN

SYNTH = ["--layers", "4", "--hidden", "64", "--heads", "2", "--kv-heads", "1", "--head-dim", "32",
         "--ffn", "128", "--vocab", "builtin", "--ctx", "1024", "--quiet"]
# Each hybrid's own flags: granitehybrid's Mamba-2 layers with 16 state values per channel.
ARCHS = {"qwen35": [], "granitehybrid": ["--ssm-state", "16"]}
GREEDY = 12
# Prompts of different lengths; the longer ones take several prefill chunks of the budget below.
PROMPTS = [
    "Hello there, how are you?",
    "The quick brown fox jumps over the lazy dog. " * 6,
    "One two three four five six seven eight nine ten. " * 9,
    "A recurrent layer keeps one state per sequence, " * 4,
    "Short.",
    "Numbers: " + " ".join(str(i) for i in range(60)),
]


def synth_hybrid(tmp_path: Path, arch: str = "qwen35") -> Path:
    out = tmp_path / f"{arch}.gguf"
    subprocess.run([STRATA_BIN, "synth", "--arch", arch, *ARCHS[arch], *SYNTH, "--out", str(out)], check=True, timeout=120)
    return out


def greedy_cases(tmp_path: Path, model: Path) -> list[dict]:
    """`strata logits` over PROMPTS: each case's prompt tokens and its greedy continuation."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    out = tmp_path / "out.json"
    subprocess.run([STRATA_BIN, "logits", "--model", str(model), "--prompts", str(prompts), "--top", "1", "--greedy",
                    str(GREEDY), "--threads", "2", "--out", str(out)], check=True, timeout=300)
    return json.loads(out.read_text(encoding="utf-8"))["cases"]


def serve_config(tmp_path: Path) -> Path:
    """A small token budget and block size, so long prompts are prefilled in several chunks that
    cross block boundaries, beside other sequences' decode rows."""
    conf = tmp_path / "strata.toml"
    conf.write_text("[scheduler]\ntoken_budget = 48\nmax_running = 4\n[kv]\nblock_tokens = 16\n", encoding="utf-8")
    return conf


def complete(base_url: str, tokens: list[int]) -> list[str]:
    """The greedy continuation's tokens, as the logprobs name them (`bytes:\\x..` for a token
    that is no valid UTF-8 on its own)."""
    r = httpx.post(f"{base_url}/v1/completions", timeout=300,
                   json={"prompt": tokens, "max_tokens": GREEDY, "temperature": 0, "ignore_eos": True,
                         "logprobs": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["usage"]["completion_tokens"] == GREEDY
    return body["choices"][0]["logprobs"]["tokens"]


def same_tokens(served: list[str], ids: list[int], base_url: str) -> bool:
    """Whether the served tokens are those ids: each id's text, or a byte token where the id alone
    decodes to no valid UTF-8."""
    if len(served) != len(ids):
        return False
    for text, i in zip(served, ids):
        alone = httpx.post(f"{base_url}/detokenize", json={"tokens": [i]}, timeout=30).json()["content"]
        if text != alone and not (text.startswith("bytes:") and "\ufffd" in alone):
            return False
    return True


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_runs_a_recurrent_hybrid(tmp_path: Path, arch: str):
    model = synth_hybrid(tmp_path, arch)
    case = greedy_cases(tmp_path, model)[0]
    assert len(case["positions"]) == len(case["tokens"]) > 5
    assert len(case["greedy"]) == GREEDY


@pytest.mark.parametrize("arch", ARCHS)
def test_concurrent_requests_give_the_tokens_of_one_at_a_time_and_of_strata_logits(tmp_path: Path, launch, arch: str):
    model = synth_hybrid(tmp_path, arch)
    cases = greedy_cases(tmp_path, model)
    assert max(len(c["tokens"]) for c in cases) > 3 * 48  # some prompts take several chunks
    server = launch(["--model", str(model), "--config", str(serve_config(tmp_path))])
    one_at_a_time = [complete(server.base_url, c["tokens"]) for c in cases]
    for served, c in zip(one_at_a_time, cases):
        assert same_tokens(served, c["greedy"], server.base_url), (served, c["greedy"])
    # More requests than running slots, so sequences wait, start and end while others run.
    with ThreadPoolExecutor(max_workers=len(cases) * 2) as pool:
        concurrent = list(pool.map(lambda c: complete(server.base_url, c["tokens"]), cases * 2))
    assert concurrent == one_at_a_time * 2
    assert server.stop() == 0
