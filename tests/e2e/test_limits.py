"""Limits as a client meets them on the real server: a full waiting queue is a 429 with
Retry-After, an oversized body a 413, both OpenAI-shaped, and neither disturbs the requests that
were admitted.

The server runs with max_running = 1, max_queued = 2 and max_body = 4 KiB.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from strata_server import configured_server, metric, model_path

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server():
    with configured_server('[scheduler]\nmax_running = 1\nmax_queued = 2\n\n[limits]\nmax_body = "4KiB"\n', ["-m", model_path("tiny-llama-spm-f16")]) as s:
        yield s


@pytest.fixture
def http():
    with httpx.Client(timeout=300) as c:
        yield c


def post(http: httpx.Client, server, body: dict, *, stream: bool = False) -> httpx.Response:
    """POSTs BODY to /v1/chat/completions; with stream, returns once the headers are in."""
    req = http.build_request("POST", f"{server.base_url}/v1/chat/completions", content=json.dumps(body))
    return http.send(req, stream=stream)


def test_a_full_queue_answers_429_with_retry_after_and_the_admitted_streams_are_unharmed(server, http):
    long = {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 400, "ignore_eos": True,
            "stream": True}
    # One runs, two wait: the queue is full.
    admitted: list[httpx.Response] = []
    try:
        for _ in range(3):
            res = post(http, server, long, stream=True)
            admitted.append(res)
            assert res.status_code == 200
        refused = post(http, server, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        assert refused.status_code == 429
        assert refused.headers.get("retry-after") == "1"
        err = refused.json()["error"]
        assert err["type"] == "rate_limit_error"
        assert err["code"] == "queue_full"
        assert isinstance(err["message"], str)

        # The running stream keeps producing tokens after the refusal.
        reads = admitted[0].iter_text()
        text = ""
        while len(re.findall(r'"content":', text)) < 3:
            chunk = next(reads, None)
            assert chunk is not None, "the running stream ended early"
            text += chunk
    finally:
        for res in admitted:
            res.close()
    metrics = http.get(f"{server.base_url}/metrics").text
    assert metric(metrics, "strata_requests_rejected_total") >= 1


def test_a_body_over_max_body_is_a_413_in_the_openai_shape(server, http):
    big = {"messages": [{"role": "user", "content": "x" * 8192}], "max_tokens": 1}
    res = post(http, server, big)
    assert res.status_code == 413
    err = res.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert re.search(r"limit", err["message"])
    # The server still serves (a fresh connection).
    ok = httpx.get(f"{server.base_url}/health", timeout=60)
    assert ok.status_code == 200


def test_a_burst_of_streams_past_the_queue_gets_429_status_lines_never_a_200_with_an_error_inside(server):
    # Forty-eight streams at once against one running and two waiting places: the scheduler alone
    # decides who is admitted, and the HTTP status says so before any byte of a stream is sent.
    import concurrent.futures

    body = {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 300, "ignore_eos": True,
            "stream": True}

    def one(_: int) -> tuple[int, str]:
        with httpx.Client(timeout=300) as c:
            with c.stream("POST", f"{server.base_url}/v1/chat/completions", content=json.dumps(body)) as res:
                return res.status_code, res.read().decode()

    with concurrent.futures.ThreadPoolExecutor(48) as pool:
        results = list(pool.map(one, range(48)))
    statuses = [s for s, _ in results]
    print("statuses:", statuses)
    assert statuses.count(429) >= 1
    for status, text in results:
        assert status in (200, 429), status
        if status == 200:
            assert "queue_full" not in text, "a 200 stream carried a queue_full error"
            assert text.rstrip().endswith("data: [DONE]")
        else:
            assert json.loads(text)["error"]["code"] == "queue_full"
