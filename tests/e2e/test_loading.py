"""A server that is still loading its model: it listens already, /health answers 503 with the
reason, the API answers 503 (code "loading"), the dashboard's stats say what is loading, and the
log names each stage. The model is a FIFO, so the load waits in its first stage for as long as the
test needs; then the test writes nothing into it, and the load fails as it should.
"""

from __future__ import annotations

import os

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

KEY = "loading-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def test_a_server_still_loading_answers_503_with_the_reason_and_exits_when_the_load_fails(launch, tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    s = launch(["-m", str(fifo), "--api-key", KEY], healthy=False)

    health = httpx.get(f"{s.base_url}/health", timeout=30)
    assert health.status_code == 503
    assert health.json() == {"status": "loading", "reason": "loading the model: opening the model"}
    assert health.headers["retry-after"] == "1"

    chat = httpx.post(f"{s.base_url}/v1/chat/completions", headers=AUTH, timeout=30,
                      json={"messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 503 and chat.json()["error"]["code"] == "loading", chat.text
    assert "opening the model" in chat.json()["error"]["message"]
    assert httpx.post(f"{s.base_url}/v1/chat/completions", timeout=30, json={}).status_code == 401, "keys still count"

    stats = httpx.get(f"{s.base_url}/admin/api/stats", headers=AUTH, timeout=30)
    assert stats.status_code == 200
    assert stats.json() == {"loading": {"stage": "opening the model", "progress": None}}
    assert httpx.get(f"{s.base_url}/admin", timeout=30).status_code == 200, "the dashboard opens while loading"
    metrics = httpx.get(f"{s.base_url}/metrics", headers=AUTH, timeout=30)
    assert metrics.status_code == 200 and "strata_responses_total" in metrics.text, "metrics are scraped while loading"
    assert "loading: opening the model" in s.log()

    # An empty "model": the load fails, and the server says why and exits 1.
    with open(fifo, "wb"):
        pass
    assert s.wait_exit() == 1
    assert "model.gguf" in s.log().split("loading: opening the model", 1)[1]
