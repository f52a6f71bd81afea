"""Closing the stream or cancelling its consumer cancels the request (docs/runtime.md, Requests;
docs/runtime.md, Hooks).

Cancellation publishes ``RunCancelledEvent``, closes unanswered tool calls with unsuccessful
ToolMessages, never calls ``on_error``, lets ``CancelledError`` propagate and leaves the
session free for the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AssistantMessage, ToolMessage
from zett_agent.model import ModelEvent
from zett_agent.tools.base import tool

from .support import (
    Observer,
    ProbeModel,
    answer,
    call,
    calls,
    cancel_when,
    close_at,
    collect,
    lookup,
    parked_tool,
    parked_turn,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
CANCELLED_TEXT = "Request cancelled before tool completion"


def endless_text(deltas: int = 1000):
    return [ModelEvent.text(f"w{i} ") for i in range(deltas)] + answer("never reached")


async def test_closing_the_iterator_mid_stream_cancels_the_request_and_closes_the_model():
    watch = Observer()
    model = ProbeModel(endless_text())
    agent = await Agent.create(model, extensions=[watch])
    await close_at(agent, "hi", T.TEXT_DELTA, config=CONFIG)
    assert model.streams_closed == 1
    assert model.produced <= 2
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.GENERATING]
    assert watch.phases[-1] is AgentPhase.CANCELLED
    assert watch.errors == []
    assert watch.ended == []


async def test_cancelling_the_consumer_while_the_model_waits_propagates_cancelled_error():
    reached, released = asyncio.Event(), asyncio.Event()
    watch = Observer()
    model = ProbeModel(parked_turn(reached, released))
    agent = await Agent.create(model, extensions=[watch])
    received: list = []

    async def consume():
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                received.append(event)

    await cancel_when(reached, consume())
    assert model.streams_closed == 1
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.GENERATING]
    assert watch.errors == []
    assert T.TEXT_DELTA in [e.type for e in received]
    assert T.RUN_COMPLETED not in [e.type for e in received]


async def test_cancelling_a_consumer_that_holds_an_event_cancels_the_request():
    holding = asyncio.Event()
    watch = Observer()
    model = ProbeModel(endless_text())
    agent = await Agent.create(model, extensions=[watch])

    async def slow_consumer():
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                if event.type is T.TEXT_DELTA:
                    holding.set()
                    await asyncio.Event().wait()  # the UI is busy; the user hits stop

    await cancel_when(holding, slow_consumer())
    assert model.streams_closed == 1
    assert len(watch.cancelled) == 1
    assert watch.errors == []


async def test_cancelling_during_a_tool_cancels_the_tool_and_closes_its_call():
    started, outcome = asyncio.Event(), []
    watch = Observer()
    model = ProbeModel(calls(call("slow", "c1")), answer("never"))
    agent = await Agent.create(
        model, tools=[parked_tool(started, cancelled=outcome)], extensions=[watch]
    )
    await cancel_when(started, collect(agent, "hi", config=CONFIG))
    assert outcome == ["x cancelled"]
    assert [(m.tool_call_id, m.name, m.success, m.content) for m in watch.tool_messages] == [
        ("c1", "slow", False, CANCELLED_TEXT)
    ]
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.RUNNING_TOOL]
    assert watch.errors == []
    assert watch.ended == []
    assert len(model.requests) == 1


async def test_every_unanswered_call_of_the_batch_is_closed_in_model_order():
    started, outcome = asyncio.Event(), []
    watch = Observer()
    batch = calls(
        call("lookup", "c1", key="k"),
        call("slow", "c2", label="second"),
        call("lookup", "c3", key="never"),
    )
    agent = await Agent.create(
        ProbeModel(batch, answer("never")),
        tools=[lookup, parked_tool(started, cancelled=outcome)],
        extensions=[watch],
    )
    await cancel_when(started, collect(agent, "hi", config=CONFIG))
    assert outcome == ["second cancelled"]
    assert [(m.tool_call_id, m.success, m.content) for m in watch.tool_messages] == [
        ("c1", True, "value of k"),
        ("c2", False, CANCELLED_TEXT),
        ("c3", False, CANCELLED_TEXT),
    ]


async def test_closing_between_a_tool_result_and_the_next_turn_makes_no_further_model_call():
    watch = Observer()
    model = ProbeModel(calls(call("lookup", "c1", key="k")), answer("never"))
    agent = await Agent.create(model, tools=[lookup], extensions=[watch])
    await close_at(agent, "hi", T.TOOL_COMPLETED, config=CONFIG)
    assert len(model.requests) == 1
    assert len(watch.cancelled) == 1
    assert [m.tool_call_id for m in watch.tool_messages] == ["c1"]
    assert watch.ended == []


async def test_cancelling_a_sync_tool_in_a_worker_thread_still_closes_its_call():
    release = threading.Event()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    @tool
    def blocking() -> str:
        """Block a worker thread.

        Guidelines:
            - Use in tests.
        """
        loop.call_soon_threadsafe(started.set)
        release.wait()
        return "finished"

    watch = Observer()
    agent = await Agent.create(
        ProbeModel(calls(call("blocking", "c1")), answer("never")),
        tools=[blocking],
        extensions=[watch],
    )
    try:
        await cancel_when(started, collect(agent, "hi", config=CONFIG))
    finally:
        release.set()
    assert [(m.tool_call_id, m.content) for m in watch.tool_messages] == [("c1", CANCELLED_TEXT)]


async def test_cancelling_during_a_hook_cancels_the_request_without_on_error():
    in_hook = asyncio.Event()

    class Slow(AgentExtension):
        async def before_run(self, context):
            in_hook.set()
            await asyncio.Event().wait()

    watch = Observer()
    model = ProbeModel(answer("never"))
    agent = await Agent.create(model, extensions=[Slow(), watch])
    await cancel_when(in_hook, collect(agent, "hi", config=CONFIG))
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.READY]
    assert watch.errors == []
    assert model.requests == []


async def test_a_cancelled_session_accepts_the_next_request_with_a_consistent_history():
    started = asyncio.Event()
    model = ProbeModel(calls(call("slow", "c1")), answer("fresh start"))
    agent = await Agent.create(model, tools=[parked_tool(started)])
    await cancel_when(started, collect(agent, "hi", config=CONFIG))
    assert agent.is_conflict("s") is False
    assert agent.pending is False
    assert agent.get_state("s").phase is AgentPhase.CANCELLED
    result = await agent.run("try again", config=CONFIG)
    assert result.content == "fresh start"
    history = model.requests[1].messages
    calling = next(
        i for i, m in enumerate(history) if isinstance(m, AssistantMessage) and m.tool_calls
    )
    closing = history[calling + 1]
    assert isinstance(closing, ToolMessage)
    assert (closing.tool_call_id, closing.success, closing.content) == (
        "c1",
        False,
        CANCELLED_TEXT,
    )


async def test_cancellation_is_not_reported_as_a_failure_even_by_run():
    reached, released = asyncio.Event(), asyncio.Event()
    watch = Observer()
    agent = await Agent.create(ProbeModel(parked_turn(reached, released)), extensions=[watch])
    await cancel_when(reached, agent.run("hi", config=CONFIG))
    assert watch.errors == []
    assert len(watch.cancelled) == 1


async def test_closing_at_a_tool_calling_answer_closes_every_call_it_requested():
    watch = Observer()
    batch = calls(call("lookup", "c1", key="a"), call("lookup", "c2", key="b"))
    agent = await Agent.create(ProbeModel(batch), tools=[lookup], extensions=[watch])
    await close_at(agent, "hi", T.MODEL_COMPLETED, config=CONFIG)
    assert [(m.tool_call_id, m.success, m.content) for m in watch.tool_messages] == [
        ("c1", False, CANCELLED_TEXT),
        ("c2", False, CANCELLED_TEXT),
    ]
    assert [e.previous_phase for e in watch.cancelled] == [AgentPhase.READY]


async def test_an_error_in_the_consumer_propagates_unchanged_and_cancels_the_request():
    watch = Observer()
    model = ProbeModel(endless_text())
    agent = await Agent.create(model, extensions=[watch])
    ui_error = ValueError("the UI could not render")
    with pytest.raises(ValueError) as caught:
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                if event.type is T.TEXT_DELTA:
                    raise ui_error
    assert caught.value is ui_error
    assert model.streams_closed == 1
    assert len(watch.cancelled) == 1
    assert watch.errors == []
    assert agent.is_conflict("s") is False


async def test_a_stream_closed_before_its_first_event_runs_nothing():
    watch = Observer()
    model = ProbeModel(answer("never"))
    agent = await Agent.create(model, extensions=[watch])
    stream = agent.stream("hi", config=CONFIG)
    await stream.aclose()
    assert model.requests == []
    assert watch.phases == []
    assert agent.is_conflict("s") is False
    assert (await agent.run("now", config=CONFIG)).content == "never"


@pytest.mark.parametrize("stop", ["break", "aclose"])
async def test_stopping_at_run_completed_leaves_the_request_completed(stop):
    watch = Observer()
    agent = await Agent.create(ProbeModel(answer("done")), extensions=[watch])
    stream = agent.stream("hi", config=CONFIG)
    async for event in stream:
        if event.type is T.RUN_COMPLETED:
            if stop == "aclose":
                await stream.aclose()
            break
    await stream.aclose()
    assert watch.phases[-1] is AgentPhase.COMPLETED
    assert watch.cancelled == []
    assert watch.ended == ["after_turn", "after_run", "on_success"]
    assert agent.get_state("s").phase is AgentPhase.COMPLETED
    assert agent.is_conflict("s") is False


async def test_the_session_is_free_while_the_consumer_still_holds_run_completed():
    reached, release = asyncio.Event(), asyncio.Event()
    watch = Observer()
    model = ProbeModel(answer("first"), answer("second"), parked_turn(reached, release))
    agent = await Agent.create(model, extensions=[watch])
    held = agent.stream("hi", config=CONFIG)
    async for event in held:
        if event.type is T.RUN_COMPLETED:
            break  # `held` is still referenced: neither closed nor finalized
    assert agent.pending is False
    assert agent.is_conflict("s") is False
    assert watch.pending is False
    assert (await agent.run("again", config=CONFIG)).content == "second"
    await held.aclose()  # closing the old iterator now disturbs nothing
    assert watch.cancelled == []
    assert [m.content for m in agent.get_state("s").messages][-2:] == ["again", "second"]
    third = asyncio.create_task(agent.run("third", config=CONFIG))
    await reached.wait()
    assert watch.pending is True  # the extension's request count did not drift
    assert agent.is_conflict("s") is True
    release.set()
    assert (await third).content == "late"
    assert watch.pending is False


async def test_an_error_on_the_move_into_completed_fails_the_request_but_never_leaves_completed():
    class FailsOnCompleted(Observer):
        async def on_event(self, context, event):
            await super().on_event(context, event)
            if getattr(event, "current_phase", None) is AgentPhase.COMPLETED:
                raise OSError("could not record the completion")

    watch = FailsOnCompleted()
    agent = await Agent.create(ProbeModel(answer("done")), extensions=[watch])
    events = []
    with pytest.raises(OSError, match="could not record"):
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as stream:
            async for event in stream:
                events.append(event)
    assert T.RUN_COMPLETED not in [e.type for e in events]
    assert [type(e) for e in watch.errors] == [OSError]
    assert watch.phases[-1] is AgentPhase.COMPLETED
    assert agent.get_state("s").phase is AgentPhase.COMPLETED
    assert watch.cancelled == []
