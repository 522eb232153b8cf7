"""WebSocket token streams at /v1/ws, driven by the `websockets` client.

Several requests interleave on one socket, each ending with a `done` frame and giving the text
that the same request gives over HTTP; a bad request (or a frame that is not JSON) is answered
with an error of its own while the socket stays usable; `cancel` stops a long request and frees
its sequence.
"""

from __future__ import annotations

import json
import time
from typing import Callable

import httpx
import pytest
from websockets.sync.client import connect

from strata_server import metric, model_path, served_id, start_server

pytestmark = pytest.mark.timeout(300)

MODEL = model_path("tiny-llama-spm-f16")


@pytest.fixture(scope="module")
def server():
    s = start_server(["-m", MODEL])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


class Socket:
    """One connection to /v1/ws and every frame received on it, parsed."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.frames: list[dict] = []

    def send(self, message) -> None:
        self.ws.send(message if isinstance(message, str) else json.dumps(message))

    def until(self, pred: Callable[[list[dict]], bool], seconds: float = 30) -> None:
        """Receives frames until PRED holds for them all."""
        deadline = time.monotonic() + seconds
        while not pred(self.frames):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; frames: {json.dumps(self.frames)[:500]}"
            try:
                self.frames.append(json.loads(self.ws.recv(timeout=min(left, 0.1))))
            except TimeoutError:
                pass


@pytest.fixture
def sock(server):
    with connect(f"{server.base_url.replace('http', 'ws', 1)}/v1/ws", open_timeout=60, proxy=None) as ws:
        yield Socket(ws)


def chat(content: str, **extra) -> dict:
    return {"model": served_id(MODEL), "messages": [{"role": "user", "content": content}], "max_tokens": 8, "temperature": 0,
            "ignore_eos": True, **extra}


def test_several_requests_interleave_on_one_socket_and_each_ends_with_done(server, sock):
    sock.send({"type": "request", "id": "a", "endpoint": "chat.completions", "body": chat("first")})
    sock.send({"type": "request", "id": "b", "endpoint": "completions",
               "body": {"model": served_id(MODEL), "prompt": "second", "max_tokens": 6, "temperature": 0, "ignore_eos": True}})
    sock.until(lambda f: len([x for x in f if x["type"] == "done"]) == 2)
    for id_ in ("a", "b"):
        mine = [f for f in sock.frames if f.get("id") == id_]
        assert mine[-1]["type"] == "done"
        chunks = [f["data"] for f in mine if f["type"] == "chunk"]
        assert len(chunks) >= 2
        assert chunks[0]["object"] == ("chat.completion.chunk" if id_ == "a" else "text_completion")
    # The text equals what the same request gives over HTTP.
    http = httpx.post(f"{server.base_url}/v1/chat/completions", content=json.dumps(chat("first")), timeout=300).json()
    ws_text = "".join(
        ((f["data"]["choices"] or [{}])[0].get("delta") or {}).get("content") or ""
        for f in sock.frames if f.get("id") == "a" and f["type"] == "chunk")
    assert ws_text == http["choices"][0]["message"]["content"]


def test_a_bad_request_errors_alone_and_the_socket_stays_usable(sock):
    sock.send("this is not json")
    sock.send({"type": "request", "id": "bad", "endpoint": "chat.completions", "body": chat("x", temperature=-1)})
    sock.send({"type": "request", "id": "good", "endpoint": "chat.completions", "body": chat("y")})
    sock.until(lambda f: any(x.get("id") == "good" and x["type"] == "done" for x in f))
    bad = next((f for f in sock.frames if f.get("id") == "bad"), None)
    assert bad is not None, "no frame answers the bad request"
    assert bad["type"] == "error"
    assert bad["error"]["param"] == "temperature"
    assert any(f["type"] == "error" and "id" in f and f["id"] is None for f in sock.frames), \
        "unparseable frame answered with an error"


def test_cancel_stops_a_long_request_and_frees_its_sequence(server, sock):
    # max_tokens null: the request may run to the end of the context.
    sock.send({"type": "request", "id": "long", "endpoint": "chat.completions", "body": chat("z", max_tokens=None)})
    sock.until(lambda f: len([x for x in f if x["type"] == "chunk"]) >= 3)
    sock.send({"type": "cancel", "id": "long"})
    sock.until(lambda f: any(x.get("id") == "long" and x["type"] in ("done", "error") for x in f))
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(f"{server.base_url}/metrics", timeout=60).text
        if metric(text, "strata_requests_running") == 0:
            break
        assert time.monotonic() < deadline, "still running after cancel"
        time.sleep(0.05)
