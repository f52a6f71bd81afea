"""``ScriptModel``: the model of a host project's tests, told what to do turn by turn.

Each model call takes the next turn of the script: ``call("tool", **arguments)`` asks for one
tool call, a list of calls asks for them together (the runtime runs them in parallel), and
``text("…")`` answers. Or the whole script is a function ``(messages, tools) -> turn``
that decides from the conversation so far and the tools the assistant was offered.

It streams like a real model (the text word by word, each call's arguments as a
fragment), reports token usage, and records every request it was sent (``requests``). A
call past the end of the script raises ``ScriptExhausted``, an ``AssertionError``: the
run fails, and the kit's ``ChatClient`` raises it in the test that sent the message, with
the script's length and the message the model was asked to answer.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from zett_agent.messages import AnyMessage, AssistantMessage, ToolCall, content_text
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, ModelUsage, ToolDefinition
from zett_agent.testing import ScriptedModel

__all__ = ["Call", "ScriptExhausted", "ScriptModel", "Text", "Turn", "call", "text"]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call the model asks for (build it with ``call``)."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: The call's id; None: a fresh ``call_<hex>`` each time the turn is played.
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Text:
    """A final answer (build it with ``text``)."""

    content: str


Turn: TypeAlias = Call | Text | Sequence[Call]
Script: TypeAlias = Callable[[list[AnyMessage], list[ToolDefinition]], Turn]


def call(tool: str, /, **arguments: Any) -> Call:
    """A turn in which the model calls ``tool`` with ``arguments``."""
    if not isinstance(tool, str) or not tool.strip():
        raise ValueError(f"call() needs a tool name, got {tool!r}")
    return Call(tool, dict(arguments))


def text(content: str) -> Text:
    """A turn in which the model answers ``content``."""
    if not isinstance(content, str):
        raise TypeError(f"text() needs a string, got {type(content).__name__}")
    return Text(content)


class ScriptExhausted(AssertionError):
    """The model was called more times than its script has turns."""


def _message_of(turn: Any) -> AssistantMessage:
    """The assistant message a turn stands for; a ``TypeError`` naming what was given."""
    if isinstance(turn, Text):
        return AssistantMessage(content=turn.content)
    calls = [turn] if isinstance(turn, Call) else turn
    if isinstance(calls, list | tuple) and calls and all(isinstance(item, Call) for item in calls):
        return AssistantMessage(
            tool_calls=tuple(
                ToolCall(item.id or f"call_{uuid.uuid4().hex[:16]}", item.tool, item.arguments)
                for item in calls
            )
        )
    raise TypeError(
        f"A ScriptModel turn is call(...), a non-empty list of call(...) or text(...); got {turn!r}"
    )


def _tokens(characters: int) -> int:
    """A rough token count (four characters a token), at least one."""
    return max(1, characters // 4)


def _usage(request: ModelRequest, message: AssistantMessage) -> ModelUsage:
    asked = sum(len(content_text(m.content)) for m in request.messages if hasattr(m, "content"))
    said = len(message.content) + sum(
        len(str(c.arguments)) + len(c.name) for c in message.tool_calls
    )
    return ModelUsage(input_tokens=_tokens(asked), output_tokens=_tokens(said))


def _last_words(request: ModelRequest) -> str:
    """What the model was last asked, for an error message."""
    if not request.messages:
        return "nothing"
    last = request.messages[-1]
    said = content_text(getattr(last, "content", "")) or "(no text)"
    if len(said) > 200:
        said = said[:200] + "…"
    return f"a {type(last).__name__} {said!r}"


class ScriptModel:
    """An offline ``AgentModel`` playing a script: one turn a model call."""

    __test__ = False  # not a pytest test class

    def __init__(self, turns: Sequence[Turn | Script] | Script = ()) -> None:
        self.function: Script | None = None
        self.turns: list[Turn | Script] = []
        if callable(turns) and not isinstance(turns, Call | Text | list | tuple):
            self.function = turns
        elif isinstance(turns, list | tuple):
            self.turns = list(turns)
            for turn in self.turns:
                if not callable(turn):
                    _message_of(turn)  # a bad turn fails here, not in the middle of a run
        else:
            raise TypeError(
                f"ScriptModel takes a list of turns or a function (messages, tools) -> turn, "
                f"got {turns!r}"
            )
        #: Every request the model was sent, in order.
        self.requests: list[ModelRequest] = []
        self._played = itertools.count()
        self._stream = ScriptedModel()

    @property
    def calls(self) -> int:
        """How many times the model was called."""
        return len(self.requests)

    def _turn(self, request: ModelRequest, number: int) -> AssistantMessage:
        if self.function is not None:
            return _message_of(self.function(list(request.messages), list(request.tools)))
        if number >= len(self.turns):
            raise ScriptExhausted(
                f"ScriptModel was called {number + 1} times but its script has "
                f"{len(self.turns)} turn(s); call {number + 1} was to answer "
                f"{_last_words(request)}. Add a turn (text(...) ends a run)."
            )
        turn = self.turns[number]
        if callable(turn) and not isinstance(turn, Call | Text | list | tuple):
            turn = turn(list(request.messages), list(request.tools))
        return _message_of(turn)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        message = self._turn(request, next(self._played))
        events = self._stream.events_for(message)
        finish = "tool_calls" if message.tool_calls else "stop"
        events[-1] = ModelEvent.completed(ModelResponse(message, finish, _usage(request, message)))
        for event in events:
            yield event

    def __repr__(self) -> str:
        if self.function is not None:
            return f"ScriptModel({getattr(self.function, '__name__', self.function)!r})"
        return f"ScriptModel({len(self.turns)} turns, {self.calls} played)"
