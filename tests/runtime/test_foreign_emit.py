"""Events emitted by a tool's subtasks reach the consumer in order, with back-pressure."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.messages import AssistantMessage
from zett_agent.testing import ScriptedModel
from zett_agent.tools.base import current_run_context, tool

from .support import call, cancel_when, close_at, collect

E = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def progress(context, step: str) -> AgentEvent:
    return AgentEvent(E.CUSTOM, context.session_id, name="progress", payload={"step": step})


def gathering_tool(steps: list[str], emitted: list[str]):
    @tool
    async def fan_out() -> str:
        """Run steps in parallel subtasks that report progress.

        Guidelines:
            - Use in tests.
        """
        context = current_run_context()

        async def step(name: str) -> None:
            await context.emit(progress(context, name))
            emitted.append(name)

        await asyncio.gather(*(step(name) for name in steps))
        return "all done"

    return fan_out


def script() -> ScriptedModel:
    return ScriptedModel(
        [AssistantMessage(tool_calls=[call("fan_out", "c1")]), AssistantMessage("finished")]
    )


async def test_progress_from_subtasks_arrives_between_tool_started_and_tool_completed():
    emitted: list[str] = []
    agent = await Agent.create(
        script(), tools=[gathering_tool(["a", "b", "c"], emitted)], extensions=[]
    )
    types = []
    async with aclosing(agent.stream("go", config=CONFIG)) as events:
        async for event in events:
            types.append(event.name if event.type is E.CUSTOM else event.type.value)
            if event.type is E.CUSTOM:
                assert event.phase.value == "running_tool"
    started = types.index("tool_started")
    completed = types.index("tool_completed")
    assert sorted(types[started + 1 : completed]) == ["progress", "progress", "progress"]
    assert sorted(emitted) == ["a", "b", "c"]
    assert types[-1] == "run_completed"


async def test_a_subtask_waits_until_the_consumer_took_its_event():
    emitted: list[str] = []
    agent = await Agent.create(script(), tools=[gathering_tool(["a"], emitted)], extensions=[])
    async with aclosing(agent.stream("go", config=CONFIG)) as events:
        async for event in events:
            if event.type is E.CUSTOM:
                # The subtask is still parked in its emit while we hold the event.
                assert emitted == []
            if event.type is E.TOOL_COMPLETED:
                assert emitted == ["a"]


async def test_closing_the_stream_while_a_subtask_emits_cancels_the_tool_cleanly():
    emitted: list[str] = []
    agent = await Agent.create(script(), tools=[gathering_tool(["a", "b"], emitted)], extensions=[])
    await close_at(agent, "go", E.CUSTOM, config=CONFIG)
    state = agent.get_state("s")
    assert state.phase.value == "cancelled"
    assert state.messages[-1].content == "Request cancelled before tool completion"
    assert not agent.is_conflict("s")


async def test_cancelling_the_consumer_while_subtasks_wait_cancels_them_too():
    release = asyncio.Event()
    entered = asyncio.Event()
    children_cancelled = 0

    @tool
    async def wait_in_children() -> str:
        """Wait in two subtasks.

        Guidelines:
            - Use in tests.
        """

        async def child() -> None:
            nonlocal children_cancelled
            try:
                entered.set()
                await release.wait()
            except asyncio.CancelledError:
                children_cancelled += 1
                raise

        await asyncio.gather(child(), child())
        return "never"

    model = ScriptedModel([AssistantMessage(tool_calls=[call("wait_in_children", "c1")])])
    agent = await Agent.create(model, tools=[wait_in_children], extensions=[])

    await cancel_when(entered, collect(agent, "go", config=CONFIG))
    assert children_cancelled == 2
    assert agent.get_state("s").phase.value == "cancelled"


@pytest.fixture
async def loop_errors():
    """Errors the event loop reports (e.g. a future whose exception nobody retrieved)."""
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    yield errors
    loop.set_exception_handler(previous)


async def test_abandoned_subtask_waits_leave_no_unretrieved_errors(loop_errors):
    import gc

    for stop_at in (E.CUSTOM, E.TOOL_STARTED):
        agent = await Agent.create(script(), tools=[gathering_tool(["a", "b"], [])], extensions=[])
        await close_at(agent, "go", stop_at, config=CONFIG)
        gc.collect()
    assert loop_errors == []
