"""Compaction as the upstream library documents it (docs/runtime.md, Compaction).

The checkpoint is a ``CompactedMessage``; the recent window is a token budget (the turn that
spends it is kept whole); ``CompactionEvent`` carries one-based ranges and the summary text;
emitting ``COMPACTION_STARTED`` / ``_COMPLETED`` moves the phase; a summary model that calls
a tool is an ``AgentProtocolError``; both limits must be positive, in any relation.
"""

from __future__ import annotations

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.extensions.events import CompactionEvent
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    ToolCall,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelResponse, ToolCallDelta
from zett_agent.serialization import message_from_dict, message_to_dict
from zett_agent.testing import ScriptedModel

from .support import Observer, ProbeModel, SeededHistory, answer, collect

T = AgentEventType
P = AgentPhase
CONFIG = AgentRunConfig(session_id="s")


def words(messages) -> int:
    return sum(len(message.content.split()) for message in messages)


def test_a_checkpoint_is_a_compacted_message_and_survives_storage():
    checkpoint = CompactedMessage("Earlier: the user likes blue.")
    assert isinstance(checkpoint, AgentMessage)
    assert checkpoint.attributes == {"compaction": True}
    decoded = message_from_dict(message_to_dict(checkpoint))
    assert type(decoded) is CompactedMessage and decoded == checkpoint
    plain = message_from_dict(message_to_dict(AgentMessage("Be brief.")))
    assert type(plain) is AgentMessage


async def test_the_recent_window_is_a_token_budget_and_keeps_the_turn_that_spends_it():
    older = [UserMessage("old " * 100), AssistantMessage("answer")]
    recent = [UserMessage("recent " * 20), AssistantMessage("reply"), UserMessage("latest")]
    summariser = ScriptedModel([AssistantMessage("Short checkpoint")])
    compaction = CompactionExtension(
        summariser, max_tokens=100, keep_recent_tokens=15, count_tokens=words
    )
    agent = await Agent.create(
        ScriptedModel([]), system_prompt="", extensions=[SeededHistory(*older, *recent), compaction]
    )
    compacted = await agent.compact(config=CONFIG)
    # "latest" (1) is under the budget, so the turn before it (21) is kept too, whole.
    assert compacted.replaced == tuple(older)
    assert isinstance(compacted.messages[0], CompactedMessage)
    assert compacted.messages[1:] == tuple(recent)
    assert (compacted.compressed_from, compacted.compressed_to) == (1, 2)
    assert (compacted.kept_from, compacted.kept_to) == (3, 5)
    assert compacted.summary == compacted.checkpoint.content == compacted.messages[0].content


async def test_automatic_compaction_phases_follow_the_compaction_events():
    history = SeededHistory(UserMessage("old " * 500), AssistantMessage("Answer"))
    watch = Observer()
    compaction = CompactionExtension(
        ScriptedModel([AssistantMessage("Remember the blue notebook.")]),
        max_tokens=100,
        keep_recent_tokens=1,
    )
    agent = await Agent.create(
        ProbeModel(answer("Done")), system_prompt="", extensions=[history, compaction, watch]
    )
    events = await collect(agent, "Latest", config=CONFIG)
    compaction_events = [e for e in events if e.type.value.startswith("compaction")]
    assert compaction_events[0].phase is P.COMPACTING
    assert {e.phase for e in compaction_events[1:-1]} == {P.COMPACTING}
    assert compaction_events[-1].phase is P.READY
    (published,) = watch.of_type(CompactionEvent)
    assert compaction_events[-1].compaction is published and compaction_events[-1].applied
    assert published.kept_from == published.kept_to == 3


async def test_an_extension_s_compaction_events_move_the_phase_too():
    class Announce(AgentExtension):
        async def before_model(self, context, request):
            await context.emit(AgentEvent(T.COMPACTION_STARTED, context.session_id))
            await context.emit(
                AgentEvent(T.COMPACTION_COMPLETED, context.session_id, applied=False)
            )

    class Forgetful(AgentExtension):
        async def before_run(self, context):
            await context.emit(AgentEvent(T.COMPACTION_STARTED, context.session_id))

    watch = Observer()
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Announce(), watch])
    events = await collect(agent, "hi")
    assert [(e.type, e.phase) for e in events[:3]] == [
        (T.COMPACTION_STARTED, P.COMPACTING),
        (T.COMPACTION_COMPLETED, P.READY),
        (T.MODEL_STARTED, P.GENERATING),
    ]
    assert (P.READY, P.COMPACTING) in watch.moves and (P.COMPACTING, P.READY) in watch.moves

    # a STARTED never completed ends with its stage: the request does not stay COMPACTING
    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Forgetful()])
    events = await collect(agent, "hi")
    assert events[-1].type is T.RUN_COMPLETED


@pytest.mark.parametrize("mode", ["tool delta", "tool calls"])
async def test_a_summary_model_that_calls_a_tool_is_a_protocol_error(mode):
    if mode == "tool delta":
        turn = [ModelEvent.tool_call(ToolCallDelta(0, name="read_file"))]
    else:
        message = AssistantMessage(tool_calls=(ToolCall("call", "read_file"),))
        turn = [ModelEvent.completed(ModelResponse(message))]
    history = [UserMessage("Old request"), AssistantMessage("Old response")]
    memory = InMemoryMessageAccumulator()
    memory.load("s", [*history, UserMessage("Current"), AssistantMessage("Reply")])
    compaction = CompactionExtension(
        ProbeModel(turn), max_tokens=2, keep_recent_tokens=1, count_tokens=len
    )
    watch = Observer()
    agent = await Agent.create(ScriptedModel([]), extensions=[memory, compaction, watch])
    with pytest.raises(AgentProtocolError, match="tool"):
        await agent.compact(config=CONFIG)
    assert [m.content for m in memory.messages("s")][:2] == ["Old request", "Old response"]
    assert watch.of_type(CompactionEvent) == []


@pytest.mark.parametrize(("max_tokens", "keep_recent_tokens"), [(0, 1), (1, 0)])
def test_both_limits_must_be_positive(max_tokens, keep_recent_tokens):
    with pytest.raises(ValueError, match="positive"):
        CompactionExtension(max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens)


def test_the_recent_budget_may_exceed_the_limit():
    extension = CompactionExtension(max_tokens=1, keep_recent_tokens=20)
    assert (extension.max_tokens, extension.keep_recent_tokens) == (1, 20)


async def test_memory_follows_an_event_that_carries_only_ranges():
    memory = InMemoryMessageAccumulator()
    memory.load("s", [UserMessage("Old"), AssistantMessage("Old answer")])
    checkpoint, recent = CompactedMessage("Checkpoint"), UserMessage("Recent")

    class Fold(AgentExtension):
        async def before_run(self, context):
            system = [m for m in context.state.messages if isinstance(m, SystemMessage)]
            context.replace_messages([*system, checkpoint, recent], emit_new=False)
            await context.publish(CompactionEvent(1, 3, 4, 4, checkpoint.content))

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[memory, Fold()])
    await agent.run("Recent", config=CONFIG)
    assert memory.messages("s")[:2] == (checkpoint, recent)
