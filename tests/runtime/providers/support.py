"""Helpers shared by the provider tests: adapters on the fake server, collecting a stream,
and the agent runs and cancellations that both adapters must go through alike.

The checks here are asserts rewritten by pytest (see ``__init__.py``), so a failing one
explains itself like an assert in the test.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from zett_agent.agent import Agent
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.messages import SystemMessage, UserMessage
from zett_agent.model import AgentModel, ModelEvent, ModelEventType, ModelRequest, StopInfo
from zett_agent.providers.anthropic import AnthropicModel
from zett_agent.providers.base import RetryPolicy
from zett_agent.providers.openai import OpenAIModel
from zett_agent.tools import tool

from . import anthropic_events, openai_chunks
from .fake_server import FakeServer


class RecordedSleep:
    """Stands in for ``asyncio.sleep`` in the retry policy: records the delays, waits none."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Adapters:
    """Builds adapters on the fake server with a test key and the test's retry policy
    (keyword arguments override them), and closes them all in ``aclose``."""

    def __init__(self, server: FakeServer, retry_policy: RetryPolicy) -> None:
        self._server = server
        self._retry_policy = retry_policy
        self._built: list[OpenAIModel | AnthropicModel] = []

    def openai(self, **settings: Any) -> OpenAIModel:
        defaults = {"api_key": "sk-test", "base_url": f"{self._server.url}/v1"}
        model = OpenAIModel(openai_chunks.MODEL, **self._settings(defaults, settings))
        self._built.append(model)
        return model

    def anthropic(self, **settings: Any) -> AnthropicModel:
        defaults = {"api_key": "sk-ant-test", "base_url": self._server.url}
        model = AnthropicModel(anthropic_events.MODEL, **self._settings(defaults, settings))
        self._built.append(model)
        return model

    def _settings(self, defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
        return {**defaults, "retry_policy": self._retry_policy, **overrides}

    async def aclose(self) -> None:
        for model in self._built:
            await model.aclose()


HELLO = ModelRequest(messages=(SystemMessage("Be brief."), UserMessage("Say hello")))


async def collect_into(
    seen: list[ModelEvent], model: AgentModel, request: ModelRequest = HELLO
) -> None:
    """Append every event of one model stream to ``seen``, closing it whatever happens, so a
    test still has the events that came before a failure."""
    async with contextlib.aclosing(model.stream(request)) as stream:
        async for item in stream:
            seen.append(item)


async def collect(model: AgentModel, request: ModelRequest = HELLO) -> list[ModelEvent]:
    """Every event of one model stream, closing it whatever happens."""
    seen: list[ModelEvent] = []
    await collect_into(seen, model, request)
    return seen


def deltas(events: list[ModelEvent], kind: ModelEventType) -> list[str]:
    return [item.delta for item in events if item.type is kind]


async def cancel_reader_at_first_event(model: AgentModel) -> None:
    """Read ``model``'s stream in a task and cancel that task once the first event is in."""
    first_event = asyncio.Event()

    async def read() -> None:
        async with contextlib.aclosing(model.stream(HELLO)) as stream:
            async for _ in stream:
                first_event.set()

    reader = asyncio.create_task(read())
    await asyncio.wait_for(first_event.wait(), timeout=5)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader


@tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city name.

    Guidelines:
        - Use for questions about today's weather.
    """
    return f"Sunny in {city}"


async def agent_events(agent: Agent, text: str) -> list[AgentEvent]:
    """Every event of one agent request."""
    async with contextlib.aclosing(agent.stream(text)) as stream:
        return [item async for item in stream]


async def ask_weather_in_oslo(model: AgentModel, server: FakeServer) -> tuple[Any, Any]:
    """Ask an agent with ``get_weather`` about Oslo, the server having queued a call of the
    tool and then the answer "It is sunny in Oslo."; check that the run went through the
    tool to that answer, and return the bodies of its two requests."""
    agent = await Agent.create(model, system_prompt="Be brief.", tools=[get_weather])

    events = await agent_events(agent, "Weather in Oslo?")

    kinds = [item.type for item in events]
    assert kinds.count(AgentEventType.MODEL_COMPLETED) == 2
    assert AgentEventType.TOOL_COMPLETED in kinds
    assert kinds[-1] is AgentEventType.RUN_COMPLETED
    assert events[-1].message.content == "It is sunny in Oslo."
    first, second = (request.json() for request in server.requests)
    return first, second


async def run_stopped_early(model: AgentModel, server: FakeServer) -> StopInfo:
    """Run an agent over the one queued reply, which stops early; check that the run ends
    with a single MODEL_STOPPED, no MODEL_COMPLETED and no second request, and return the
    stop it reported."""
    agent = await Agent.create(model, tools=[get_weather])

    events = await agent_events(agent, "Tell me a story")

    [stopped] = [item for item in events if item.type is AgentEventType.MODEL_STOPPED]
    assert AgentEventType.MODEL_COMPLETED not in {item.type for item in events}
    assert events[-1].type is AgentEventType.RUN_COMPLETED
    assert len(server.requests) == 1
    return stopped.stop
