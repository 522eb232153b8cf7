"""Browsers and the real server: CORS for the API and the Origin check of /v1/ws.

`server.cors_origins` (conf/strata.toml) lists the web origins whose pages may call the API. With
one origin listed (and an API key), responses to that origin name it and say `Vary: Origin`, a
preflight is answered 204 without the key, and a 401 is readable by the page; another origin gets
no CORS headers, a 403 to its preflight, and no WebSocket. With the default empty list, a
WebSocket handshake that carries an Origin is refused. Clients that send no Origin (httpx, the
`websockets` client without `origin=`) are unaffected either way.
"""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from strata_server import DEMO_MODEL, start_server

pytestmark = pytest.mark.timeout(300)

APP = "https://app.example"
EVIL = "https://evil.example"
KEY = "sk-cors-test"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    conf = tmp_path_factory.mktemp("conf") / "strata.toml"
    conf.write_text(f'[server]\ncors_origins = ["{APP}", "http://localhost:5173"]\n')
    s = start_server(["--demo", "--api-key", KEY, "--config", str(conf)])
    try:
        yield s
    finally:
        assert s.stop() == 0, "SIGTERM exits 0"


def ws_url(server) -> str:
    return f"{server.base_url.replace('http', 'ws', 1)}/v1/ws"


def test_responses_to_a_listed_origin_name_it(server):
    res = httpx.get(f"{server.base_url}/v1/models", headers={**AUTH, "Origin": APP}, timeout=60)
    assert res.status_code == 200
    assert res.headers["access-control-allow-origin"] == APP
    assert res.headers["vary"] == "Origin"


def test_a_401_to_a_listed_origin_is_readable_by_the_page(server):
    res = httpx.get(f"{server.base_url}/v1/models", headers={"Origin": APP}, timeout=60)
    assert res.status_code == 401
    assert res.headers["access-control-allow-origin"] == APP
    assert res.json()["error"]["code"] == "invalid_api_key"


def test_a_streamed_completion_to_a_listed_origin_names_it(server):
    body = {"model": DEMO_MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", json=body,
                      headers={**AUTH, "Origin": APP}, timeout=60) as res:
        assert res.status_code == 200
        assert res.headers["access-control-allow-origin"] == APP
        text = "".join(res.iter_text())
    assert text.rstrip().endswith("data: [DONE]")


def test_an_unlisted_origin_or_none_gets_no_cors_headers(server):
    for headers in [{**AUTH, "Origin": EVIL}, AUTH]:
        res = httpx.get(f"{server.base_url}/v1/models", headers=headers, timeout=60)
        assert res.status_code == 200
        assert "access-control-allow-origin" not in res.headers


def test_a_preflight_from_a_listed_origin_is_answered_without_the_key(server):
    res = httpx.options(f"{server.base_url}/v1/chat/completions", timeout=60, headers={
        "Origin": APP,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    })
    assert res.status_code == 204
    assert res.headers["access-control-allow-origin"] == APP
    assert res.headers["vary"] == "Origin"
    methods = {m.strip() for m in res.headers["access-control-allow-methods"].split(",")}
    assert {"GET", "POST", "OPTIONS"} <= methods
    allowed = {h.strip().lower() for h in res.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type"} <= allowed
    assert int(res.headers["access-control-max-age"]) > 0


def test_a_preflight_from_an_unlisted_origin_gets_403(server):
    res = httpx.options(f"{server.base_url}/v1/chat/completions", timeout=60,
                        headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    assert res.status_code == 403
    assert "access-control-allow-origin" not in res.headers
    assert res.json()["error"]["code"] == "origin_not_allowed"


def test_a_listed_origin_opens_the_websocket_and_an_unlisted_one_is_refused(server):
    for origin in [APP, None]:
        with connect(ws_url(server), origin=origin, additional_headers=AUTH, open_timeout=60, proxy=None) as ws:
            ws.send(json.dumps({"type": "request", "id": 1, "endpoint": "completions",
                                "body": {"model": DEMO_MODEL, "prompt": "hi", "max_tokens": 2}}))
            frames = []
            while not frames or frames[-1]["type"] not in ("done", "error"):
                frames.append(json.loads(ws.recv(timeout=60)))
            assert frames[-1]["type"] == "done", frames
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(server), origin=EVIL, additional_headers=AUTH, open_timeout=60, proxy=None)
    assert refused.value.response.status_code == 403


def test_by_default_a_browser_websocket_is_refused_and_other_clients_are_not(launch):
    s = launch(["--demo"])
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{s.base_url.replace('http', 'ws', 1)}/v1/ws", origin=APP, open_timeout=60, proxy=None)
    assert refused.value.response.status_code == 403
    with connect(f"{s.base_url.replace('http', 'ws', 1)}/v1/ws", open_timeout=60, proxy=None):
        pass
    res = httpx.get(f"{s.base_url}/v1/models", headers={"Origin": APP}, timeout=60)
    assert res.status_code == 200
    assert "access-control-allow-origin" not in res.headers
    assert s.stop() == 0
