"""langchain-openai, instructor and pydantic-ai, from PyPI, against the real default model
(SmolLM2-135M-Instruct): each gives back what it promises its users.

- langchain-openai: ChatOpenAI.bind_tools gives a tool call with parsed args; with_structured_output
  gives a pydantic instance (methods json_schema and function_calling).
- instructor and pydantic-ai: a typed result, under a forced tool and under a json_schema format.

Every request runs at temperature 0 under the server's constrained decoding (a forced tool, a
json_schema), so what a 135M model writes is valid by construction and the same each run. The
schema holds strings and a boolean only: under a `number` this model writes digits until its token
limit. All requests name the model the server reports at /v1/models.
"""

from __future__ import annotations

import instructor
import pydantic
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from strata_server import openai_client

pytestmark = pytest.mark.timeout(300)

WEATHER = "Sunny, 21 C in {city}."
CITY_QUESTION = "Describe Paris: its name, its country, and whether it is a capital."


class City(pydantic.BaseModel):
    name: str
    country: str
    is_capital: bool


def assert_city(c) -> None:
    assert isinstance(c, City), c
    assert c.name and c.country and isinstance(c.is_capital, bool), c


# langchain-openai

@tool
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return WEATHER.format(city=city)


@pytest.fixture(scope="module")
def chat_model(smol_base_url, smol_model_id):
    return ChatOpenAI(model=smol_model_id, base_url=smol_base_url, api_key="unused", temperature=0, max_tokens=64,
                      max_retries=0, http_socket_options=())


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
def test_instructor_gives_a_typed_result(smol_server, smol_model_id, mode):
    with openai_client(smol_server) as c:
        client = instructor.from_openai(c, mode=mode)
        city = client.chat.completions.create(model=smol_model_id, response_model=City, max_retries=0, temperature=0,
                                              max_tokens=80, messages=[{"role": "user", "content": CITY_QUESTION}])
    assert_city(city)


# pydantic-ai

@pytest.mark.parametrize("api,output", [("chat", "tool"), ("responses", "native")])
def test_pydantic_ai_gives_a_typed_result(smol_base_url, smol_model_id, api, output):
    provider = OpenAIProvider(base_url=smol_base_url, api_key="unused")
    model = (OpenAIChatModel if api == "chat" else OpenAIResponsesModel)(smol_model_id, provider=provider)
    # "tool": the answer is a call of the output tool that pydantic-ai declares (tool_choice
    # required); "native": a json_schema text format.
    agent = Agent(model, output_type=City if output == "tool" else NativeOutput(City),
                  model_settings=ModelSettings(temperature=0, max_tokens=80))
    assert_city(agent.run_sync(CITY_QUESTION).output)
