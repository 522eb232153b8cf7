"""API keys on every route, honest access-log lines and checked tool fields, against the real server.

A server started with `--api-key k1` refuses every route but /health without the key or with a
wrong one (an OpenAI-shaped 401) and serves it with the right one; /metrics answers without a key
only when the config file sets `server.metrics_public`. The access-log line of a chat request,
streamed or not (and of a WebSocket, when it closes), carries the token counts its usage reported.
A tool with a bad name is a 400 whose `param` names it, as the openai client sees it.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import openai
import pytest
from websockets.sync.client import connect

from strata_server import DEMO_MODEL, access_line, start_server

pytestmark = pytest.mark.timeout(300)

KEY = "k1"

# Every route but /health, with a request it answers when the key is right.
ROUTES = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", {"model": DEMO_MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    ("POST", "/v1/completions", {"model": DEMO_MODEL, "prompt": "hi", "max_tokens": 2}),
    ("POST", "/tokenize", {"content": "hello"}),
    ("POST", "/detokenize", {"tokens": [72, 105]}),
    ("GET", "/metrics", None),
    ("GET", "/admin/api/stats", None),
]

# Long enough to fill several KV blocks, so that asking it again reuses some from the cache.
PROMPT = "Tell me about the weather in the mountains in spring, and what to pack for a long walk there. " * 3


@pytest.fixture(scope="module")
def server():
    s = start_server(["--demo", "--api-key", KEY])
    try:
        yield s
    finally:
        assert s.stop() == 0, "SIGTERM exits 0"


def call(server, method: str, path: str, body, headers: dict) -> httpx.Response:
    return httpx.request(method, f"{server.base_url}{path}", json=body, headers=headers, timeout=120)


def assert_refused(res: httpx.Response, what: str) -> None:
    assert res.status_code == 401, f"{what}: {res.status_code} {res.text[:200]}"
    err = res.json()["error"]
    assert err["code"] == "invalid_api_key", what
    assert err["type"] == "invalid_request_error", what
    assert isinstance(err["message"], str) and "param" in err, what
    assert res.headers.get("www-authenticate") == "Bearer", what


def test_every_route_but_health_refuses_a_missing_or_wrong_key_and_serves_the_right_one(server):
    for method, path, body in ROUTES:
        assert_refused(call(server, method, path, body, {}), f"{method} {path} without a key")
        assert_refused(call(server, method, path, body, {"Authorization": "Bearer k2"}), f"{method} {path} with k2")
        assert_refused(call(server, method, path, body, {"Authorization": KEY}), f"{method} {path} without Bearer")
        ok = call(server, method, path, body, {"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200, f"{method} {path} with the key: {ok.status_code} {ok.text[:200]}"
    for headers in [{}, {"Authorization": "Bearer k2"}]:
        assert call(server, "GET", "/health", None, headers).status_code == 200


def test_the_websocket_needs_the_key_too(server):
    url = f"{server.base_url.replace('http', 'ws', 1)}/v1/ws"
    for headers in [{}, {"Authorization": "Bearer k2"}]:
        with pytest.raises(Exception) as refused:
            with connect(url, open_timeout=60, proxy=None, additional_headers=headers):
                pass
        assert "401" in str(refused.value), str(refused.value)
    with connect(url, open_timeout=60, proxy=None, additional_headers={"Authorization": f"Bearer {KEY}"}):
        pass


def test_metrics_answer_without_a_key_only_when_the_config_makes_them_public(launch, tmp_path: Path):
    conf = tmp_path / "public-metrics.toml"
    conf.write_text(f'[server]\napi_keys = ["{KEY}"]\nmetrics_public = true\n')
    s = launch(["--demo", "--config", str(conf)])
    res = httpx.get(f"{s.base_url}/metrics", timeout=60)
    assert res.status_code == 200
    assert "strata_responses_total" in res.text
    # Only /metrics: the rest still needs the key.
    assert_refused(httpx.get(f"{s.base_url}/v1/models", timeout=60), "/v1/models with public metrics")
    assert_refused(httpx.post(f"{s.base_url}/tokenize", json={"content": "x"}, timeout=60), "/tokenize with public metrics")
    assert s.stop() == 0




def expected_counts(usage) -> str:
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    return f"tokens={usage.prompt_tokens}+{usage.completion_tokens} cached={cached} "


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=KEY, max_retries=0, timeout=300) as c:
        yield c


def test_the_access_log_shows_the_usage_of_a_non_streamed_request(server, client):
    seen_cached = 0
    for _ in range(2):  # the second time, part of the prompt comes from the prefix cache
        raw = client.chat.completions.with_raw_response.create(
            model=DEMO_MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=12, temperature=0)
        usage = raw.parse().usage
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
        line = access_line(server, raw.headers["x-request-id"])
        assert "POST /v1/chat/completions 200 " in line
        assert expected_counts(usage) in line, line
        seen_cached = usage.prompt_tokens_details.cached_tokens
    assert seen_cached > 0, "the repeated prompt was served partly from the cache"


def test_the_access_log_shows_the_usage_of_a_streamed_request(server, client):
    raw = client.chat.completions.with_raw_response.create(
        model=DEMO_MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True})
    usage = None
    for chunk in raw.parse():
        if chunk.usage is not None:
            usage = chunk.usage
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    line = access_line(server, raw.headers["x-request-id"])
    assert "POST /v1/chat/completions 200 " in line
    assert expected_counts(usage) in line, line


def test_the_access_log_of_a_websocket_sums_its_requests_when_it_closes(server):
    url = f"{server.base_url.replace('http', 'ws', 1)}/v1/ws"
    usages = []
    with connect(url, open_timeout=60, proxy=None, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        request_id = ws.response.headers["x-request-id"]
        for i in range(2):
            body = {"model": DEMO_MODEL, "messages": [{"role": "user", "content": f"{i} {PROMPT}"}], "max_tokens": 5,
                    "temperature": 0, "stream_options": {"include_usage": True}}
            ws.send(json.dumps({"type": "request", "id": str(i), "endpoint": "chat.completions", "body": body}))
            while True:
                frame = json.loads(ws.recv(timeout=120))
                assert frame["type"] in ("chunk", "done"), frame
                if frame["type"] == "chunk" and frame["data"].get("usage"):
                    usages.append(frame["data"]["usage"])
                if frame["type"] == "done":
                    break
    assert len(usages) == 2
    prompt = sum(u["prompt_tokens"] for u in usages)
    generated = sum(u["completion_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    line = access_line(server, request_id)
    assert "GET /v1/ws 101 " in line
    assert f"tokens={prompt}+{generated} cached={cached} " in line, line


def test_a_tool_with_a_bad_name_is_a_400_naming_the_field(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "get weather!", "parameters": {"type": "object"}}}]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=DEMO_MODEL, messages=[{"role": "user", "content": "hi"}], tools=tools,
                                       max_tokens=2)
    err = refused.value.body
    assert refused.value.status_code == 400
    assert err["param"] == "tools[1].function.name", err
    assert err["type"] == "invalid_request_error"
    # A named tool_choice must name one of the tools.
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=DEMO_MODEL, messages=[{"role": "user", "content": "hi"}], tools=tools[:1],
                                       tool_choice={"type": "function", "function": {"name": "elsewhere"}},
                                       max_tokens=2)
    assert refused.value.body["param"] == "tool_choice.function.name"
    # Valid tools are accepted (and, as yet, not called).
    r = client.chat.completions.create(model=DEMO_MODEL, messages=[{"role": "user", "content": "hi"}], tools=tools[:1],
                                       tool_choice="auto", parallel_tool_calls=False, max_tokens=2)
    assert r.choices[0].message.content is not None
