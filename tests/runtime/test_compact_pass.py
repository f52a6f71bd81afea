"""``Agent.compact`` / ``compact_stream``: a compaction pass claims the session like a request,
restores it through ``on_tool`` and ``on_state``, appends nothing and calls no model itself
(docs/runtime.md, Requests; the confirmation example ``on_compact``). ``CompactionExtension``
has its own file."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import CompactionEvent, MessageAppendedEvent
from zett_agent.messages import AgentMessage, SystemMessage, UserMessage

from .support import HookLog, ProbeModel, answer, parked_turn

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


class Summariser(AgentExtension):
    """A hand-written compactor: replaces the context with one checkpoint."""

    def __init__(self) -> None:
        self.compaction: CompactionEvent | None = None

    async def on_compact(self, context):
        older = tuple(m for m in context.state.messages if not isinstance(m, SystemMessage))
        summary = AgentMessage(content="Summary of earlier turns.")
        await context.emit(AgentEvent(T.COMPACTION_STARTED, session_id=context.session_id))
        await context.emit(
            AgentEvent(T.COMPACTION_TEXT_DELTA, session_id=context.session_id, delta="Summary")
        )
        context.replace_messages([summary], emit_new=False)
        self.compaction = CompactionEvent(
            1,
            len(older),
            len(older) + 1,
            len(older),
            summary.content,
            replaced=older,
            messages=(summary,),
            tokens_before=100,
            tokens_after=5,
        )
        await context.emit(
            AgentEvent(
                T.COMPACTION_COMPLETED,
                session_id=context.session_id,
                applied=True,
                compaction=self.compaction,
            )
        )


async def test_a_compaction_pass_runs_setup_and_on_compact_only():
    first, second = HookLog("first", 10), HookLog("second", 20)
    model = ProbeModel()
    agent = await Agent.create(model, extensions=[first, second])
    assert await agent.compact(config=CONFIG) is None
    assert first.without_phases() == ["on_tool", "on_state", "on_compact"]
    assert second.log == first.log
    assert model.requests == []


async def test_compact_returns_the_applied_compaction_and_compact_stream_yields_its_events():
    summariser = Summariser()
    agent = await Agent.create(ProbeModel(), extensions=[summariser])
    assert await agent.compact(config=CONFIG) is summariser.compaction
    async with contextlib.aclosing(agent.compact_stream(config=CONFIG)) as events:
        kinds = [event.type async for event in events]
    assert kinds == [T.COMPACTION_STARTED, T.COMPACTION_TEXT_DELTA, T.COMPACTION_COMPLETED]


async def test_compacting_a_busy_session_is_refused():
    reached, release = asyncio.Event(), asyncio.Event()
    log = HookLog()
    agent = await Agent.create(ProbeModel(parked_turn(reached, release)), extensions=[log])
    running = asyncio.create_task(agent.run("hi", config=CONFIG))
    await reached.wait()
    try:
        with pytest.raises(AgentProtocolError):
            await agent.compact(config=CONFIG)
    finally:
        release.set()
    await running
    assert "on_compact" not in log.log
    assert log.log.count("on_tool") == 1


async def test_a_compaction_pass_frees_the_session_for_the_next_request():
    agent = await Agent.create(ProbeModel(answer("after")), extensions=[Summariser()])
    await agent.compact(config=CONFIG)
    assert agent.is_conflict("s") is False
    assert (await agent.run("hi", config=CONFIG)).content == "after"


async def test_the_next_request_sees_the_compacted_history():
    class Memory(AgentExtension):
        """Keeps the context of the last pass, including a compaction's result."""

        def __init__(self) -> None:
            self.saved: list = []

        async def on_state(self, context):
            context.replace_messages([*context.state.messages, *self.saved], emit_new=False)

        async def on_event(self, context, event):
            if isinstance(event, CompactionEvent):
                self.saved = list(event.messages)
            elif isinstance(event, MessageAppendedEvent) and not isinstance(
                event.message, SystemMessage
            ):
                self.saved.append(event.message)

    class PublishingSummariser(Summariser):
        async def on_compact(self, context):
            await super().on_compact(context)
            await context.publish(self.compaction)

    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(model, extensions=[Memory(), PublishingSummariser()])
    await agent.run("first", config=CONFIG)
    await agent.compact(config=CONFIG)
    await agent.run("second", config=CONFIG)
    dialogue = [m for m in model.requests[1].messages if not isinstance(m, SystemMessage)]
    assert dialogue == [AgentMessage(content="Summary of earlier turns."), UserMessage("second")]
