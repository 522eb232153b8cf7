"""openai-agents, the OpenAI Agents SDK from PyPI, against the real default model (SmolLM2-135M-Instruct).

An agent with two function tools runs to its final answer over /v1/responses
(OpenAIResponsesModel, also streamed) and over chat completions (OpenAIChatCompletionsModel).
The first turn requires a tool call and allows several (tool_choice "required", parallel calls),
so the server's constrained decoding makes the calls valid, and at temperature 0 the same each
run; the SDK then resets tool_choice to auto and the model answers from the tools' outputs. A
conversation continued with previous_response_id sees the first turn, from the prefix cache.
tests/e2e/test_typed_output_frameworks.py drives langchain-openai, instructor and pydantic-ai.
"""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem

pytestmark = pytest.mark.timeout(300)

set_tracing_disabled(True)

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

    # max_tokens: two calls whose arguments the model may indent over several lines take about 80.
    return Agent(name="assistant", instructions="You answer questions about cities. Use the tools.", model=model,
                 tools=[get_weather, get_time],
                 model_settings=ModelSettings(temperature=0, max_tokens=160, tool_choice="required",
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
def test_an_agents_sdk_agent_calls_both_tools_and_answers_from_their_outputs(smol_base_url, smol_model_id, api,
                                                                             streamed):
    calls: list = []
    result = asyncio.run(run_agent(smol_base_url, smol_model_id, api, streamed, calls))

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
                      model=OpenAIResponsesModel(model_id, client),
                      model_settings=ModelSettings(temperature=0, max_tokens=24))
        first = await Runner.run(agent, "What is the capital of France?")
        second = await Runner.run(agent, "And the capital of Italy?", previous_response_id=first.last_response_id)
        return first, second


def test_an_agents_sdk_conversation_continues_from_the_stored_response(smol_base_url, smol_model_id):
    first, second = asyncio.run(continue_conversation(smol_base_url, smol_model_id))
    assert "paris" in first.final_output.lower(), first.final_output
    assert "rome" in second.final_output.lower(), second.final_output
    # The second turn's prompt holds the first turn, which the prefix cache served.
    usage = second.raw_responses[0].usage
    assert usage.input_tokens > first.raw_responses[0].usage.input_tokens
    assert usage.input_tokens_details.cached_tokens > 0, usage
