"""Tool calls and reasoning through the official `openai` SDK.

On the real default model (SmolLM2-135M-Instruct, whose template has no tools: the fallback,
Hermes-style `<tool_call>` blocks described in a system message): a call the model writes in auto
mode comes back as `message.tool_calls` with `finish_reason: "tool_calls"` and no markup in the
content; streamed, its deltas come as OpenAI sends them and reassemble to the same call; tool history
(an assistant's calls with null content, tool results) renders into the prompt; `tool_choice`
"none" offers no tools. The model is shown two earlier calls in the history, after which it writes
the third itself at temperature 0. Forced calls (`required`, a named function; constrained
decoding) validate against the tool's schema at temperature 1.

On tiny random-weight models carrying shared templates (Qwen2.5, Qwen3, Llama 3.1, Mistral Nemo)
tool history round-trips through each template, and `chat_template_kwargs` and `reasoning_effort`
reach the template (the prompt changes with them).

The real-model server runs with the prefix cache off, so that a streamed and a non-streamed
request compute the same tokens the same way.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import gguf
import httpx
import openai
import pytest

from strata_server import DEFAULT_MODEL, SHARED_DIR, STRATA_BIN, model_path, openai_client, start_default_server, start_server

pytestmark = pytest.mark.timeout(600)


TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False},
    },
}]


def call_of(call_id: str, city: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


FEW_SHOT = [
    {"role": "system", "content": "You only answer with tool calls."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [call_of("call_1", "Paris")]},
    {"role": "user", "content": "What is the weather in Rome?"},
    {"role": "assistant", "content": None, "tool_calls": [call_of("call_2", "Rome")]},
    {"role": "user", "content": "What is the weather in London?"},
]


def valid_arguments(arguments: str) -> dict:
    """The arguments of a get_weather call, checked against its schema."""
    args = json.loads(arguments)
    assert isinstance(args, dict), arguments
    assert set(args) == {"city"}, arguments
    assert isinstance(args["city"], str), arguments  # any string the schema allows, "" too
    return args


client_of = openai_client


def token_count(s, text: str) -> int:
    r = httpx.post(f"{s.base_url}/tokenize", content=json.dumps({"content": text, "add_special": False}), timeout=60)
    return len(r.json()["tokens"])


@pytest.fixture(scope="module")
def smol():
    s = start_default_server(["--cache-mode", "off"])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


def test_auto_mode_returns_the_call_the_model_writes(smol):
    r = client_of(smol).chat.completions.create(model=DEFAULT_MODEL, messages=FEW_SHOT, tools=TOOLS, temperature=0, max_tokens=60, seed=1)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None, choice.message
    assert len(choice.message.tool_calls) == 1, choice.message
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_") and len(call.id) > 10
    assert call.function.name == "get_weather"
    assert valid_arguments(call.function.arguments) == {"city": "London"}


def strict_weather(strict: bool) -> list[dict]:
    """get_weather whose city must be one of two the few-shot never names."""
    fn = {**TOOLS[0]["function"], "strict": strict,
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oslo", "Lima"]}},
                         "required": ["city"], "additionalProperties": False}}
    return [{"type": "function", "function": fn}]


def test_a_strict_tool_in_auto_mode_constrains_the_call_the_model_writes(smol):
    client = client_of(smol)
    kw = dict(model=DEFAULT_MODEL, messages=FEW_SHOT, temperature=0, max_tokens=60, seed=1)
    loose = client.chat.completions.create(tools=strict_weather(False), **kw).choices[0]
    strict = client.chat.completions.create(tools=strict_weather(True), **kw).choices[0]
    # Unconstrained, the model writes the city it was asked about, outside the enum; strict, the
    # call it starts must take one the schema allows.
    assert loose.finish_reason == "tool_calls", loose
    assert json.loads(loose.message.tool_calls[0].function.arguments)["city"] not in ("Oslo", "Lima"), loose.message
    assert strict.finish_reason == "tool_calls", strict
    assert json.loads(strict.message.tool_calls[0].function.arguments)["city"] in ("Oslo", "Lima"), strict.message


def test_streamed_tool_deltas_reassemble_to_the_non_streamed_call(smol):
    client = client_of(smol)
    kw = dict(model=DEFAULT_MODEL, messages=FEW_SHOT, tools=TOOLS, temperature=0, max_tokens=60, seed=3)
    whole = client.chat.completions.create(**kw).choices[0].message.tool_calls
    calls: dict[int, dict] = {}
    content, finish = "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
        for tc in delta.tool_calls or []:
            if tc.index not in calls:
                # The first delta of a call: its index, id, type and name, and empty arguments.
                assert tc.id and tc.type == "function" and tc.function.name and tc.function.arguments == "", tc
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
            else:
                assert tc.id is None and tc.function.name is None, tc
                calls[tc.index]["arguments"] += tc.function.arguments
    assert finish == "tool_calls"
    assert content == "", "no markup, and nothing else, in the content"
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == \
        [(w.function.name, json.loads(w.function.arguments)) for w in whole]


def test_tool_choice_none_offers_no_tools_and_reads_no_calls(smol):
    client = client_of(smol)
    kw = dict(model=DEFAULT_MODEL, messages=FEW_SHOT, tools=TOOLS, temperature=0, max_tokens=60)
    auto = client.chat.completions.create(**kw)
    none = client.chat.completions.create(tool_choice="none", **kw)
    assert not none.choices[0].message.tool_calls
    assert none.choices[0].finish_reason != "tool_calls"
    assert none.usage.prompt_tokens < auto.usage.prompt_tokens, "the tools are not described to the model"


def test_tool_history_renders_into_the_prompt(smol):
    client = client_of(smol)
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call_of("call_7", "Paris")]},
        {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 21 C"},
    ]
    with_calls = client.chat.completions.create(model=DEFAULT_MODEL, messages=history, tools=TOOLS, temperature=0, max_tokens=8)
    without = client.chat.completions.create(model=DEFAULT_MODEL, messages=history[:1], tools=TOOLS, temperature=0, max_tokens=8)
    block = '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call>'
    grown = with_calls.usage.prompt_tokens - without.usage.prompt_tokens
    assert grown >= token_count(smol, block) + token_count(smol, "<tool_response>\nsunny, 21 C\n</tool_response>"), grown


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_calls_validate_against_the_tools_schema(smol, choice):
    client = client_of(smol)
    for seed in range(5):
        r = client.chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "Is it cold in Oslo?"}], tools=TOOLS,
                                           tool_choice=choice, parallel_tool_calls=False, temperature=1.0, seed=seed,
                                           max_tokens=100)
        choice0 = r.choices[0]
        assert choice0.finish_reason == "tool_calls", (seed, choice0)
        assert choice0.message.content is None, (seed, choice0.message)
        assert len(choice0.message.tool_calls) == 1, (seed, choice0.message)
        assert choice0.message.tool_calls[0].function.name == "get_weather"
        valid_arguments(choice0.message.tool_calls[0].function.arguments)


def test_required_parallel_calls_each_validate(smol):
    """With parallel calls allowed the model may call again and again, up to max_tokens: every call
    it finished is valid, and one cut off comes back as content with finish_reason length."""
    r = client_of(smol).chat.completions.create(model=DEFAULT_MODEL, messages=[{"role": "user", "content": "Is it cold in Oslo?"}],
                                                tools=TOOLS, tool_choice="required", temperature=1.0, seed=0, max_tokens=100)
    choice0 = r.choices[0]
    assert choice0.message.tool_calls, choice0
    for call in choice0.message.tool_calls:
        assert call.function.name == "get_weather"
        valid_arguments(call.function.arguments)
    assert choice0.finish_reason in ("tool_calls", "length")
    if choice0.finish_reason == "tool_calls":
        assert choice0.message.content is None


def test_forced_calls_stream_as_deltas(smol):
    chunks = client_of(smol).chat.completions.create(
        model=DEFAULT_MODEL, messages=[{"role": "user", "content": "Weather in Lima?"}], tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, max_tokens=100, stream=True)
    args, names, finish = "", [], None
    for chunk in chunks:
        for tc in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
            if tc.function.name:
                names.append(tc.function.name)
            args += tc.function.arguments or ""
        if chunk.choices and chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    assert names == ["get_weather"] and finish == "tool_calls"
    valid_arguments(args)


def test_bad_tools_and_tool_choices_are_400s_naming_the_field(smol):
    client = client_of(smol)
    msgs = [{"role": "user", "content": "hi"}]
    cases = [
        (dict(tools=[{"type": "function", "function": {"name": "bad name"}}]), "tools[0].function.name"),
        (dict(tools=TOOLS + TOOLS), "tools[1].function.name"),
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "elsewhere"}}), "tool_choice.function.name"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=TOOLS, extra_body={"chat_template_kwargs": [1]}), "chat_template_kwargs"),
    ]
    for kw, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=DEFAULT_MODEL, messages=msgs, max_tokens=1, **kw)
        err = e.value.response.json()["error"]
        assert err["param"] == param, err
        assert err["type"] == "invalid_request_error"


# Tiny random-weight models carrying the shared templates.

TEMPLATES = {
    "qwen2.5": "Qwen-Qwen2.5-7B-Instruct",
    "qwen3": "Qwen-Qwen3-0.6B",
    "llama3.1": "meta-llama-Llama-3.1-8B-Instruct",
    "mistral-nemo": "mistralai-Mistral-Nemo-Instruct-2407",
}

# A template of our own that uses reasoning_effort, as harmony templates do.
EFFORT_TEMPLATE = ("{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
                   "{% if reasoning_effort %}<|start|>system<|message|>Reasoning: {{ reasoning_effort }}<|end|>{% endif %}"
                   "<|start|>assistant")


def synth_model(folder: Path, template: str) -> str:
    """A one-layer random model with tiny-qwen2-gpt2's vocabulary and `template` as its chat template."""
    vocab, out = folder / "vocab.gguf", folder / "model.gguf"
    r = gguf.GGUFReader(model_path("tiny-qwen2-gpt2-f16"))
    w = gguf.GGUFWriter(str(vocab), "qwen2")
    for key, field in r.fields.items():
        if key.startswith("tokenizer.") and key != "tokenizer.chat_template":
            sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    w.add_key_value("tokenizer.chat_template", template, gguf.GGUFValueType.STRING)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    subprocess.run([STRATA_BIN, "synth", "--arch", "qwen2", "--layers", "1", "--hidden", "64", "--heads", "2", "--kv-heads", "1",
                    "--ffn", "128", "--tied", "--vocab", str(vocab), "-q", "-o", str(out)], check=True)
    return str(out)


