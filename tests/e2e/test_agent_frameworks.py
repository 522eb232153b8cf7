"""The agent frameworks people use, from PyPI, against the real default model (SmolLM2-135M-Instruct).

- openai-agents: an agent with two function tools runs to its final answer over /v1/responses
  (OpenAIResponsesModel, also streamed) and over chat completions (OpenAIChatCompletionsModel).
  The first turn requires a tool call and allows several (tool_choice "required", parallel calls);
  the SDK then resets tool_choice to auto and the model answers from the tools' outputs. A
  conversation continued with previous_response_id sees the first turn, from the prefix cache.
- langchain-openai: ChatOpenAI.bind_tools gives a tool call with parsed args;
  with_structured_output gives a pydantic instance (methods json_schema and function_calling).
- instructor and pydantic-ai: a typed result, under a forced tool and under a json_schema format.

Every request runs at temperature 0 under the server's constrained decoding (a required or forced
tool, a json_schema), so what a 135M model writes is valid by construction and the same each run.
The schemas hold strings and booleans only: under a `number` this model writes digits until its
token limit. All requests name the model the server reports at /v1/models.
"""

from __future__ import annotations

import asyncio
import json

import instructor
import openai
import pydantic
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic_ai import Agent as TypedAgent
from pydantic_ai import NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.openai import OpenAIResponsesModel as TypedResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings as TypedSettings

from strata_server import openai_client, start_default_server

pytestmark = pytest.mark.timeout(300)

set_tracing_disabled(True)


class City(pydantic.BaseModel):
    name: str
    country: str
    is_capital: bool


CITY_QUESTION = "Describe Paris: its name, its country, and whether it is a capital."


@pytest.fixture(scope="module")
def server():
    s = start_default_server(["--cache-mode", "hot"])
    yield s
    assert s.stop() == 0, "SIGTERM exits 0"


@pytest.fixture(scope="module")
def base_url(server):
    return f"{server.base_url}/v1"


@pytest.fixture(scope="module")
def model_id(server):
    with openai_client(server) as c:
        return c.models.list().data[0].id


def assert_city(c) -> None:
    assert isinstance(c, City), c
    assert c.name and c.country and isinstance(c.is_capital, bool), c


# openai-agents

WEATHER = "Sunny, 21 C in {city}."
TIME = "It is 14:05 in {city}."


def two_tool_agent(model, calls: list) -> Agent:
    @function_tool
    def get_weather(city: str) -> str:
        """The current weather of a city."""
        calls.append(("get_weather", city))
        return WEATHER.format(city=city)

    @function_tool
    def get_time(city: str) -> str:
        """The local time in a city."""
        calls.append(("get_time", city))
        return TIME.format(city=city)

    return Agent(name="assistant", instructions="You answer questions about cities. Use the tools.", model=model,
                 tools=[get_weather, get_time],
                 model_settings=ModelSettings(temperature=0, max_tokens=64, tool_choice="required",
                                              parallel_tool_calls=True))


async def run_agent(base_url: str, model_id: str, api: str, streamed: bool, calls: list):
    async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300) as client:
        model = (OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel)(model_id, client)
        agent = two_tool_agent(model, calls)
        question = "What is the weather and the local time in Paris?"
        if not streamed:
            return await Runner.run(agent, question, max_turns=4)
        result = Runner.run_streamed(agent, question, max_turns=4)
        events = [e.type async for e in result.stream_events()]
        assert "raw_response_event" in events and "run_item_stream_event" in events, events
        return result


