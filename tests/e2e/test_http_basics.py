"""HTTP behaviour every client relies on, checked with httpx and curl against the real server.

The server runs the built-in demo model with an API key: /health answers without the key, the
/v1 endpoints refuse a missing or wrong key with an OpenAI-shaped 401, one curl connection is kept
alive across a 200, a 404 and a 405, and /metrics (with the key) is Prometheus text that counts
responses by status.
"""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from strata_server import metric, start_server

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def server():
    s = start_server(["--demo", "--api-key", "sk-test-key"])
    try:
        yield s
    finally:
        assert s.stop() == 0, "SIGTERM exits 0"


def test_health_answers_200_without_a_key(server):
    res = httpx.get(f"{server.base_url}/health", timeout=60)
    assert res.status_code == 200
    assert res.json() == {"status": "ok", "ssd": "off"}  # the default cache mode, hot, uses no disk


def test_v1_endpoints_refuse_a_missing_or_wrong_key_with_an_openai_shaped_401(server):
    for headers in [{}, {"Authorization": "Bearer nope"}]:
        res = httpx.get(f"{server.base_url}/v1/models", headers=headers, timeout=60)
        assert res.status_code == 401
        body = res.json()
        assert body["error"]["code"] == "invalid_api_key"
        assert isinstance(body["error"]["message"], str)
        assert "param" in body["error"] and "type" in body["error"]


def test_curl_sees_keep_alive_404_and_405_as_documented(server):
    fmt = ["-s", "-o", "/dev/null", "-w", r"%{http_code} %{num_connects}\n"]
    out = subprocess.run(
        ["curl", *fmt, f"{server.base_url}/health", "--next", *fmt, f"{server.base_url}/nowhere",
         "--next", *fmt, "-X", "DELETE", f"{server.base_url}/health"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    lines = out.strip().split("\n")
    assert len(lines) == 3
    # One connection serves all three requests.
    assert [line.split(" ")[0] for line in lines] == ["200", "404", "405"]
    assert lines[1].split(" ")[1] == "0"
    assert lines[2].split(" ")[1] == "0"


def test_metrics_are_prometheus_text_and_count_responses_by_status(server):
    def count_404() -> float:
        res = httpx.get(f"{server.base_url}/metrics", headers={"Authorization": "Bearer sk-test-key"}, timeout=60)
        assert res.status_code == 200
        assert re.search(r"text/plain", res.headers["content-type"])
        text = res.text
        assert re.search(r"^# TYPE strata_responses_total counter$", text, re.M)
        assert re.search(r"^# TYPE strata_ttft_seconds histogram$", text, re.M)
        assert re.search(r"^# TYPE strata_inter_token_seconds histogram$", text, re.M)
        return metric(text, 'strata_responses_total{status="404"}')

    before = count_404()
    for _ in range(3):
        assert httpx.get(f"{server.base_url}/no/such/path", timeout=60).status_code == 404
    assert count_404() == before + 3
