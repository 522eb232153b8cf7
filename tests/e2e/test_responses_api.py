"""OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}) through the
official `openai` SDK.

On a tiny random-weight model with a real tokenizer: at temperature 0 a response's text is the
chat-completions answer to the same conversation (instructions as the system message); streamed,
the SDK's event sequence assembles the same text; a stored response is read back and deleted; a
follow-up with previous_response_id sees the earlier turn (its prompt holds it, and the prefix cache
serves it); max_output_tokens ends a response as incomplete; bad requests are 400s naming the field.

On the real default model (SmolLM2-135M-Instruct): a factual question gets the right answer, the
same text streamed; a forced function tool comes back as a function_call item whose arguments
validate, and `responses.parse` with a pydantic model gives a valid object at temperature 1.
"""

from __future__ import annotations

import json

import httpx
import openai
import pydantic
import pytest

from strata_server import DEFAULT_MODEL, TINY_MODEL, openai_client, start_default_server

pytestmark = pytest.mark.timeout(600)

INSTRUCTIONS = "You are terse."
QUESTION = "Name three colours."


@pytest.fixture(scope="module")
def greedy_chat(tiny_client):
    r = tiny_client.chat.completions.create(model=TINY_MODEL, messages=[{"role": "system", "content": INSTRUCTIONS},
                                                            {"role": "user", "content": QUESTION}],
                                       max_tokens=20, temperature=0)
    return r.choices[0].message.content, r.usage.prompt_tokens, r.choices[0].finish_reason


