"""Deltas read by the driver's shortcut behave as deltas read by the request itself.

Once a text or reasoning segment is open, its further deltas are read by a generator the
driver steps directly (``zett_agent._driver``, ``Shortcut``). These tests take the stream
through every way out of it: other items, waits and bare yields, errors, closing,
cancellation, foreign events and a wrapping ``on_model_request`` layer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AssistantMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse

from .support import Observer, ProbeModel, answer, cancel_when, close_at, collect

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def done(text: str) -> ModelEvent:
    return ModelEvent.completed(ModelResponse(AssistantMessage(content=text)))


async def test_text_around_waits_reasoning_and_bare_yields_keeps_its_order():
    gate = asyncio.Event()

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("a")
        yield ModelEvent.text("")
        asyncio.get_running_loop().call_soon(gate.set)
        await gate.wait()  # a real wait in the middle of the text
        yield ModelEvent.text("b")
        await asyncio.sleep(0)  # a bare yield
        yield ModelEvent.text("c")
        yield ModelEvent.reasoning("r")
        await asyncio.sleep(0)
        yield ModelEvent.reasoning("s")
        yield ModelEvent.reasoning("t")
        yield ModelEvent.text("d")
        yield done("abcd")

    agent = await Agent.create(ProbeModel(turn), extensions=[])
    events = await collect(agent, "hi", config=CONFIG)
    shown = [(event.type, event.delta) for event in events if event.type.value.endswith("delta")]
    assert shown == [
        (T.TEXT_DELTA, "a"),
        (T.TEXT_DELTA, ""),
        (T.TEXT_DELTA, "b"),
        (T.TEXT_DELTA, "c"),
        (T.REASONING_DELTA, "r"),
        (T.REASONING_DELTA, "s"),
        (T.REASONING_DELTA, "t"),
        (T.TEXT_DELTA, "d"),
    ]
    kinds = [event.type for event in events if not event.type.value.endswith("delta")]
    assert kinds == [
        T.MODEL_STARTED,
        T.CONTENT_STARTED,
        T.CONTENT_COMPLETED,
        T.REASONING_STARTED,
        T.REASONING_COMPLETED,
        T.CONTENT_STARTED,
        T.CONTENT_COMPLETED,
        T.MODEL_COMPLETED,
        T.RUN_COMPLETED,
    ]
    assert all(event.phase.value == "generating" for event in events if event.delta)


async def test_an_error_in_the_middle_of_the_text_reaches_the_caller_as_raised():
    boom = ValueError("boom")

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for word in ("a", "b", "c"):
            yield ModelEvent.text(word)
        raise boom

    model = ProbeModel(turn, answer("again"))
    agent = await Agent.create(model, extensions=[])
    with pytest.raises(ValueError) as raised:
        await collect(agent, "hi", config=CONFIG)
    assert raised.value is boom
    assert model.streams_closed == 1
    events = await collect(agent, "hi", config=CONFIG)  # the session was released
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_stream_that_ends_without_completing_fails_the_request():
    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("a")
        yield ModelEvent.text("b")

    agent = await Agent.create(ProbeModel(turn), extensions=[])
    with pytest.raises(Exception, match="ended without a response"):
        await collect(agent, "hi", config=CONFIG)


async def test_closing_the_stream_in_the_middle_of_the_text_closes_the_model_stream():
    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for word in ("a", "b", "c", "d"):
            yield ModelEvent.text(word)
        yield done("abcd")

    model, watch = ProbeModel(turn, answer("again")), Observer()
    agent = await Agent.create(model, extensions=[watch])
    received = await close_at(agent, "hi", T.TEXT_DELTA, config=CONFIG)
    assert received[-1].delta == "a"
    assert model.streams_closed == 1
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.GENERATING]
    assert watch.errors == []
    events = await collect(agent, "hi", config=CONFIG)
    assert events[-1].type is T.RUN_COMPLETED


async def test_closing_after_several_deltas_closes_the_model_stream():
    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for word in ("a", "b", "c", "d"):
            yield ModelEvent.text(word)
        yield done("abcd")

    model, watch = ProbeModel(turn), Observer()
    agent = await Agent.create(model, extensions=[watch])
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as stream:
        async for event in stream:
            if event.delta == "c":
                break
    assert model.streams_closed == 1
    assert model.produced == 3
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.GENERATING]
    assert watch.errors == []


async def test_cancelling_while_the_model_waits_in_the_middle_of_the_text():
    reached, closed = asyncio.Event(), []

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("a")
        yield ModelEvent.text("b")
        reached.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            closed.append("cancelled at its wait")
            raise
        yield done("ab")

    model, watch = ProbeModel(turn), Observer()
    agent = await Agent.create(model, extensions=[watch])
    await cancel_when(reached, collect(agent, "hi", config=CONFIG))
    assert closed == ["cancelled at its wait"]
    assert model.streams_closed == 1
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.GENERATING]
    assert watch.errors == []


class ReportingLayer(AgentExtension):
    """Wraps the model stream; while it streams, a task of its own reports progress."""

    name = "reporting"

    def __init__(self) -> None:
        super().__init__()
        self.reported = asyncio.Event()

    async def on_model_request(self, context, request, call_next):
        async def report() -> None:
            await context.emit(AgentEvent(T.CUSTOM, context.session_id, name="progress"))
            self.reported.set()

        async with contextlib.aclosing(call_next(request)) as stream:
            async for event in stream:
                if event.delta == "b":
                    task = asyncio.get_running_loop().create_task(report())
                yield event
        await task


async def test_a_foreign_event_while_the_text_streams_is_handed_over_in_between():
    layer = ReportingLayer()

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("a")
        yield ModelEvent.text("b")
        await layer.reported.wait()  # the progress is taken before the text goes on
        yield ModelEvent.text("c")
        yield done("abc")

    agent = await Agent.create(ProbeModel(turn), extensions=[layer])
    events = await collect(agent, "hi", config=CONFIG)
    shown = [event.delta or event.name or event.type.value for event in events]
    assert shown.index("b") < shown.index("progress") < shown.index("c")
    assert shown[-1] == "run_completed"


class Items:
    """A model stream that is no async generator: ``__anext__`` returns a coroutine."""

    def __init__(self, events: list[ModelEvent]) -> None:
        self._events = list(events)
        self.closed = False

    def __aiter__(self) -> Items:
        return self

    async def __anext__(self) -> ModelEvent:
        await asyncio.sleep(0)
        if not self._events:
            raise StopAsyncIteration
        return self._events.pop(0)

    async def aclose(self) -> None:
        self.closed = True


class IteratorModel:
    def __init__(self, events: list[ModelEvent]) -> None:
        self.items = Items(events)

    def stream(self, request: ModelRequest) -> Items:
        return self.items


async def test_a_stream_that_is_no_async_generator_is_read_through_its_awaitables():
    model = IteratorModel([ModelEvent.text(word) for word in ("a", "b", "c")] + [done("abc")])
    agent = await Agent.create(model, extensions=[])
    events = await collect(agent, "hi", config=CONFIG)
    assert [event.delta for event in events if event.type is T.TEXT_DELTA] == ["a", "b", "c"]
    assert events[-1].type is T.RUN_COMPLETED
    assert model.items.closed
