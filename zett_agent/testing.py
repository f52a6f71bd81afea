"""``ScriptedModel``: a deterministic model for tests, shipped with the library.

Give it the turns the model should take, in order. A turn is an ``AssistantMessage``
(streamed as word-by-word reasoning and text deltas, then ``completed``), a list of
``ModelEvent``\\ s (replayed exactly, for invalid streams too), or a callable
``(request) -> either`` to answer from what the agent sent. Every request is recorded in
``.requests``. Running out of turns raises a ``RuntimeError`` that says how many were used.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TypeAlias

from zett_agent.messages import AssistantMessage
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ToolCallDelta,
)

__all__ = ["ScriptedModel", "ScriptedTurn"]

ScriptedTurn: TypeAlias = (
    AssistantMessage
    | list[ModelEvent]
    | Callable[[ModelRequest], "AssistantMessage | list[ModelEvent]"]
)

_WORD = re.compile(r"\S+\s*|\s+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


class ScriptedModel:
    """A model that replays scripted turns and records what it was asked."""

    __test__ = False  # not a pytest test class

    def __init__(self, turns: Iterable[ScriptedTurn] = (), *, usage: ModelUsage | None = None):
        self.turns: list[ScriptedTurn] = list(turns)
        self.requests: list[ModelRequest] = []
        self.usage = usage or ModelUsage()
        self._next = 0

    @property
    def remaining(self) -> int:
        """How many scripted turns are left."""
        return len(self.turns) - self._next

    def add(self, *turns: ScriptedTurn) -> None:
        """Append more turns to the script."""
        self.turns.extend(turns)

    def events_for(self, message: AssistantMessage) -> list[ModelEvent]:
        """The stream a real model would produce for ``message``."""
        events = [ModelEvent.reasoning(word) for word in _words(message.reasoning or "")]
        events += [ModelEvent.text(word) for word in _words(message.content)]
        for index, call in enumerate(message.tool_calls):
            arguments = json.dumps(call.arguments, separators=(",", ":"))
            events.append(ModelEvent.tool_call(ToolCallDelta(index, call.id, call.name, arguments)))
        finish = "tool_calls" if message.tool_calls else "stop"
        events.append(ModelEvent.completed(ModelResponse(message, finish, self.usage)))
        return events

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if self._next >= len(self.turns):
            raise RuntimeError(
                f"ScriptedModel ran out of turns: all {len(self.turns)} were used and the "
                f"agent asked for call #{len(self.requests)}"
            )
        turn = self.turns[self._next]
        self._next += 1
        if callable(turn) and not isinstance(turn, AssistantMessage | list):
            turn = turn(request)
        if isinstance(turn, AssistantMessage):
            events = self.events_for(turn)
        elif isinstance(turn, list):
            events = turn
        else:
            raise TypeError(
                f"A scripted turn must be an AssistantMessage or a list of ModelEvent, got {turn!r}"
            )
        for event in events:
            yield event
