"""LLM doubles for the app tests: the only test doubles the app suite uses.

The app resolves its model from ``settings.ZETT_MODEL`` when a session's first request
builds its agent. Tests point it at ``model_from_settings`` (``use_model`` in conftest does)
and put the model object itself in ``settings.ZETT_TEST_MODEL``, so each test scripts its
own model without module globals.

``GatedModel`` is for the tests that must see inside a stream: it can park a turn on an
``asyncio.Event`` and it records when the runtime closed its stream. ``EndlessModel`` never
waits at all, like a model whose answer is already buffered, and never ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from django.conf import settings

from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, content_text
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse
from zett_agent.testing import ScriptedModel

#: The ``ZETT_MODEL`` import string of the seam below.
SEAM = "tests.app.llm_doubles:model_from_settings"


def model_from_settings():
    """The ``ZETT_MODEL`` factory of the tests: whatever the test put in the settings."""
    return settings.ZETT_TEST_MODEL


def say(text: str) -> AssistantMessage:
    """A scripted final answer."""
    return AssistantMessage(content=text)


def call_tool(name: str, call_id: str = "call-1", **arguments) -> AssistantMessage:
    """A scripted turn that requests one tool call."""
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


Step = ModelEvent | asyncio.Event


class GatedModel:
    """Streams scripted steps; an ``asyncio.Event`` step parks the stream until it is set."""

    def __init__(self, *turns: Sequence[Step]) -> None:
        self.turns = [list(turn) for turn in turns]
        self.requests: list[ModelRequest] = []
        #: Set when a stream starts (the run reached the model).
        self.started = asyncio.Event()
        #: Set when the runtime closed (or finished) a stream: its ``finally`` ran.
        self.closed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        steps = self.turns.pop(0)
        self.started.set()
        try:
            for step in steps:
                if isinstance(step, asyncio.Event):
                    await step.wait()
                else:
                    yield step
        finally:
            self.closed.set()


class EndlessModel:
    """Streams text deltas forever and never waits: only cancellation ends its stream."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            while True:
                yield ModelEvent.text("x")
        finally:
            self.closed.set()


def completed(text: str) -> ModelEvent:
    return ModelEvent.completed(ModelResponse(AssistantMessage(content=text)))


class SteppedModel:
    """Streams ``words`` as text deltas, one each time the test calls ``step()``.

    A test holds the run at any point of its stream (to drop and reopen sockets there)
    without waiting for time to pass: each delta is released by an explicit step.
    """

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        self._released = asyncio.Semaphore(0)
        self.closed = asyncio.Event()

    def step(self, count: int = 1) -> None:
        for _ in range(count):
            self._released.release()

    def finish(self) -> None:
        self.step(len(self.words) + 1)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            for word in self.words:
                await self._released.acquire()
                yield ModelEvent.text(word)
            await self._released.acquire()
            yield completed("".join(self.words))
        finally:
            self.closed.set()


class KeywordModel:
    """Answers by keyword, for any number of sessions and requests (the hostile suite).

    After a tool result it answers ``Done.``; a user message containing ``ask`` makes it
    call ``ask_user`` (call id ``ask-1``), ``note`` makes it call ``save_note`` (``note-1``,
    which waits for an approval), ``fail`` makes the model raise, ``long`` streams a long
    answer (a socket can close in the middle of it); anything else gets a short answer.
    So generated frames meet runs that stream, wait for replies and fail.
    """

    def __init__(self) -> None:
        self.script = ScriptedModel()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            message = say("Done.")
        else:
            text = content_text(last.content).lower()
            if "fail" in text:
                raise RuntimeError("the scripted model failed, as asked")
            if "ask" in text:
                message = call_tool("ask_user", "ask-1", question="Which one?", options=["a", "b"])
            elif "long" in text:
                message = say(" ".join(["word"] * 5000))
            elif "note" in text:
                message = call_tool("save_note", "note-1", title="Hostile", text=text[:200])
            else:
                message = say("A short answer.")
        for event in self.script.events_for(message):
            yield event
