"""The OpenAI API as the official `openai` Python SDK sees it, against the real server running one
of the ../shared models (random weights, real tokenizer).

Checks the shape and usage of chat completions, streamed and not; seeded sampling and n; stop
sequences; logprobs; text completions; /tokenize and /detokenize; OpenAI-shaped 400s; a client
that goes away mid-stream; prefix-cache reuse across the turns of a conversation; quantized KV
(kv_bits 8 and 4) whose cached blocks never serve another format; and /admin/api/stats. The tests
run in file order on one server: the last one reads the cache that the earlier ones filled.
"""

from __future__ import annotations

import json
import math
import re
import time

import httpx
import openai
import pytest

from strata_server import TINY_MODEL, metric

pytestmark = pytest.mark.timeout(300)

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours."},
]


def chat(tiny_client, body: dict, **kw):
    """client.chat.completions.create with strata's own parameters (ignore_eos, kv_bits) passed as
    extra body fields, as the SDK sends any parameter it does not know."""
    body = {**body, **kw}
    known = {k: v for k, v in body.items() if k not in ("ignore_eos", "kv_bits")}
    extra = {k: v for k, v in body.items() if k in ("ignore_eos", "kv_bits")}
    return tiny_client.chat.completions.create(**known, extra_body=extra or None)


def complete(tiny_client, body: dict, **kw):
    body = {**body, **kw}
    known = {k: v for k, v in body.items() if k != "ignore_eos"}
    extra = {k: v for k, v in body.items() if k == "ignore_eos"}
    return tiny_client.completions.create(**known, extra_body=extra or None)


