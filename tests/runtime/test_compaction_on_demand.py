"""``CompactionExtension`` under ``Agent.compact`` / ``compact_stream`` (docs/runtime.md,
Compaction): a forced pass summarises regardless of size; and where the turns it replaces begin
and end."""

from __future__ import annotations

import contextlib

import pytest

from zett_agent.agent import Agent
from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.compaction import CHECKPOINT_HEADER, CompactionExtension
from zett_agent.extensions.events import CompactionEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    CompactedMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.serialization import event_to_dict
from zett_agent.testing import ScriptedModel

from .conversation import CONFIG, SYSTEM_PROMPT, Conversation, sized, summary
from .support import SeededHistory, types

pytestmark = pytest.mark.usefixtures("offline_estimate")

T = AgentEventType
P = AgentPhase


async def compacted_history(*history, max_tokens: int, keep_recent_tokens: int):
    """Compact a session restored with ``history``; return the pass's ``CompactionEvent``."""
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens
    )
    agent = await Agent.create(
        ScriptedModel([]),
        system_prompt=SYSTEM_PROMPT,
        extensions=[SeededHistory(*history), compaction],
    )
    return await agent.compact(config=CONFIG)


# -- forced compaction ---------------------------------------------------------------------


async def test_agent_compact_summarises_regardless_of_size_and_replaces_the_stored_history():
    talk = Conversation(ScriptedModel([summary()]), max_tokens=10_000, keep_recent_tokens=200)
    agent = await talk.after_two_requests()
    calls_before = len(talk.primary.requests)

    compacted = await agent.compact(config=CONFIG)

    assert isinstance(compacted, CompactionEvent)
    assert compacted.replaced == (talk.u1, talk.a1)
    assert talk.observer.of_type(CompactionEvent) == [compacted]
    assert len(talk.primary.requests) == calls_before
    stored = talk.stored()
    assert stored[0] is compacted.checkpoint
    assert stored[1:] == (talk.u2, talk.a2, stored[3], talk.a2b)
    assert agent.get_state("session-1").phase is P.COMPLETED
    assert (P.READY, P.COMPACTING) in talk.observer.moves

    await agent.run(talk.u3, config=CONFIG)
    assert talk.primary.requests[-1].messages[1] is compacted.checkpoint


async def test_compact_stream_yields_the_compaction_events_and_they_serialise():
    talk = Conversation(ScriptedModel([summary()]), max_tokens=10_000, keep_recent_tokens=200)
    agent = await talk.after_two_requests()

    async with contextlib.aclosing(agent.compact_stream(config=CONFIG)) as stream:
        events = [event async for event in stream]

    assert types(events) == [
        T.COMPACTION_STARTED,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_COMPLETED,
    ]
    encoded = event_to_dict(events[-1])
    assert encoded["applied"] is True
    assert encoded["compaction"]["replaced_count"] == 2
    assert encoded["compaction"]["checkpoint"]["attributes"] == {"compaction": True}
    assert encoded["compaction"]["summary"] == encoded["compaction"]["checkpoint"]["content"]


async def test_agent_compact_uses_the_model_it_is_given_when_the_extension_has_none():
    talk = Conversation(max_tokens=10_000, keep_recent_tokens=200)
    other = ScriptedModel([summary()])
    agent = await talk.after_two_requests()

    compacted = await agent.compact(config=CONFIG, model=other)

    assert compacted is not None
    assert len(other.requests) == 1
    assert len(talk.primary.requests) == 3


async def test_with_nothing_older_than_the_kept_turns_compaction_calls_no_model_and_emits_nothing():
    summariser = ScriptedModel([])
    compaction = CompactionExtension(summariser, max_tokens=10_000, keep_recent_tokens=5_000)
    history = SeededHistory(UserMessage("hello"), AssistantMessage("Hi."))
    agent = await Agent.create(
        ScriptedModel([]), system_prompt=SYSTEM_PROMPT, extensions=[history, compaction]
    )

    async with contextlib.aclosing(agent.compact_stream(config=CONFIG)) as stream:
        events = [event async for event in stream]

    assert events == []
    assert await agent.compact(config=CONFIG) is None
    assert summariser.requests == []


