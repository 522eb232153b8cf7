"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as the official
`anthropic` Python SDK sees it, against the server running one of the ../shared models (random
weights, real tokenizer).

At temperature 0 the Messages answer must be the chat-completions answer to the same conversation
(the same template, the same greedy tokens), streamed or not; stop sequences end it with
stop_reason "stop_sequence" and name the one that matched; usage counts the prompt as
count_tokens does; errors come in Anthropic's shape; `x-api-key` authenticates. On the real
default model, a factual question gets the right answer, the same text streamed; a forced tool is
a valid tool_use block (stop_reason "tool_use") at temperature 1, a streamed tool_use reassembles
(input_json_delta) to the non-streamed one, and tool results render.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from strata_server import DEFAULT_MODEL, TINY_MODEL, model_path, openai_client, start_default_server, start_server

pytestmark = pytest.mark.timeout(300)

SYSTEM = "You are terse."
MESSAGES = [{"role": "user", "content": "Name three colours."}]
KEY = "messages-test-key"
# The SDK has no sampling parameters of its own; they travel as extra body members, as Anthropic's
# API reads them.
GREEDY = {"temperature": 0}


@pytest.fixture(scope="module")
def server():
    s = start_server(["-m", model_path(TINY_MODEL), "--api-key", KEY])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


@pytest.fixture(scope="module")
def client(server):
    with anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300) as c:
        yield c


@pytest.fixture(scope="module")
def greedy_chat(server):
    """The chat-completions answer to the same conversation at temperature 0."""
    with openai_client(server, KEY) as c:
        r = c.chat.completions.create(model=TINY_MODEL, messages=[{"role": "system", "content": SYSTEM}, *MESSAGES],
                                      max_tokens=24, temperature=0)
    return r.choices[0].message.content, r.usage.prompt_tokens, r.choices[0].finish_reason


def test_a_message_is_the_greedy_chat_answer_with_its_usage(client, greedy_chat):
    text, prompt_tokens, finish = greedy_chat
    m = client.messages.create(model=TINY_MODEL, max_tokens=24, extra_body=GREEDY, system=SYSTEM, messages=MESSAGES)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert [b.type for b in m.content] == (["text"] if text else [])
    assert (m.content[0].text if m.content else "") == text
    assert m.usage.input_tokens == prompt_tokens
    assert m.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[finish]
    if m.stop_reason == "max_tokens":
        assert m.usage.output_tokens == 24
    assert m.stop_sequence is None


def test_the_stream_sends_anthropics_events_and_the_same_text(client, greedy_chat):
    text, prompt_tokens, _ = greedy_chat
    kinds = []
    with client.messages.stream(model=TINY_MODEL, max_tokens=24, extra_body=GREEDY, system=SYSTEM, messages=MESSAGES) as s:
        for event in s:
            kinds.append(event.type)
        final = s.get_final_message()
    streamed = "".join(b.text for b in final.content if b.type == "text")
    assert streamed == text
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and kinds[-2] == "message_delta"
    if text:
        assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
    assert final.usage.input_tokens == prompt_tokens


def test_a_stop_sequence_ends_the_answer_and_is_named(client, greedy_chat):
    text = greedy_chat[0]
    words = [w for w in text.split(" ") if len(w) >= 2]
    if len(words) < 2:
        pytest.skip("the greedy answer has too few words to pick a stop sequence from: " + repr(text))
    stop = words[1]
    m = client.messages.create(model=TINY_MODEL, max_tokens=24, extra_body=GREEDY, system=SYSTEM, messages=MESSAGES,
                               stop_sequences=["never-appears-here", stop])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    assert (m.content[0].text if m.content else "") == text[: text.index(stop)]


def test_count_tokens_counts_what_a_message_would_use(client, greedy_chat):
    n = client.messages.count_tokens(model=TINY_MODEL, system=SYSTEM, messages=MESSAGES)
    assert n.input_tokens == greedy_chat[1]


def test_a_conversation_with_content_blocks_renders(client):
    m = client.messages.create(model=TINY_MODEL, max_tokens=4, system=[{"type": "text", "text": SYSTEM}], messages=[
        {"role": "user", "content": [{"type": "text", "text": "Hi."}, {"type": "text", "text": "Count."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "One."}]},
        {"role": "user", "content": "Go on."},
    ])
    assert m.usage.output_tokens <= 4 and m.usage.input_tokens > 10