def test_a_chat_completion_has_the_openai_shape_and_honest_usage(tiny_client):
    r = chat(tiny_client, {"model": TINY_MODEL, "messages": MESSAGES, "max_tokens": 12, "temperature": 0})
    assert re.match(r"^chatcmpl-", r.id)
    assert r.object == "chat.completion"
    assert isinstance(r.created, int) and not isinstance(r.created, bool)
    assert len(r.choices) == 1
    assert r.choices[0].index == 0
    assert r.choices[0].message.role == "assistant"
    assert isinstance(r.choices[0].message.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 10, "the template wraps the messages"
    assert 1 <= r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 12


def test_a_streamed_chat_gives_the_role_first_the_same_text_as_unstreamed_then_usage(tiny_client):
    body = {"model": TINY_MODEL, "messages": MESSAGES, "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    plain = chat(tiny_client, body)
    chunks = list(chat(tiny_client, body, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    with_choices = [c for c in chunks if len(c.choices) > 0]
    text = "".join(c.choices[0].delta.content or "" for c in with_choices)
    assert text == plain.choices[0].message.content
    assert with_choices[-1].choices[0].finish_reason == "length"
    for c in chunks:
        assert c.object == "chat.completion.chunk"
        assert c.id == chunks[0].id, "one id for the whole stream"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage.completion_tokens == 16
    assert last.usage.prompt_tokens == plain.usage.prompt_tokens


def test_the_same_seed_gives_the_same_sampled_text_and_n_gives_several_choices(tiny_client):
    body = {"model": TINY_MODEL, "messages": MESSAGES, "max_tokens": 12, "temperature": 1.0, "top_p": 0.95, "seed": 1234,
            "ignore_eos": True}
    a = chat(tiny_client, body)
    b = chat(tiny_client, body)
    assert a.choices[0].message.content == b.choices[0].message.content
    many = chat(tiny_client, body, n=3)
    assert [c.index for c in many.choices] == [0, 1, 2]
    assert many.usage.completion_tokens == 36


def test_a_stop_sequence_ends_the_text_before_it_and_is_never_sent(tiny_client):
    body = {"model": TINY_MODEL, "messages": MESSAGES, "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    full = chat(tiny_client, body).choices[0].message.content
    assert len(full) >= 6, f"needs some text to cut: {json.dumps(full)}"
    # A stop string taken from the middle of the greedy text (it may span token boundaries).
    at = len(full) // 2
    stop = full[at:at + 3]
    expected = full[:full.index(stop)]
    r = chat(tiny_client, body, stop=[stop, "never-appears"])
    assert r.choices[0].message.content == expected
    assert r.choices[0].finish_reason == "stop"
    chunks = list(chat(tiny_client, body, stop=stop, stream=True))
    assert "".join((c.choices[0].delta.content or "") if c.choices else "" for c in chunks) == expected


def test_logprobs_report_the_chosen_token_and_its_alternatives(tiny_client):
    r = chat(tiny_client, {"model": TINY_MODEL, "messages": MESSAGES, "max_tokens": 4, "temperature": 0, "logprobs": True,
                      "top_logprobs": 3, "ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.logprob <= 0
        # Greedy: the chosen token is the most likely one.
        assert abs(entry.logprob - entry.top_logprobs[0].logprob) < 1e-5
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob


def test_completions_take_a_text_prompt_streamed_and_not(tiny_client):
    body = {"model": TINY_MODEL, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    r = complete(tiny_client, body)
    assert re.match(r"^cmpl-", r.id)
    assert r.object == "text_completion"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 8
    chunks = list(complete(tiny_client, body, stream=True))
    assert "".join(c.choices[0].text if c.choices else "" for c in chunks) == r.choices[0].text


def test_tokenize_and_detokenize_round_trip(tiny_server):
    text = "Hello world, 123!"
    t = httpx.post(f"{tiny_server.base_url}/tokenize", content=json.dumps({"content": text, "add_special": False}),
                   timeout=60).json()
    assert isinstance(t["tokens"], list) and len(t["tokens"]) > 0
    d = httpx.post(f"{tiny_server.base_url}/detokenize", content=json.dumps({"tokens": t["tokens"]}), timeout=60).json()
    assert d["content"] == text


def test_bad_requests_are_openai_shaped_400s_naming_the_parameter(tiny_server, tiny_client):
    cases = [
        ({"model": TINY_MODEL, "messages": MESSAGES, "temperature": "hot"}, "temperature"),
        ({"model": TINY_MODEL, "messages": MESSAGES, "temperature": 7}, "temperature"),
        ({"model": TINY_MODEL, "messages": MESSAGES, "top_logprobs": 3}, "top_logprobs"),
        ({"model": TINY_MODEL, "messages": [{"role": "wizard", "content": "x"}]}, "messages"),
        ({"model": TINY_MODEL, "messages": openai.omit}, "messages"),
    ]
    for body, param in cases:
        with pytest.raises(openai.APIStatusError) as info:
            tiny_client.chat.completions.create(**body)
        e = info.value
        shown = {k: v for k, v in body.items() if v is not openai.omit}
        assert e.status_code == 400, json.dumps(shown)
        assert json.loads(e.response.request.content) == shown, "the SDK sent the body as given"
        assert e.type == "invalid_request_error"
        assert re.search(param, str(e.param))
    res = httpx.post(f"{tiny_server.base_url}/v1/chat/completions", content='{"model": TINY_MODEL, "messages": [', timeout=60)
    assert res.status_code == 400
    assert res.json()["error"]["type"] == "invalid_request_error"


def running_requests(tiny_server) -> float:
    return metric(httpx.get(f"{tiny_server.base_url}/metrics", timeout=60).text, "strata_requests_running")


def test_a_client_that_goes_away_mid_stream_frees_its_sequence(tiny_server):
    # No max_tokens: the completion may run to the end of the context.
    body = {"model": TINY_MODEL, "messages": MESSAGES, "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=300) as http:
        with http.stream("POST", f"{tiny_server.base_url}/v1/chat/completions", content=json.dumps(body)) as res:
            reads = res.iter_raw()
            next(reads)
            next(reads)
        # Leaving the block closes the connection with the rest of the stream unread.
    deadline = time.monotonic() + 10
    while running_requests(tiny_server) != 0:
        assert time.monotonic() < deadline, "the sequence was never cancelled"
        time.sleep(0.05)
    # The tokens it did generate were timed: a first token, and the ones after it.
    text = httpx.get(f"{tiny_server.base_url}/metrics", timeout=60).text
    assert metric(text, "strata_ttft_seconds_count") >= 1
    assert metric(text, "strata_inter_token_seconds_count") >= 1


def test_the_next_turn_of_a_conversation_reuses_the_cached_prefix_and_gives_the_same_text(tiny_server, tiny_client):
    long = ". ".join(f"rule {i}: answer in the fewest words" for i in range(60))
    convo = [{"role": "system", "content": long}, {"role": "user", "content": "What is a prefix cache?"}]
    body = {"model": TINY_MODEL, "messages": convo, "max_tokens": 8, "temperature": 0, "ignore_eos": True}

    def server_metric(name: str) -> float:
        return metric(httpx.get(f"{tiny_server.base_url}/metrics", timeout=60).text, name)

    hits_before = server_metric("strata_prefix_cache_hits_total")
    first = chat(tiny_client, body)
    # Only the chat template's opening (the same in every conversation, less than a block) is.
    assert first.usage.prompt_tokens_details.cached_tokens < 32, "a new system prompt is not cached"
    again = chat(tiny_client, body)
    cached = again.usage.prompt_tokens_details.cached_tokens
    # The first request computed its prompt and 7 of its 8 tokens: every prompt token is reused
    # but the last (always computed), whether it lies in the last, partly filled block that the
    # first request left or in a full block that its generation filled.
    p = first.usage.prompt_tokens
    assert cached == p - 1, f"reused {cached} of {p} prompt tokens"
    assert again.choices[0].message.content == first.choices[0].message.content

    # The next turn: the whole previous exchange is a cached prefix.
    nxt = chat(tiny_client, body, messages=[*convo, {"role": "assistant", "content": first.choices[0].message.content},
                                       {"role": "user", "content": "Shorter."}])
    assert nxt.usage.prompt_tokens_details.cached_tokens >= cached
    assert server_metric("strata_prefix_cache_hits_total") >= hits_before + cached
    assert server_metric("strata_kv_blocks_cached") > 0


def test_kv_bits_8_and_4_run_with_quantized_kv_whose_cached_blocks_never_serve_another_format(tiny_client):
    long = "; ".join(f"clause {i} of a long shared preamble" for i in range(40))
    convo = [{"role": "system", "content": long}, {"role": "user", "content": "Summarize."}]
    body = {"model": TINY_MODEL, "messages": convo, "max_tokens": 6, "temperature": 0, "ignore_eos": True}
    f16 = chat(tiny_client, body, kv_bits=16)
    for bits in (8, 4):
        first = chat(tiny_client, body, kv_bits=bits)
        assert first.usage.completion_tokens == 6
        assert first.usage.prompt_tokens_details.cached_tokens == 0, f"kv_bits {bits} reused f16 blocks"
        again = chat(tiny_client, body, kv_bits=bits)
        assert again.usage.prompt_tokens_details.cached_tokens > 0, f"kv_bits {bits} blocks are cached"
        assert again.choices[0].message.content == first.choices[0].message.content
    assert f16.usage.prompt_tokens_details.cached_tokens < 32, "only the chat template's opening is cached"


def test_admin_stats_report_the_ram_tier_per_kv_format_hits_and_evictions(tiny_server):
    res = httpx.get(f"{tiny_server.base_url}/admin/api/stats", timeout=60)
    assert res.status_code == 200
    s = res.json()
    assert s["cache_mode"] == "hot"
    assert s["block_tokens"] == 32
    assert s["tiers"]["ssd"] is None
    ram = s["tiers"]["ram"]

    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for f in ("f16", "q8_0", "q4_0"):
        for k in ("in_use", "cached", "free", "bytes_per_block"):
            assert number(ram["blocks"][f][k]), f"{f}.{k}"
        assert s["kv_bytes_per_token"][f] > 0
    # Earlier tests cached f16, q8_0 and q4_0 blocks.
    assert ram["blocks"]["f16"]["cached"] > 0 and ram["blocks"]["q8_0"]["cached"] > 0\
        and ram["blocks"]["q4_0"]["cached"] > 0
    assert s["kv_bytes_per_token"]["q4_0"] < s["kv_bytes_per_token"]["q8_0"] < s["kv_bytes_per_token"]["f16"]
    assert 0 < ram["bytes_cached"] <= ram["cached_budget_bytes"]
    assert s["prefix_cache"]["hit_tokens"] > 0 and 0 < s["prefix_cache"]["hit_rate"] < 1
    assert s["snapshot_bytes"] == 0