def template_source(name: str) -> str:
    return (Path(SHARED_DIR) / "templates" / f"{name}.jinja").read_text()


@pytest.fixture(scope="module", params=list(TEMPLATES))
def templated(request, tmp_path_factory):
    s = start_server(["-m", synth_model(tmp_path_factory.mktemp(request.param), template_source(TEMPLATES[request.param]))])
    yield request.param, s
    assert s.stop() == 0, "SIGTERM exits 0"


def test_tool_history_round_trips_through_each_shared_template(templated):
    name, s = templated
    client = client_of(s)
    call_id = "abcDEF123" if name == "mistral-nemo" else "call_abc"  # Mistral's template takes 9-character ids only
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call_of(call_id, "Paris")]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"},
    ]
    with_calls = client.chat.completions.create(model=s.model, messages=history, tools=TOOLS, max_tokens=4, temperature=0)
    without = client.chat.completions.create(model=s.model, messages=history[:1], tools=TOOLS, max_tokens=4, temperature=0)
    assert with_calls.choices[0].finish_reason in ("stop", "length", "tool_calls")
    grown = with_calls.usage.prompt_tokens - without.usage.prompt_tokens
    assert grown >= token_count(s, '"Paris"') + token_count(s, "sunny, 21 C"), (name, grown)


