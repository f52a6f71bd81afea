"""``CompactionExtension`` (docs/runtime.md, Compaction): automatic compaction, before a model
call, once the context exceeds ``max_tokens``; and what cancellation or failure leaves behind.

``Agent.compact`` passes are in ``test_compaction_on_demand.py``; counting tokens and the
settings in ``test_compaction_settings.py``; the conversation all three use is
``conversation.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.compaction import (
    CHECKPOINT_HEADER,
    SUMMARY_INSTRUCTIONS,
    estimate_tokens,
)
from zett_agent.extensions.events import CompactionEvent, RunCancelledEvent
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    CompactedMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelResponse, StopInfo, StopReason
from zett_agent.testing import ScriptedModel

from .conversation import CONFIG, SYSTEM_PROMPT, Conversation, sized, summary
from .support import ProbeModel, answer, cancel_when, close_at, collect, types

pytestmark = pytest.mark.usefixtures("offline_estimate")

T = AgentEventType
P = AgentPhase


def compaction_events(events) -> list:
    return [e for e in events if e.type.value.startswith("compaction")]


# -- when it runs and what it emits --------------------------------------------------------


async def test_compaction_runs_before_the_model_call_once_the_context_exceeds_max_tokens():
    talk = Conversation(ScriptedModel([summary()]))
    agent = await talk.after_two_requests()
    assert talk.summariser.requests == []

    events = await collect(agent, talk.u3, config=CONFIG)

    assert types(events)[:6] == [
        T.COMPACTION_STARTED,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_COMPLETED,
        T.MODEL_STARTED,
        T.CONTENT_STARTED,
    ]
    assert "".join(e.delta for e in events if e.type is T.COMPACTION_TEXT_DELTA) == (
        "Short summary."
    )
    completed = events[3]
    assert completed.applied is True
    assert isinstance(completed.compaction, CompactionEvent)
    assert completed.compaction.tokens_before == 474
    assert completed.compaction.tokens_after == 474 - 200 + 24


async def test_compaction_events_carry_the_compacting_phase_and_completion_comes_back_in_ready():
    talk = Conversation(ScriptedModel([summary()]))
    agent = await talk.after_two_requests()

    events = await collect(agent, talk.u3, config=CONFIG)

    assert [e.phase for e in events[:4]] == [P.COMPACTING, P.COMPACTING, P.COMPACTING, P.READY]
    assert talk.observer.moves[:5] == [
        (P.CREATED, P.LOADING_CONTEXT),
        (P.LOADING_CONTEXT, P.READY),
        (P.READY, P.COMPACTING),
        (P.COMPACTING, P.READY),
        (P.READY, P.GENERATING),
    ]


async def test_nothing_happens_while_the_context_stays_under_max_tokens():
    talk = Conversation(ScriptedModel([]), max_tokens=475)
    agent = await talk.after_two_requests()

    events = await collect(agent, talk.u3, config=CONFIG)

    assert compaction_events(events) == []
    assert talk.summariser.requests == []
    assert talk.primary.requests[-1].messages[1] is talk.u1
    assert estimate_tokens(talk.primary.requests[-1].messages) == 474


async def test_summary_reasoning_is_streamed_as_compaction_reasoning_deltas():
    talk = Conversation(ScriptedModel([summary(reasoning="Weigh what matters.")]))
    agent = await talk.after_two_requests()

    events = await collect(agent, talk.u3, config=CONFIG)

    assert types(compaction_events(events)) == [
        T.COMPACTION_STARTED,
        T.COMPACTION_REASONING_DELTA,
        T.COMPACTION_REASONING_DELTA,
        T.COMPACTION_REASONING_DELTA,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_TEXT_DELTA,
        T.COMPACTION_COMPLETED,
    ]
    reasoning = [e.delta for e in events if e.type is T.COMPACTION_REASONING_DELTA]
    assert "".join(reasoning) == "Weigh what matters."


# -- what the models see and what is kept ---------------------------------------------------


async def test_the_primary_model_sees_the_checkpoint_instead_of_the_older_turns():
    talk = Conversation(ScriptedModel([summary()]))
    agent = await talk.after_two_requests()

    await agent.run(talk.u3, config=CONFIG)

    seen = talk.primary.requests[-1].messages
    assert isinstance(seen[0], SystemMessage) and seen[0].content == SYSTEM_PROMPT
    checkpoint = seen[1]
    assert isinstance(checkpoint, AgentMessage)
    assert checkpoint.attributes == {"compaction": True}
    assert checkpoint.content == f"{CHECKPOINT_HEADER}\n\nShort summary."
    assert list(seen[2:]) == [talk.u2, talk.a2, seen[4], talk.a2b, talk.u3]
    assert all(message is not talk.u1 and message is not talk.a1 for message in seen)


async def test_the_summary_request_holds_the_instructions_and_only_the_replaced_turns():
    talk = Conversation(ScriptedModel([summary()]))
    agent = await talk.after_two_requests()

    await agent.run(talk.u3, config=CONFIG)

    (request,) = talk.summariser.requests
    instructions, transcript = request.messages
    assert instructions == SystemMessage(SUMMARY_INSTRUCTIONS)
    assert isinstance(transcript, UserMessage)
    assert f"[user]\n{talk.u1.content}" in transcript.content
    assert f"[assistant]\n{talk.a1.content}" in transcript.content
    assert talk.u2.content not in transcript.content
    assert request.tools == ()


async def test_recent_turns_are_kept_whole_with_their_tool_calls_and_results():
    talk = Conversation(ScriptedModel([summary()]))
    agent = await talk.after_two_requests()

    events = await collect(agent, talk.u3, config=CONFIG)

    compacted = next(e.compaction for e in events if e.type is T.COMPACTION_COMPLETED)
    assert compacted.replaced == (talk.u1, talk.a1)
    result = compacted.messages[4]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call-1"
    assert compacted.messages[3] is talk.a2
    assert talk.stored()[:6] == (compacted.checkpoint, talk.u2, talk.a2, result, talk.a2b, talk.u3)


async def test_a_turn_beyond_the_budget_is_replaced_whole_never_leaving_a_result_without_its_call():
    # keep_recent_tokens=50 is spent by U3 (50): turn 2 goes whole, its call with its result.
    talk = Conversation(ScriptedModel([summary()]), keep_recent_tokens=50)
    agent = await talk.after_two_requests()

    await agent.run(talk.u3, config=CONFIG)

    seen = talk.primary.requests[-1].messages
    assert [type(message) for message in seen] == [SystemMessage, CompactedMessage, UserMessage]
    assert seen[2] is talk.u3


async def test_without_its_own_model_the_extension_summarises_with_the_request_model():
    talk = Conversation()
    talk.primary = ScriptedModel([talk.a1, talk.a2, talk.a2b, summary(), talk.a3])
    agent = await talk.after_two_requests()

    await agent.run(talk.u3, config=CONFIG)

    summary_request, answer_request = talk.primary.requests[-2:]
    assert summary_request.messages[0].content == SUMMARY_INSTRUCTIONS
    assert answer_request.messages[1].attributes == {"compaction": True}


# -- summaries that are not applied ---------------------------------------------------------


@pytest.mark.parametrize(
    "summary_turn",
    [
        pytest.param(summary(sized(300)), id="not smaller"),
        pytest.param(summary("   "), id="blank"),
        pytest.param(
            [
                ModelEvent.text("Short"),
                ModelEvent.completed(
                    ModelResponse(summary("Short"), stop=StopInfo(StopReason.MAX_TOKENS))
                ),
            ],
            id="cut off",
        ),
    ],
)
async def test_a_summary_that_is_not_usable_is_not_applied(summary_turn):
    talk = Conversation(ScriptedModel([summary_turn]))
    agent = await talk.after_two_requests()
    stored = talk.stored()

    events = await collect(agent, talk.u3, config=CONFIG)

    completed = next(e for e in events if e.type is T.COMPACTION_COMPLETED)
    assert completed.applied is False and completed.compaction is None
    assert types(events).index(T.COMPACTION_COMPLETED) < types(events).index(T.MODEL_STARTED)
    assert talk.primary.requests[-1].messages[1:3] == (talk.u1, talk.a1)
    assert talk.observer.of_type(CompactionEvent) == []
    assert talk.stored()[: len(stored)] == stored


async def test_a_declined_summary_is_not_retried_for_the_same_messages_in_that_request():
    talk = Conversation(ScriptedModel([summary(sized(300))]))  # a second call runs out of turns
    another_call = AssistantMessage(tool_calls=(ToolCall("call-2", "lookup", {"key": "z"}),))
    talk.primary = ScriptedModel([talk.a1, talk.a2, talk.a2b, another_call, talk.a3])
    agent = await talk.after_two_requests()

    events = await collect(agent, talk.u3, config=CONFIG)

    assert types(events).count(T.MODEL_STARTED) == 2
    assert types(events).count(T.COMPACTION_STARTED) == 1
    assert len(talk.summariser.requests) == 1
    assert talk.compaction._declined == {}  # forgotten when the request ended: nothing leaks


# -- cancellation and failure --------------------------------------------------------------


async def test_closing_the_stream_mid_summary_closes_the_summary_model_and_changes_nothing():
    talk = Conversation(ProbeModel(answer("Short summary.")))
    agent = await talk.after_two_requests()
    stored = talk.stored()

    await close_at(agent, talk.u3, T.COMPACTION_TEXT_DELTA, config=CONFIG)

    assert talk.summariser.streams_closed == 1
    (cancelled,) = talk.observer.of_type(RunCancelledEvent)
    assert cancelled.previous_phase is P.COMPACTING
    assert agent.get_state("session-1").phase is P.CANCELLED
    assert talk.observer.of_type(CompactionEvent) == []
    assert talk.stored() == (*stored, talk.u3)


async def test_cancelling_agent_compact_mid_summary_propagates_and_frees_the_session():
    entered, never = asyncio.Event(), asyncio.Event()

    async def parked(request):
        entered.set()
        await never.wait()
        yield ModelEvent.text("unreachable")

    talk = Conversation(ProbeModel(parked), max_tokens=10_000, keep_recent_tokens=200)
    agent = await talk.after_two_requests()
    stored = talk.stored()

    await cancel_when(entered, agent.compact(config=CONFIG))

    assert talk.summariser.streams_closed == 1
    assert talk.observer.cancelled[0].previous_phase is P.COMPACTING
    assert talk.stored() == stored
    assert not agent.is_conflict("session-1")
    assert (await agent.run(talk.u3, config=CONFIG)).content == "done"


async def test_a_failing_summary_model_fails_the_pass_with_its_own_error():
    talk = Conversation(ScriptedModel([]), max_tokens=10_000, keep_recent_tokens=200)
    agent = await talk.after_two_requests()
    stored = talk.stored()

    with pytest.raises(RuntimeError, match="ran out of turns"):
        await agent.compact(config=CONFIG)

    assert agent.get_state("session-1").phase is P.FAILED
    assert talk.stored() == stored


async def test_a_summary_stream_without_a_response_is_a_protocol_error():
    talk = Conversation(
        ScriptedModel([[ModelEvent.text("half")]]), max_tokens=10_000, keep_recent_tokens=200
    )
    agent = await talk.after_two_requests()

    with pytest.raises(AgentProtocolError, match="Summary model stream ended without a response"):
        await agent.compact(config=CONFIG)
