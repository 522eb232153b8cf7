"""Model names as clients meet them: a request names the served model by its id (as /v1/models
lists it), one of its --served-model-name aliases or the model file's name, or leaves `model` out
where the API allows; any other name is a 404 model_not_found on chat and text completions and the
Responses API, and Anthropic's not_found_error on the Messages API.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from strata_server import model_path, openai_client

pytestmark = pytest.mark.timeout(300)

USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"])
def test_an_unknown_model_is_a_404_model_not_found(tiny_server, path):
    body = {"/v1/chat/completions": {"messages": [USER], "max_tokens": 2},
            "/v1/completions": {"prompt": "hi", "max_tokens": 2},
            "/v1/responses": {"input": "hi", "max_output_tokens": 2},
            "/v1/messages": {"messages": [USER], "max_tokens": 2}}[path]
    r = httpx.post(f"{tiny_server.base_url}{path}", json={"model": "gpt-unknown", **body}, timeout=60)
    assert r.status_code == 404
    if path == "/v1/messages":
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "not_found_error"
        assert "gpt-unknown" in r.json()["error"]["message"]
    else:
        e = r.json()["error"]
        assert (e["code"], e["type"], e["param"]) == ("model_not_found", "invalid_request_error", "model")
        assert "gpt-unknown" in e["message"]
    ok = httpx.post(f"{tiny_server.base_url}{path}", json={"model": tiny_server.model, **body}, timeout=60)
    assert ok.status_code == 200, ok.text


def test_a_missing_model_is_the_served_one_where_the_api_allows_it(tiny_server):
    for path, body in [("/v1/chat/completions", {"messages": [USER], "max_tokens": 2}),
                       ("/v1/completions", {"prompt": "hi", "max_tokens": 2})]:
        r = httpx.post(f"{tiny_server.base_url}{path}", json=body, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["model"] == tiny_server.model


def test_served_model_names_are_the_id_and_its_aliases(launch):
    s = launch(["-m", model_path("tiny-qwen2-gpt2-f16"), "--served-model-name", "tiny", "--served-model-name", "tiny-alias"])
    assert s.model == "tiny"
    assert [m["id"] for m in httpx.get(f"{s.base_url}/v1/models", timeout=30).json()["data"]] == ["tiny"]
    with openai_client(s) as c:
        for name in ("tiny", "tiny-alias", "tiny-qwen2-gpt2-f16"):
            r = c.chat.completions.create(model=name, messages=[USER], max_tokens=2)
            assert r.model == "tiny"
        with pytest.raises(openai.NotFoundError) as err:
            c.chat.completions.create(model="tiny-other", messages=[USER], max_tokens=2)
        assert err.value.code == "model_not_found"
    a = anthropic.Anthropic(base_url=s.base_url, api_key="unused", max_retries=0)
    with pytest.raises(anthropic.NotFoundError):
        a.messages.create(model="claude-unknown", max_tokens=2, messages=[USER])
    assert a.messages.create(model="tiny-alias", max_tokens=2, messages=[USER]).model == "tiny"
    assert s.stop() == 0
