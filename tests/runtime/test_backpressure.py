"""The runtime never runs more than one event ahead of its consumer (SPEC A5).

This implementation is stricter still: it does no work at all between two events until the
consumer asks for the next one; the last tests pin that down.
"""

from __future__ import annotations

import asyncio
import contextlib

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.model import ModelEvent
from zett_agent.tools.base import tool

from .support import ProbeModel, answer, call, calls, let_other_tasks_run

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def many_deltas(count: int = 20):
    words = [f"w{i} " for i in range(count)]
    return [ModelEvent.text(word) for word in words] + answer("".join(words))[1:]


def recording_tool(log: list[str]):
    @tool
    async def work() -> str:
        """Do some work.

        Guidelines:
            - Use in tests.
        """
        log.append("handler ran")
        return "worked"

    return work


async def test_a_slow_consumer_is_never_more_than_one_delta_behind_the_model():
    model = ProbeModel(many_deltas())
    agent = await Agent.create(model, extensions=[])
    received = 0
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            await let_other_tasks_run()
            if event.type is T.TEXT_DELTA:
                received += 1
                assert model.produced <= received + 1
    assert received == 20


async def test_the_tool_does_not_start_while_the_consumer_holds_the_model_result():
    log: list[str] = []
    agent = await Agent.create(
        ProbeModel(calls(call("work")), answer("ok")), tools=[recording_tool(log)], extensions=[]
    )
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            if event.type is T.MODEL_COMPLETED and event.response.message.tool_calls:
                await let_other_tasks_run()
                assert log == []
    assert log == ["handler ran"]


async def test_closing_at_the_first_delta_stops_the_model_at_that_boundary():
    model = ProbeModel(many_deltas(1000))
    agent = await Agent.create(model, extensions=[])
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            if event.type is T.TEXT_DELTA:
                break
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

    task = asyncio.create_task(consumer())
    await holding.wait()
    await let_other_tasks_run()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert model.produced <= 2
    assert model.streams_closed == 1


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
    received = 0
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            await let_other_tasks_run()
            if event.type is T.CUSTOM:
                received += 1
                assert len(emitted) <= received + 1
    assert received == 5


async def test_the_runtime_does_no_work_while_the_consumer_holds_an_event():
    model = ProbeModel(many_deltas())
    agent = await Agent.create(model, extensions=[])
    received = 0
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            await let_other_tasks_run()
            if event.type is T.TEXT_DELTA:
                received += 1
                assert model.produced == received


async def test_the_tool_does_not_start_while_the_consumer_holds_tool_started():
    log: list[str] = []
    agent = await Agent.create(
        ProbeModel(calls(call("work")), answer("ok")), tools=[recording_tool(log)], extensions=[]
    )
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            if event.type is T.TOOL_STARTED:
                await let_other_tasks_run()
                assert log == []
            if event.type is T.TOOL_COMPLETED:
                assert log == ["handler ran"]


async def test_no_task_is_created_to_run_a_request():
    tasks_seen: list[asyncio.Task | None] = []

    class Spy(AgentExtension):
        async def before_run(self, context):
            tasks_seen.append(asyncio.current_task())

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Spy()])
    consumer_task = asyncio.current_task()
    await agent.run("hi", config=CONFIG)
    assert tasks_seen == [consumer_task]
