"""Cancellation and limits as a client meets them on the real server: a client that leaves before
its answer (running or still waiting in the queue, streamed or not) stops its request at once and
frees its KV blocks, and a max_tokens the context cannot hold is a 400 naming max_tokens.

The server runs with max_running = 1, so that a second request waits in the queue. Every wait
below polls /metrics against a deadline; nothing sleeps for a fixed time to assert.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
import openai
import pytest

from strata_server import TINY_MODEL, configured_server, metric, model_path

pytestmark = pytest.mark.timeout(300)

# Long enough that no request below can finish on its own before its client leaves (the model's
# context is 4096 tokens).
LONG = 4000
# How long a cancelled request may take to leave (a release build needs milliseconds; sanitizer
# builds are several times slower).
DEADLINE_S = 10.0


@pytest.fixture(scope="module")
def server():
    with configured_server("[scheduler]\nmax_running = 1\n", ["-m", model_path(TINY_MODEL)]) as s:
        yield s


def metrics(server) -> dict[str, float]:
    text = httpx.get(f"{server.base_url}/metrics", timeout=60).text
    names = ("strata_requests_running", "strata_requests_waiting", "strata_kv_blocks_used",
             "strata_generated_tokens_total")
    return {n.removeprefix("strata_"): metric(text, n) for n in names}


def wait_for(server, what: str, cond) -> dict[str, float]:
    """Polls /metrics until COND holds of them; fails naming WHAT after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        m = metrics(server)
        if cond(m):
            return m
        assert time.monotonic() < deadline, f"{what}: still {m} after {DEADLINE_S} s"
        time.sleep(0.02)


def body(*, stream: bool, max_tokens: int = LONG) -> dict:
    return {"model": TINY_MODEL, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": stream}


def send_raw(server, payload: dict) -> socket.socket:
    """Sends one chat completion request on a socket of its own and returns the socket, unread."""
    data = json.dumps(payload).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return sock


def idle(server) -> dict[str, float]:
    return wait_for(server, "the server is idle", lambda m: m["requests_running"] == 0 and m["requests_waiting"] == 0)


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
def test_a_running_request_whose_client_leaves_stops_generating_and_frees_its_blocks(server, stream):
    before = idle(server)["generated_tokens_total"]
    sock = send_raw(server, body(stream=stream))
    try:
        # It runs and generates for a while (about half a second) before the client leaves.
        start = time.monotonic()
        wait_for(server, "the request generates", lambda m: m["generated_tokens_total"] >= before + 20)
        while time.monotonic() - start < 0.5:
            time.sleep(0.02)
        assert metrics(server)["requests_running"] == 1
    finally:
        sock.close()
    m = wait_for(server, "the request stops and frees its blocks",
                 lambda m: m["requests_running"] == 0 and m["kv_blocks_used"] == 0)
    generated = m["generated_tokens_total"] - before
    assert 20 <= generated < LONG, f"{generated} tokens generated: it did not stop when its client left"
    # Nothing more comes of it.
    assert metrics(server)["generated_tokens_total"] - before == generated


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
def test_a_waiting_request_whose_client_leaves_leaves_the_queue_and_the_running_one_finishes(server, stream):
    # The first request should outlast the second's wait and leaving by seconds, and still end
    # in reasonable time: about four seconds of this server's generation (speeds differ a
    # hundredfold between a loaded sanitizer build and an idle release one).
    t = time.monotonic()
    httpx.post(f"{server.base_url}/v1/chat/completions", content=json.dumps(body(stream=False, max_tokens=32)),
               timeout=300).raise_for_status()
    first_tokens = max(64, min(LONG, int(4 * 32 / (time.monotonic() - t))))
    before = idle(server)["generated_tokens_total"]
    with httpx.Client(timeout=300) as http:
        req = http.build_request("POST", f"{server.base_url}/v1/chat/completions",
                                 content=json.dumps(body(stream=True, max_tokens=first_tokens)))
        first = http.send(req, stream=True)
        try:
            assert first.status_code == 200
            reads = first.iter_lines()
            wait_for(server, "the first request runs", lambda m: m["requests_running"] == 1)
            second = send_raw(server, body(stream=stream))
            try:
                wait_for(server, "the second request waits", lambda m: m["requests_waiting"] == 1)
            finally:
                second.close()
            m = wait_for(server, "the second request leaves the queue", lambda m: m["requests_waiting"] == 0)
            # Left the queue while the first was still generating (rather than run after it).
            assert m["generated_tokens_total"] - before < first_tokens, "the second waited for the first to end"
            assert m["requests_running"] == 1, "the first request was disturbed"
            # The first runs to its end, untouched.
            lines = [line for line in reads if line.startswith("data: ")]
        finally:
            first.close()
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content") is not None) >= 1
    m = idle(server)
    assert m["kv_blocks_used"] == 0
    # The first's tokens and nothing of the second's.
    assert m["generated_tokens_total"] - before == first_tokens


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="none", max_retries=0)


@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_a_max_tokens_past_the_context_is_a_400_that_names_it(client, key):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=TINY_MODEL, messages=[{"role": "user", "content": "Hi"}], **{key: 5000})
    e = err.value
    assert e.status_code == 400
    assert e.param == key
    assert e.code == "context_length_exceeded"
    assert e.type == "invalid_request_error"
    message = e.body["message"]
    assert "4096 tokens" in message and "5000 in the completion" in message, message


def test_the_legacy_endpoint_refuses_a_max_tokens_past_the_context_and_serves_one_that_fits(client):
    prompt = "Say something."
    # The whole context for the completion leaves none for the prompt: the legacy endpoint says so too.
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=TINY_MODEL, prompt=prompt, max_tokens=4096)
    assert err.value.param == "max_tokens"
    assert "in the prompt" in err.value.body["message"]
    ok = client.completions.create(model=TINY_MODEL, prompt=prompt, max_tokens=8, extra_body={"ignore_eos": True})
    assert ok.usage.completion_tokens == 8
    assert ok.choices[0].finish_reason == "length"
