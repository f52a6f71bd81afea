"""Helpers shared by the provider tests: collecting a stream, and a tool for agent runs."""

from __future__ import annotations

import contextlib

from zett_agent.agent import Agent
from zett_agent.events import AgentEvent
from zett_agent.messages import SystemMessage, UserMessage
from zett_agent.model import AgentModel, ModelEvent, ModelEventType, ModelRequest
from zett_agent.tools import tool


class RecordedSleep:
    """Stands in for ``asyncio.sleep`` in the retry policy: records the delays, waits none."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


HELLO = ModelRequest(messages=(SystemMessage("Be brief."), UserMessage("Say hello")))


async def collect(model: AgentModel, request: ModelRequest = HELLO) -> list[ModelEvent]:
    """Every event of one model stream, closing it whatever happens."""
    async with contextlib.aclosing(model.stream(request)) as stream:
        return [item async for item in stream]


def deltas(events: list[ModelEvent], kind: ModelEventType) -> list[str]:
    return [item.delta for item in events if item.type is kind]


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