@pytest.mark.parametrize("api,streamed", [("responses", False), ("responses", True), ("chat", False)])
def test_an_agents_sdk_agent_calls_both_tools_and_answers_from_their_outputs(base_url, model_id, api, streamed):
    calls: list = []
    result = asyncio.run(run_agent(base_url, model_id, api, streamed, calls))

    # Both tools were called, each once, with arguments that follow their schema.
    tool_calls = [i.raw_item for i in result.new_items if isinstance(i, ToolCallItem)]
    assert sorted(c.name for c in tool_calls) == ["get_time", "get_weather"], result.new_items
    for c in tool_calls:
        args = json.loads(c.arguments)
        assert set(args) == {"city"} and isinstance(args["city"], str) and args["city"], c
    assert sorted(name for name, _ in calls) == ["get_time", "get_weather"]

    # Their outputs went back into the conversation: the next request's prompt holds them.
    outputs = {i.raw_item["call_id"]: i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)}
    assert set(outputs) == {c.call_id for c in tool_calls}
    assert sorted(outputs.values()) == sorted((WEATHER if name == "get_weather" else TIME).format(city=city)
                                              for name, city in calls)
    sent = [item for item in result.to_input_list() if item.get("type") == "function_call_output"]
    assert {item["call_id"] for item in sent} == set(outputs)
    assert len(result.raw_responses) == 2, "one turn of calls, then the answer"
    first, last = (r.usage.input_tokens for r in (result.raw_responses[0], result.raw_responses[-1]))
    assert last > first + 20, (first, last)

    # A final answer came, as text.
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.final_output
    assert isinstance(result.new_items[-1], MessageOutputItem)


async def continue_conversation(base_url: str, model_id: str):
    async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300) as client:
        agent = Agent(name="assistant", instructions="You are a knowledgeable assistant. Answer in one short sentence.",
                      model=OpenAIResponsesModel(model_id, client), model_settings=ModelSettings(temperature=0, max_tokens=24))
        first = await Runner.run(agent, "What is the capital of France?")
        second = await Runner.run(agent, "And the capital of Italy?", previous_response_id=first.last_response_id)
        return first, second


def test_an_agents_sdk_conversation_continues_from_the_stored_response(base_url, model_id):
    first, second = asyncio.run(continue_conversation(base_url, model_id))
    assert "paris" in first.final_output.lower(), first.final_output
    assert "rome" in second.final_output.lower(), second.final_output
    # The second turn's prompt holds the first turn, which the prefix cache served.
    usage = second.raw_responses[0].usage
    assert usage.input_tokens > first.raw_responses[0].usage.input_tokens
    assert usage.input_tokens_details.cached_tokens > 0, usage


# langchain-openai

@tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return WEATHER.format(city=city)


@pytest.fixture(scope="module")
def chat_model(base_url, model_id):
    return ChatOpenAI(model=model_id, base_url=base_url, api_key="unused", temperature=0, max_tokens=64, max_retries=0,
                      http_socket_options=())


def test_langchain_bind_tools_gives_a_tool_call_with_parsed_args(chat_model):
    message = chat_model.bind_tools([get_weather], tool_choice="get_weather").invoke("What is the weather in Paris?")
    assert len(message.tool_calls) == 1, message
    call = message.tool_calls[0]
    assert call["name"] == "get_weather" and call["id"], call
    assert set(call["args"]) == {"city"} and isinstance(call["args"]["city"], str), call
    assert get_weather.invoke(call["args"]) == WEATHER.format(city=call["args"]["city"])


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output_gives_a_pydantic_instance(chat_model, method):
    assert_city(chat_model.with_structured_output(City, method=method).invoke(CITY_QUESTION))


# instructor

@pytest.mark.parametrize("mode", [instructor.Mode.TOOLS, instructor.Mode.JSON_SCHEMA])
def test_instructor_gives_a_typed_result(server, model_id, mode):
    with openai_client(server) as c:
        client = instructor.from_openai(c, mode=mode)
        city = client.chat.completions.create(model=model_id, response_model=City, max_retries=0, temperature=0,
                                              max_tokens=80, messages=[{"role": "user", "content": CITY_QUESTION}])
    assert_city(city)


# pydantic-ai

@pytest.mark.parametrize("api,output", [("chat", "tool"), ("responses", "native")])
def test_pydantic_ai_gives_a_typed_result(base_url, model_id, api, output):
    provider = OpenAIProvider(base_url=base_url, api_key="unused")
    model = (OpenAIChatModel if api == "chat" else TypedResponsesModel)(model_id, provider=provider)
    # "tool": the answer is a call of the output tool that pydantic-ai declares (tool_choice
    # required); "native": a json_schema text format.
    agent = TypedAgent(model, output_type=City if output == "tool" else NativeOutput(City),
                       model_settings=TypedSettings(temperature=0, max_tokens=80))
    assert_city(agent.run_sync(CITY_QUESTION).output)