async def test_an_earlier_checkpoint_alone_is_not_summarised_again():
    # 200 is spent by turn 2 (217): turn 1 goes, and then the checkpoint in front of turn 2
    # is all there is to replace.
    talk = Conversation(ScriptedModel([summary()]), max_tokens=10_000, keep_recent_tokens=200)
    agent = await talk.after_two_requests()

    assert await agent.compact(config=CONFIG) is not None
    assert await agent.compact(config=CONFIG) is None
    assert len(talk.summariser.requests) == 1


async def test_a_later_compaction_folds_the_earlier_checkpoint_into_the_new_summary():
    talk = Conversation(
        ScriptedModel([summary("First."), summary("Second.")]),
        max_tokens=10_000,
        keep_recent_tokens=200,
    )
    agent = await talk.after_two_requests()
    await agent.compact(config=CONFIG)
    await agent.run(talk.u3, config=CONFIG)

    talk.compaction.keep_recent_tokens = 50  # spent by turn 3 (55): turn 2 and the checkpoint go
    second = await agent.compact(config=CONFIG)

    transcript = talk.summariser.requests[1].messages[1].content
    assert f"[earlier summary]\n{CHECKPOINT_HEADER}\n\nFirst." in transcript
    assert second is not None
    checkpoints = [m for m in talk.stored() if isinstance(m, CompactedMessage)]
    assert checkpoints == [second.checkpoint]
    assert second.summary == second.checkpoint.content
    assert second.summary.endswith("Second.")


# -- where turns begin and end -------------------------------------------------------------


async def test_system_messages_among_older_turns_are_kept_before_the_checkpoint():
    rule = SystemMessage("Answer in French.")
    recent = [UserMessage("three"), AssistantMessage("trois")]
    compacted = await compacted_history(
        UserMessage(sized(30, "a")),
        AssistantMessage(sized(30, "b")),
        rule,
        UserMessage(sized(30, "c")),
        AssistantMessage(sized(30, "d")),
        *recent,
        max_tokens=100,
        keep_recent_tokens=10,  # spent by the last turn (12)
    )

    assert compacted is not None
    assert [type(m) for m in compacted.messages] == [
        SystemMessage,
        SystemMessage,
        CompactedMessage,
        UserMessage,
        AssistantMessage,
    ]
    assert compacted.messages[1] is rule
    assert list(compacted.messages[3:]) == recent
    assert rule not in compacted.replaced


async def test_a_message_slipped_into_a_tool_batch_does_not_start_a_turn():
    call = ToolCall("call-1", "lookup", {"key": "k"})
    batch = [
        UserMessage(sized(60)),
        AssistantMessage(tool_calls=(call,)),
        AgentMessage("Mind the budget."),  # added by a hook between the call and its result
        ToolMessage("call-1", "lookup", sized(60)),
        AssistantMessage("done"),
    ]
    recent = [UserMessage("next"), AssistantMessage("ok")]

    compacted = await compacted_history(*batch, *recent, max_tokens=1_000, keep_recent_tokens=10)

    assert compacted is not None
    assert list(compacted.replaced) == batch
    assert list(compacted.messages[2:]) == recent


async def test_steering_and_internal_messages_are_rejected_during_a_compaction_pass():
    verdicts: list[list[str]] = []

    class Interjects(AgentExtension):
        agent: Agent | None = None

        async def on_compact(self, context):
            for name in ("steering_message", "internal_message"):
                event = ExternalEvent(name, {"content": "while compacting"})
                verdicts.append(self.agent.emit_external_event(event, config=context.config))

    interjects = Interjects()
    agent = await Agent.create(ScriptedModel([]), extensions=[interjects])
    interjects.agent = agent
    assert await agent.compact(config=CONFIG) is None
    assert verdicts == [[], []]