# A random model would write a free string forever: here the city is one of a few.
ENUM_TOOLS = [{"type": "function", "function": {**TOOLS[0]["function"], "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["Lima", "Oslo", "Rome"]}}, "required": ["city"],
    "additionalProperties": False}}}]


@pytest.mark.parametrize("stream", [False, True])
def test_named_calls_parse_in_each_templates_format(templated, stream):
    """Random weights, but the grammar writes the call in the template's format, and the parser
    reads it back (Qwen3 with thinking off: its prompt closes the think block)."""
    name, s = templated
    kw = dict(model=s.model, messages=[{"role": "user", "content": "Weather in Lima?"}], tools=ENUM_TOOLS, temperature=0, max_tokens=120,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    client = client_of(s)
    if not stream:
        choice = client.chat.completions.create(**kw).choices[0]
        assert choice.finish_reason == "tool_calls", (name, choice)
        assert choice.message.content is None and len(choice.message.tool_calls) == 1, (name, choice.message)
        assert choice.message.tool_calls[0].function.name == "get_weather"
        valid_arguments(choice.message.tool_calls[0].function.arguments)
        if name == "mistral-nemo":
            assert len(choice.message.tool_calls[0].id) == 9, "ids its template takes back"
        return
    args, content, finish = "", "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        content += chunk.choices[0].delta.content or ""
        for tc in chunk.choices[0].delta.tool_calls or []:
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and content == "", (name, content)
    valid_arguments(args)


def test_chat_template_kwargs_reach_the_template(templated):
    name, s = templated
    if name != "qwen3":
        pytest.skip("Qwen3's template is the one with enable_thinking")
    client = client_of(s)
    msgs = [{"role": "user", "content": "hi"}]
    on = client.chat.completions.create(model=s.model, messages=msgs, max_tokens=1, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    off = client.chat.completions.create(model=s.model, messages=msgs, max_tokens=1, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    # Thinking off, the template closes an empty think block for the model.
    assert off.usage.prompt_tokens - on.usage.prompt_tokens == token_count(s, "<think>\n\n</think>\n\n")


def test_reasoning_effort_reaches_the_template(launch, tmp_path):
    s = launch(["-m", synth_model(tmp_path, EFFORT_TEMPLATE)])
    client = client_of(s)
    msgs = [{"role": "user", "content": "hi"}]
    low = client.chat.completions.create(model=s.model, messages=msgs, max_tokens=1, reasoning_effort="low")
    plain = client.chat.completions.create(model=s.model, messages=msgs, max_tokens=1)
    assert low.usage.prompt_tokens - plain.usage.prompt_tokens >= token_count(s, "Reasoning: low")
    assert s.stop() == 0
