"""The runtime never runs more than one event ahead of its consumer (docs/runtime.md, Requests).

This implementation is stricter still: it does no work at all between two events until the
consumer asks for the next one; the last tests pin that down.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.model import ModelEvent

from .support import (
    ProbeModel,
    answer,
    call,
    calls,
    cancel_when,
    close_at,
    counting_tool,
    let_other_tasks_run,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def many_deltas(count: int = 20):
    words = [f"w{i} " for i in range(count)]
    return [ModelEvent.text(word) for word in words] + answer("".join(words))[1:]


async def held_one_by_one(agent: Agent, kind: AgentEventType, check) -> int:
    """Consume a request, giving every other task turns while holding each event; call
    ``check(n)`` after the n-th event of ``kind``. Returns how many such events arrived."""
    received = 0
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            await let_other_tasks_run()
            if event.type is kind:
                received += 1
                check(received)
    return received


async def test_a_slow_consumer_is_never_more_than_one_delta_behind_the_model():
    model = ProbeModel(many_deltas())
    agent = await Agent.create(model, extensions=[])

    def at_most_one_ahead(received: int) -> None:
        assert model.produced <= received + 1

    assert await held_one_by_one(agent, T.TEXT_DELTA, at_most_one_ahead) == 20


async def test_extension_events_wait_for_the_consumer_like_runtime_events():
    emitted: list[int] = []

    class Chatty(AgentExtension):
        async def before_run(self, context):
            for index in range(5):
                emitted.append(index)
                await context.emit(
                    AgentEvent(T.CUSTOM, session_id=context.session_id, name=f"n{index}")
                )

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Chatty()])

    def at_most_one_ahead(received: int) -> None:
        assert len(emitted) <= received + 1

    assert await held_one_by_one(agent, T.CUSTOM, at_most_one_ahead) == 5


async def test_closing_at_the_first_delta_stops_the_model_at_that_boundary():
    model = ProbeModel(many_deltas(1000))
    agent = await Agent.create(model, extensions=[])
    await close_at(agent, "hi", T.TEXT_DELTA, config=CONFIG)
    assert model.produced <= 2
    assert model.streams_closed == 1


async def test_cancelling_a_consumer_that_holds_an_event_stops_the_model_at_that_boundary():
    model = ProbeModel(many_deltas(1000))
    agent = await Agent.create(model, extensions=[])
    holding = asyncio.Event()

    async def consumer():
        async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
            async for event in events:
                if event.type is T.TEXT_DELTA:
                    holding.set()
                    await asyncio.Event().wait()

    await cancel_when(holding, consumer())
    assert model.produced <= 2
    assert model.streams_closed == 1


async def test_the_runtime_does_no_work_while_the_consumer_holds_an_event():
    model = ProbeModel(many_deltas())
    agent = await Agent.create(model, extensions=[])

    def nothing_ahead(received: int) -> None:
        assert model.produced == received

    assert await held_one_by_one(agent, T.TEXT_DELTA, nothing_ahead) == 20


@pytest.mark.parametrize(
    "held",
    [T.MODEL_COMPLETED, T.TOOL_STARTED],
    ids=["the model result", "tool started"],
)
async def test_the_tool_does_not_start_while_the_consumer_holds(held):
    ran: list[int] = []
    agent = await Agent.create(
        ProbeModel(calls(call("count")), answer("ok")), tools=[counting_tool(ran)], extensions=[]
    )
    tool_completed = False
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            if event.type is held and not tool_completed:
                await let_other_tasks_run()
                assert ran == []
            if event.type is T.TOOL_COMPLETED:
                tool_completed = True
                assert ran == [0]
    assert ran == [0]


async def test_no_task_is_created_to_run_a_request():
    tasks_seen: list[asyncio.Task | None] = []

    class Spy(AgentExtension):
        async def before_run(self, context):
            tasks_seen.append(asyncio.current_task())

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Spy()])
    consumer_task = asyncio.current_task()
    await agent.run("hi", config=CONFIG)
    assert tasks_seen == [consumer_task]