@pytest.mark.parametrize("body,param", [
    ({"messages": MESSAGES}, "max_tokens"),
    ({"max_tokens": 4, "messages": []}, "messages"),
    ({"max_tokens": 4, "messages": MESSAGES, "temperature": 1.5}, "temperature"),
    ({"max_tokens": 4, "messages": [{"role": "robot", "content": "x"}]}, "role"),
    ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "image"),
    ({"max_tokens": 4, "messages": MESSAGES, "tools": [{"name": "f"}]}, "input_schema"),
    ({"max_tokens": 4, "messages": MESSAGES, "tool_choice": {"type": "tool", "name": "nope"}}, "nope"),
])
def test_bad_requests_get_anthropic_shaped_400s(server, body, param):
    r = httpx.post(f"{server.base_url}/v1/messages", json={"model": TINY_MODEL, **body}, headers={"x-api-key": KEY}, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert param in err["error"]["message"]


def test_the_sdk_raises_on_an_error_and_on_a_wrong_key(server, client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=TINY_MODEL, max_tokens=4, messages=MESSAGES, extra_body={"temperature": 3})
    assert "temperature" in str(e.value)
    with anthropic.Anthropic(base_url=server.base_url, api_key="wrong", max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.create(model=TINY_MODEL, max_tokens=4, messages=MESSAGES)


# Tools on the real default model (SmolLM2-135M-Instruct: its template has none, so the Hermes-style
# fallback describes them). A forced tool (tool_choice "tool") is written under the grammar of the
# call; in auto mode the model, shown two earlier calls, writes the third itself.

WEATHER = {"name": "get_weather", "description": "Current weather of a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                            "additionalProperties": False}}


def tool_use(tool_id: str, city: str) -> dict:
    return {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": city}}


FEW_SHOT = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": [tool_use("tu_1", "Paris")]},
    {"role": "user", "content": "What is the weather in Rome?"},
    {"role": "assistant", "content": [tool_use("tu_2", "Rome")]},
    {"role": "user", "content": "What is the weather in London?"},
]


@pytest.fixture(scope="module")
def smol():
    s = start_default_server(["--cache-mode", "off"])
    yield anthropic.Anthropic(base_url=s.base_url, api_key="unused", max_retries=0, timeout=300)
    assert s.stop() == 0, "SIGTERM exits 0"


def city_of(block) -> str:
    assert block.type == "tool_use" and block.name == "get_weather", block
    # The schema asks for a string, of any length: an empty one is valid.
    assert set(block.input) == {"city"} and isinstance(block.input["city"], str), block.input
    return block.input["city"]


def test_the_real_model_answers_a_question_and_streams_the_same_text(smol):
    body = dict(model=DEFAULT_MODEL, max_tokens=32, system="You are a knowledgeable assistant. Answer in one short sentence.",
                messages=[{"role": "user", "content": "What is the capital of France?"}], extra_body=GREEDY)
    m = smol.messages.create(**body)
    assert m.stop_reason == "end_turn" and [b.type for b in m.content] == ["text"], m
    assert "paris" in m.content[0].text.lower(), m.content[0].text
    with smol.messages.stream(**body) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == final.content[0].text == m.content[0].text
    assert final.usage.input_tokens == m.usage.input_tokens and final.usage.output_tokens == m.usage.output_tokens


# At temperature 1 a small model may write a city name of any length: the schema bounds it, so
# the grammar ends the call well within max_tokens.
BOUNDED_WEATHER = dict(WEATHER, input_schema=dict(WEATHER["input_schema"], properties={"city": {"type": "string", "maxLength": 32}}))


@pytest.mark.parametrize("seed", range(10))
def test_a_forced_tool_comes_back_as_a_valid_tool_use_block(smol, seed):
    m = smol.messages.create(model=DEFAULT_MODEL, max_tokens=120, system="You answer with tool calls.",
                             messages=[{"role": "user", "content": "Weather in Oslo, please."}], tools=[BOUNDED_WEATHER],
                             tool_choice={"type": "tool", "name": "get_weather"},
                             extra_body={"temperature": 1.0, "seed": seed})  # seed: strata's extension
    assert m.stop_reason == "tool_use", m
    calls = [b for b in m.content if b.type == "tool_use"]
    assert len(calls) == 1 and all(b.type in ("tool_use", "thinking") for b in m.content), m.content
    city_of(calls[0])


def test_streamed_tool_use_reassembles_to_the_non_streamed_answer(smol):
    body = dict(model=DEFAULT_MODEL, max_tokens=60, system="You only answer with tool calls.", messages=FEW_SHOT, tools=[WEATHER],
                extra_body=GREEDY)
    whole = smol.messages.create(**body)
    assert whole.stop_reason == "tool_use", whole
    assert [b.type for b in whole.content] == ["tool_use"], whole.content
    city_of(whole.content[0])
    deltas = 0
    with smol.messages.stream(**body) as s:
        for event in s:
            deltas += event.type == "content_block_delta" and event.delta.type == "input_json_delta"
        final = s.get_final_message()
    assert deltas >= 1
    assert final.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in final.content] == [(b.type, b.name, b.input) for b in whole.content]


def test_a_tool_result_round_trips(smol):
    m = smol.messages.create(model=DEFAULT_MODEL, max_tokens=8, messages=[
        *FEW_SHOT[:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "12 C"}]}],
        tools=[WEATHER], extra_body=GREEDY)
    assert m.usage.input_tokens > 0 and m.stop_reason in ("end_turn", "max_tokens", "tool_use")
    n = smol.messages.count_tokens(model=DEFAULT_MODEL, messages=[
        *FEW_SHOT[:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "12 C, sunny"}]}],
        tools=[WEATHER])
    assert n.input_tokens > m.usage.input_tokens, "the tool result is part of the prompt"
