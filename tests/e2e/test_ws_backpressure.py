"""WebSocket backpressure: a client that sends requests on /v1/ws and then reads nothing.

The socket's outbox is bounded: once it is full, the server pauses that socket's streams (the
scheduler stops decoding them) and stops reading the client's further messages; if the client still
reads nothing for limits.ws_stall_timeout, the server closes the socket, and the streams are
cancelled. The server's resident memory stays bounded meanwhile, and other clients are served.

The client here is a raw socket with a small receive buffer that completes the handshake, sends
its requests as masked text frames and never calls recv() again.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import struct
import time

import httpx
import pytest

from strata_server import configured_server, metric, model_path

pytestmark = pytest.mark.timeout(300)

STALL_S = 2


@pytest.fixture(scope="module")
def server():
    # Under AddressSanitizer freed memory is held back (a quarantine of 256 MiB by default), which
    # would count as growth here: the server under test keeps a small one.
    asan = os.environ.get("ASAN_OPTIONS")
    if asan is not None:
        os.environ["ASAN_OPTIONS"] = asan + ":quarantine_size_mb=1"
    try:
        with configured_server(f'[model]\nctx = 4096\n\n[scheduler]\nmax_running = 16\n\n[limits]\nws_stall_timeout = "{STALL_S}s"\n', ["-m", model_path("tiny-llama-spm-f16")]) as s:
            yield s
    finally:
        if asan is not None:
            os.environ["ASAN_OPTIONS"] = asan


def frame(text: str) -> bytes:
    """One masked text frame, as a client sends it."""
    payload = text.encode()
    head = bytes([0x81])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def open_silent_socket(port: int, rcvbuf: int | None = 4096) -> socket.socket:
    """Connects and upgrades; reads the 101 and nothing after it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)  # byte by byte: not one byte of the frames after it
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def running(server) -> float:
    return metric(httpx.get(f"{server.base_url}/metrics", timeout=30).text, "strata_requests_running")


def test_a_client_that_never_reads_is_paused_then_closed_and_memory_stays_bounded(server):
    base = server.rss_bytes()
    sock = open_silent_socket(server.port)
    # Each token's chunk carries 20 alternatives with their log-probabilities (about 2 KB): 16
    # requests of 1,500 tokens would queue some 50 MB for a client that reads nothing.
    body = {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 1500, "ignore_eos": True,
            "logprobs": True, "top_logprobs": 20}
    for i in range(16):
        sock.sendall(frame(json.dumps({"type": "request", "id": f"r{i}", "endpoint": "chat.completions", "body": body})))
    t0 = time.monotonic()
    peak = base
    closed_at = None
    while time.monotonic() - t0 < 60:
        peak = max(peak, server.rss_bytes())
        if closed_at is None and re.search(r"GET /v1/ws 101", server.log()):
            closed_at = time.monotonic() - t0  # the access-log line is written when the socket closes
        if closed_at is not None and running(server) == 0:
            break
        time.sleep(0.2)
    growth = (peak - base) / 2**20
    print(f"RSS {base / 2**20:.1f} MiB at start, peak {peak / 2**20:.1f} MiB (+{growth:.1f} MiB); "
          f"socket closed after {closed_at} s")
    assert closed_at is not None, "the server never closed the socket of a client that reads nothing"
    assert "closing (1013)" in server.log()
    assert running(server) == 0, "the closed socket's streams are cancelled"
    assert growth < 32, f"resident memory grew by {growth:.1f} MiB for a client that reads nothing"
    sock.close()
    # Others are served as before.
    res = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=60,
                     json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    assert res.status_code == 200


def read_frames_until_close(sock: socket.socket, seconds: float) -> tuple[int, int, str]:
    """Reads server frames (unmasked) until a close frame: (frames before it, code, reason)."""
    sock.settimeout(seconds)
    buf = b""

    def need(n: int) -> bytes:
        nonlocal buf
        while len(buf) < n:
            chunk = sock.recv(1 << 16)
            assert chunk, "the connection ended without a close frame"
            buf += chunk
        out, buf = buf[:n], buf[n:]
        return out

    frames = 0
    while True:
        b0, b1 = need(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", need(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", need(8))[0]
        payload = need(n)
        if b0 & 0x0F == 0x8:
            return frames, struct.unpack("!H", payload[:2])[0], payload[2:].decode()
        frames += 1


def test_a_stalled_reader_that_comes_back_gets_the_close_reason_1013(server):
    body = {"messages": [{"role": "user", "content": "Go on."}], "max_tokens": 1500, "ignore_eos": True,
            "logprobs": True, "top_logprobs": 20}
    stalls_before = server.log().count("closing (1013)")
    sock = open_silent_socket(server.port, rcvbuf=None)
    for i in range(4):
        sock.sendall(frame(json.dumps({"type": "request", "id": f"s{i}", "endpoint": "chat.completions", "body": body})))
    # Reads again once the server has given up on it, within the 5 s it waits for the frame in
    # flight to go through before it drops the connection.
    deadline = time.monotonic() + 60
    while server.log().count("closing (1013)") == stalls_before:
        assert time.monotonic() < deadline, "the server never found the socket stalled"
        time.sleep(0.05)
    frames, code, reason = read_frames_until_close(sock, 10)
    print(f"{frames} frames, then close {code} {reason!r}")
    assert code == 1013
    assert "did not read" in reason
    sock.close()
