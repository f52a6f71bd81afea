"""Small builders shared by the runtime tests: model turns, a probing model double, tools.

``ProbeModel`` is the only hand-written LLM double here. Most tests use the library's
``ScriptedModel``; ``ProbeModel`` exists for the tests that must see inside a model stream:
how far it got, and whether the runtime closed it (its ``finally`` ran).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.messages import AssistantMessage, ToolCall
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.tools.base import tool


def answer(text: str, **fields: Any) -> list[ModelEvent]:
    """A model turn that streams ``text`` in one delta and completes with it."""
    return [
        ModelEvent.text(text),
        ModelEvent.completed(ModelResponse(AssistantMessage(content=text), **fields)),
    ]


def calls(*tool_calls: ToolCall, content: str = "") -> list[ModelEvent]:
    """A model turn that completes with a message requesting ``tool_calls``."""
    message = AssistantMessage(content=content, tool_calls=tool_calls)
    return [ModelEvent.completed(ModelResponse(message, finish_reason="tool_calls"))]


def call(name: str, call_id: str = "call-1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


Turn = list[ModelEvent] | Callable[[ModelRequest], AsyncIterator[ModelEvent]]


class ProbeModel:
    """An LLM double that records requests, events produced and streams closed.

    A turn is a list of ``ModelEvent`` or an async generator function taking the request,
    which lets a test park the stream on an ``asyncio.Event``.
    """

    def __init__(self, *turns: Turn) -> None:
        self._turns = list(turns)
        self.requests: list[ModelRequest] = []
        self.produced = 0
        self.streams_closed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self._turns:
            raise RuntimeError("ProbeModel has no turn left")
        turn = self._turns.pop(0)
        try:
            if callable(turn):
                async with contextlib.aclosing(turn(request)) as events:
                    async for event in events:
                        self.produced += 1
                        yield event
            else:
                for event in turn:
                    self.produced += 1
                    yield event
        finally:
            self.streams_closed += 1


def types(events: list[AgentEvent]) -> list[AgentEventType]:
    return [event.type for event in events]


def without_deltas(events: list[AgentEvent]) -> list[AgentEventType]:
    """Event types with the display-only streaming events removed."""
    streaming = {
        AgentEventType.REASONING_STARTED,
        AgentEventType.REASONING_DELTA,
        AgentEventType.REASONING_COMPLETED,
        AgentEventType.CONTENT_STARTED,
        AgentEventType.TEXT_DELTA,
        AgentEventType.CONTENT_COMPLETED,
        AgentEventType.TOOL_CALL_DELTA,
    }
    return [event.type for event in events if event.type not in streaming]


async def collect(agent: Any, message: Any, **kwargs: Any) -> list[AgentEvent]:
    """Consume one request to the end and return every event it yielded."""
    async with contextlib.aclosing(agent.stream(message, **kwargs)) as stream:
        return [event async for event in stream]


@tool
async def lookup(key: str) -> str:
    """Look up a value by key.

    Args:
        key: The key to look up.

    Snippet:
        lookup(key="colour")

    Guidelines:
        - Use when the answer depends on stored values.
    """
    return f"value of {key}"


async def _nothing() -> None:
    return None


async def let_other_tasks_run(rounds: int = 3) -> None:
    """Suspend so every other ready task gets turns; an ordering tool, not a timed wait."""
    for _ in range(rounds):
        await asyncio.create_task(_nothing())