def test_a_response_is_the_greedy_chat_answer(tiny_client, greedy_chat):
    text, prompt_tokens, finish = greedy_chat
    r = tiny_client.responses.create(model=TINY_MODEL, instructions=INSTRUCTIONS, input=QUESTION, max_output_tokens=20, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == text
    assert [item.type for item in r.output] == (["message"] if text else [])
    assert r.usage.input_tokens == prompt_tokens and r.usage.output_tokens <= 20
    assert r.status == ("incomplete" if finish == "length" else "completed")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert r.instructions == INSTRUCTIONS and r.max_output_tokens == 20


def test_the_stream_sends_the_sdks_event_sequence_and_the_same_text(tiny_client, greedy_chat):
    text = greedy_chat[0]
    kinds, deltas = [], []
    with tiny_client.responses.stream(model=TINY_MODEL, instructions=INSTRUCTIONS, input=QUESTION, max_output_tokens=20,
                                 temperature=0) as s:
        for event in s:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response  # the SDK's get_final_response() takes only a completed one
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == ("response.incomplete" if greedy_chat[2] == "length" else "response.completed")
    assert "".join(deltas) == text == final.output_text
    if text:
        for k in ("response.output_item.added", "response.content_part.added", "response.output_text.done",
                  "response.content_part.done", "response.output_item.done"):
            assert k in kinds, (k, kinds)


def test_a_stored_response_is_read_back_and_deleted(tiny_client, tiny_server):
    r = tiny_client.responses.create(model=TINY_MODEL, input="Say hi.", max_output_tokens=4)
    again = tiny_client.responses.retrieve(r.id)
    assert again.id == r.id and again.output_text == r.output_text and again.usage.output_tokens == r.usage.output_tokens
    tiny_client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        tiny_client.responses.retrieve(r.id)
    unstored = tiny_client.responses.create(model=TINY_MODEL, input="Say hi.", max_output_tokens=4, store=False)
    assert httpx.get(f"{tiny_server.base_url}/v1/responses/{unstored.id}", timeout=30).status_code == 404


def test_previous_response_id_continues_the_conversation_from_the_cache(tiny_client):
    first = tiny_client.responses.create(model=TINY_MODEL, instructions=INSTRUCTIONS, input="x " * 300 + QUESTION, max_output_tokens=8,
                                    temperature=0)
    follow = tiny_client.responses.create(model=TINY_MODEL, instructions=INSTRUCTIONS, previous_response_id=first.id,
                                     input="And three more?", max_output_tokens=8, temperature=0)
    assert follow.previous_response_id == first.id
    alone = tiny_client.responses.create(model=TINY_MODEL, instructions=INSTRUCTIONS, input="And three more?", max_output_tokens=8,
                                    temperature=0, store=False)
    # The follow-up's prompt holds the first turn (its 300 words and its answer), and the cache has it.
    assert follow.usage.input_tokens > first.usage.input_tokens > alone.usage.input_tokens + 250
    assert follow.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 32
    with pytest.raises(openai.NotFoundError):
        tiny_client.responses.create(model=TINY_MODEL, previous_response_id="resp_missing", input="?", max_output_tokens=2)


@pytest.mark.parametrize("body,param", [
    ({}, "input"),
    ({"input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name"),
    ({"input": "x", "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "nonsense"}}}}, "text.format"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "temperature": 3}, "temperature"),
])
def test_bad_requests_are_400s_naming_the_field(tiny_server, body, param):
    r = httpx.post(f"{tiny_server.base_url}/v1/responses", json={"model": TINY_MODEL, **body}, timeout=60)
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["param"] or "").startswith(param), r.text


WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}, "strict": True}


class Colour(pydantic.BaseModel):
    # Bounded strings: at temperature 1 a small model can otherwise wander in a string until
    # max_output_tokens cuts the JSON off; the schema's maxLength lets the grammar close it in time.
    name: str = pydantic.Field(max_length=32)
    hex: str = pydantic.Field(max_length=16)
    warm: bool


@pytest.fixture(scope="module")
def smol():
    s = start_default_server(["--cache-mode", "off"])
    with openai_client(s) as c:
        yield c
    assert s.stop() == 0, "SIGTERM exits 0"


def test_the_real_model_answers_a_question_and_streams_the_same_text(smol):
    body = dict(model=DEFAULT_MODEL, instructions="You are a knowledgeable assistant. Answer in one short sentence.",
                input="What is the capital of France?", temperature=0, max_output_tokens=32)
    r = smol.responses.create(**body)
    assert r.status == "completed" and "paris" in r.output_text.lower(), r.output_text
    with smol.responses.stream(**body) as s:
        deltas = [event.delta for event in s if event.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert len(deltas) > 1 and "".join(deltas) == final.output_text == r.output_text
    assert final.usage.input_tokens == r.usage.input_tokens and final.usage.output_tokens == r.usage.output_tokens


@pytest.mark.parametrize("seed", range(3))
def test_a_forced_function_tool_is_a_valid_function_call_item(smol, seed):
    r = smol.responses.create(model=DEFAULT_MODEL, input="Weather in Oslo, please.", tools=[WEATHER],
                              tool_choice={"type": "function", "name": "get_weather"}, temperature=1.0, max_output_tokens=60,
                              extra_body={"seed": seed})
    calls = [item for item in r.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id, r.output
    args = json.loads(calls[0].arguments)
    assert set(args) == {"city"} and isinstance(args["city"], str), args
    # The call's output goes back as an item; the model's next answer is generated from it.
    follow = smol.responses.create(model=DEFAULT_MODEL, previous_response_id=r.id, max_output_tokens=8, tools=[WEATHER],
                                   input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "4 C"}])
    assert follow.status in ("completed", "incomplete") and follow.usage.input_tokens > r.usage.input_tokens


def test_streamed_function_call_arguments_assemble_to_the_call(smol):
    deltas, done = [], None
    with smol.responses.stream(model=DEFAULT_MODEL, input="Weather in Rome?", tools=[WEATHER], tool_choice="required",
                               parallel_tool_calls=False, temperature=0, max_output_tokens=60) as s:
        for event in s:
            if event.type == "response.function_call_arguments.delta":
                deltas.append(event.delta)
            if event.type == "response.function_call_arguments.done":
                done = event.arguments
        final = s.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert len(calls) == 1 and "".join(deltas) == done == calls[0].arguments
    assert set(json.loads(done)) == {"city"}


def test_parse_with_a_pydantic_model_gives_valid_objects(smol):
    for seed in range(10):
        r = smol.responses.parse(model=DEFAULT_MODEL, input="Describe a colour as JSON.", text_format=Colour, temperature=1.0,
                                 max_output_tokens=120, extra_body={"seed": seed})
        assert r.status == "completed", (seed, r.output_text)
        assert isinstance(r.output_parsed, Colour), (seed, r.output_text)
