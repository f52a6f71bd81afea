"""``CompactionExtension`` (SPEC A9): when and how older dialogue becomes one checkpoint.

Sizes are chosen with the offline estimate (``estimate_tokens``): a user, agent or plain
assistant message made by ``sized(n)`` counts exactly ``n`` tokens. The autouse fixture
points tiktoken's cache at an empty folder so that estimate is what every machine uses.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.compaction import (
    CHECKPOINT_HEADER,
    SUMMARY_INSTRUCTIONS,
    CompactionExtension,
    estimate_tokens,
)
from zett_agent.extensions.events import (
    CompactionEvent,
    PhaseTransitionEvent,
    RunCancelledEvent,
)
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelResponse, StopInfo, StopReason
from zett_agent.serialization import event_to_dict
from zett_agent.testing import ScriptedModel

from .support import ProbeModel, answer, collect, lookup, types

T = AgentEventType
P = AgentPhase
CONFIG = AgentRunConfig(session_id="session-1")
SYSTEM_PROMPT = "Be brief."  # 7 tokens


@pytest.fixture(autouse=True)
def offline_estimate(monkeypatch, tmp_path):
    """No cached tiktoken encoding, so the default counter is ``estimate_tokens``."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


def sized(tokens: int, letter: str = "x") -> str:
    """Content for which a one-part message estimates to exactly ``tokens`` tokens."""
    return letter * (4 * (tokens - 4))


class Observer(AgentExtension):
    """Records every extension event it is published."""

    def __init__(self) -> None:
        self.events: list[object] = []

    async def on_event(self, context, event) -> None:
        self.events.append(event)

    def moves(self) -> list[tuple[AgentPhase, AgentPhase]]:
        return [
            (event.previous_phase, event.current_phase)
            for event in self.events
            if isinstance(event, PhaseTransitionEvent)
        ]

    def of_type(self, kind: type) -> list:
        return [event for event in self.events if isinstance(event, kind)]


class SeededHistory(AgentExtension):
    """Restores a fixed history after the system messages, as a persistence layer would."""

    def __init__(self, *history: AnyMessage) -> None:
        self.history = list(history)

    async def on_state(self, context) -> None:
        current = list(context.state.messages)
        split = 0
        while split < len(current) and isinstance(current[split], SystemMessage):
            split += 1
        context.replace_messages(
            [*current[:split], *self.history, *current[split:]], emit_new=False
        )


class Conversation:
    """Three requests on one session; the third crosses ``max_tokens=400``.

    request 1: U1 (100) → A1 (100)
    request 2: U2 (100) → A2 calls lookup (9) → T2 (8) → A2b (100)
    request 3: U3 (50)  → before its model call the context holds 474 tokens
    """

    def __init__(self) -> None:
        self.u1 = UserMessage(sized(100, "a"))
        self.a1 = AssistantMessage(sized(100, "b"))
        self.u2 = UserMessage(sized(100, "c"))
        self.a2 = AssistantMessage(tool_calls=(ToolCall("call-1", "lookup", {"key": "k"}),))
        self.a2b = AssistantMessage(sized(100, "d"))
        self.u3 = UserMessage(sized(50, "e"))
        self.a3 = AssistantMessage("done")

    def primary(self) -> ScriptedModel:
        return ScriptedModel([self.a1, self.a2, self.a2b, self.a3])

    async def agent(self, model, *extensions: AgentExtension) -> Agent:
        return await Agent.create(
            model, system_prompt=SYSTEM_PROMPT, tools=[lookup], extensions=list(extensions)
        )

    async def first_two(self, agent: Agent) -> None:
        await agent.run(self.u1, config=CONFIG)
        await agent.run(self.u2, config=CONFIG)


def summary(text: str = "Short summary.", reasoning: str | None = None) -> AssistantMessage:
    return AssistantMessage(text, reasoning=reasoning)


# -- automatic compaction ------------------------------------------------------------------


async def test_compaction_runs_before_the_model_call_once_the_context_exceeds_max_tokens():
    talk = Conversation()
    summariser = ScriptedModel([summary()])
    compaction = CompactionExtension(summariser, max_tokens=400, keep_recent_tokens=300)
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)
    assert summariser.requests == []

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
    talk = Conversation()
    observer = Observer()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=400, keep_recent_tokens=300
    )
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction, observer)
    await talk.first_two(agent)
    observer.events.clear()

    events = await collect(agent, talk.u3, config=CONFIG)

    assert [e.phase for e in events[:4]] == [P.COMPACTING, P.COMPACTING, P.COMPACTING, P.READY]
    assert observer.moves()[:5] == [
        (P.CREATED, P.LOADING_CONTEXT),
        (P.LOADING_CONTEXT, P.READY),
        (P.READY, P.COMPACTING),
        (P.COMPACTING, P.READY),
        (P.READY, P.GENERATING),
    ]


async def test_the_primary_model_sees_the_checkpoint_instead_of_the_older_turns():
    talk = Conversation()
    primary = talk.primary()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=400, keep_recent_tokens=300
    )
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    await agent.run(talk.u3, config=CONFIG)

    seen = primary.requests[-1].messages
    assert isinstance(seen[0], SystemMessage) and seen[0].content == SYSTEM_PROMPT
    checkpoint = seen[1]
    assert isinstance(checkpoint, AgentMessage)
    assert checkpoint.attributes == {"compaction": True}
    assert checkpoint.content == f"{CHECKPOINT_HEADER}\n\nShort summary."
    assert list(seen[2:]) == [talk.u2, talk.a2, seen[4], talk.a2b, talk.u3]
    assert all(message is not talk.u1 and message is not talk.a1 for message in seen)


async def test_the_summary_request_holds_the_instructions_and_only_the_replaced_turns():
    talk = Conversation()
    summariser = ScriptedModel([summary()])
    compaction = CompactionExtension(summariser, max_tokens=400, keep_recent_tokens=300)
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    await agent.run(talk.u3, config=CONFIG)

    (request,) = summariser.requests
    instructions, transcript = request.messages
    assert instructions == SystemMessage(SUMMARY_INSTRUCTIONS)
    assert isinstance(transcript, UserMessage)
    assert f"[user]\n{talk.u1.content}" in transcript.content
    assert f"[assistant]\n{talk.a1.content}" in transcript.content
    assert talk.u2.content not in transcript.content
    assert request.tools == ()


async def test_recent_turns_are_kept_whole_with_their_tool_calls_and_results():
    talk = Conversation()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=400, keep_recent_tokens=300
    )
    memory = InMemoryMessageAccumulator()
    agent = await talk.agent(talk.primary(), memory, compaction)
    await talk.first_two(agent)

    events = await collect(agent, talk.u3, config=CONFIG)

    compacted = next(e.compaction for e in events if e.type is T.COMPACTION_COMPLETED)
    assert compacted.replaced == (talk.u1, talk.a1)
    result = compacted.messages[4]
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call-1"
    assert compacted.messages[3] is talk.a2
    assert memory.messages("session-1")[:6] == (
        compacted.summary,
        talk.u2,
        talk.a2,
        result,
        talk.a2b,
        talk.u3,
    )


async def test_a_turn_that_does_not_fit_is_replaced_whole_never_leaving_a_result_without_its_call():
    # keep_recent_tokens=200 fits U3 (50) and A2b + T2 (108), but not turn 2 whole (217).
    talk = Conversation()
    primary = talk.primary()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=400, keep_recent_tokens=200
    )
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    await agent.run(talk.u3, config=CONFIG)

    seen = primary.requests[-1].messages
    assert [type(message) for message in seen] == [SystemMessage, AgentMessage, UserMessage]
    assert seen[2] is talk.u3


async def test_nothing_happens_while_the_context_stays_under_max_tokens():
    talk = Conversation()
    primary = talk.primary()
    summariser = ScriptedModel([])
    compaction = CompactionExtension(summariser, max_tokens=475, keep_recent_tokens=300)
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    events = await collect(agent, talk.u3, config=CONFIG)

    assert not [e for e in events if e.type.value.startswith("compaction")]
    assert summariser.requests == []
    assert primary.requests[-1].messages[1] is talk.u1
    assert estimate_tokens(primary.requests[-1].messages) == 474


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
    talk = Conversation()
    primary = talk.primary()
    observer = Observer()
    memory = InMemoryMessageAccumulator()
    compaction = CompactionExtension(
        ScriptedModel([summary_turn]), max_tokens=400, keep_recent_tokens=300
    )
    agent = await talk.agent(primary, memory, compaction, observer)
    await talk.first_two(agent)
    stored = memory.messages("session-1")

    events = await collect(agent, talk.u3, config=CONFIG)

    completed = next(e for e in events if e.type is T.COMPACTION_COMPLETED)
    assert completed.applied is False and completed.compaction is None
    assert types(events).index(T.COMPACTION_COMPLETED) < types(events).index(T.MODEL_STARTED)
    seen = primary.requests[-1].messages
    assert seen[1:3] == (talk.u1, talk.a1)
    assert observer.of_type(CompactionEvent) == []
    assert memory.messages("session-1")[: len(stored)] == stored


async def test_a_declined_summary_is_not_retried_for_the_same_messages_in_that_request():
    talk = Conversation()
    summariser = ScriptedModel([summary(sized(300))])  # a second call would run out of turns
    primary = ScriptedModel(
        [
            talk.a1,
            talk.a2,
            talk.a2b,
            AssistantMessage(tool_calls=(ToolCall("call-2", "lookup", {"key": "z"}),)),
            talk.a3,
        ]
    )
    compaction = CompactionExtension(summariser, max_tokens=400, keep_recent_tokens=300)
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    events = await collect(agent, talk.u3, config=CONFIG)

    assert types(events).count(T.MODEL_STARTED) == 2
    assert types(events).count(T.COMPACTION_STARTED) == 1
    assert len(summariser.requests) == 1
    assert compaction._declined == {}  # forgotten when the request ended: nothing leaks


async def test_summary_reasoning_is_streamed_as_compaction_reasoning_deltas():
    talk = Conversation()
    compaction = CompactionExtension(
        ScriptedModel([summary(reasoning="Weigh what matters.")]),
        max_tokens=400,
        keep_recent_tokens=300,
    )
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    events = await collect(agent, talk.u3, config=CONFIG)

    compaction_events = [e for e in events if e.type.value.startswith("compaction")]
    assert types(compaction_events) == [
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


async def test_without_its_own_model_the_extension_summarises_with_the_request_model():
    talk = Conversation()
    primary = ScriptedModel([talk.a1, talk.a2, talk.a2b, summary(), talk.a3])
    compaction = CompactionExtension(max_tokens=400, keep_recent_tokens=300)
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    await agent.run(talk.u3, config=CONFIG)

    summary_request, answer_request = primary.requests[-2:]
    assert summary_request.messages[0].content == SUMMARY_INSTRUCTIONS
    assert answer_request.messages[1].attributes == {"compaction": True}


# -- forced compaction (Agent.compact) -----------------------------------------------------


async def test_agent_compact_summarises_regardless_of_size_and_replaces_the_stored_history():
    talk = Conversation()
    primary = talk.primary()
    memory = InMemoryMessageAccumulator()
    observer = Observer()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=10_000, keep_recent_tokens=250
    )
    agent = await talk.agent(primary, memory, compaction, observer)
    await talk.first_two(agent)
    calls_before = len(primary.requests)
    observer.events.clear()

    compacted = await agent.compact(config=CONFIG)

    assert isinstance(compacted, CompactionEvent)
    assert compacted.replaced == (talk.u1, talk.a1)
    assert observer.of_type(CompactionEvent) == [compacted]
    assert len(primary.requests) == calls_before
    stored = memory.messages("session-1")
    assert stored[0] is compacted.summary
    assert stored[1:] == (talk.u2, talk.a2, stored[3], talk.a2b)
    assert agent.get_state("session-1").phase is P.COMPLETED
    assert (P.READY, P.COMPACTING) in observer.moves()

    await agent.run(talk.u3, config=CONFIG)
    assert primary.requests[-1].messages[1] is compacted.summary


async def test_compact_stream_yields_the_compaction_events_and_they_serialise():
    talk = Conversation()
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=10_000, keep_recent_tokens=250
    )
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

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
    assert encoded["compaction"]["summary"]["attributes"] == {"compaction": True}


async def test_agent_compact_uses_the_model_it_is_given_when_the_extension_has_none():
    talk = Conversation()
    primary = talk.primary()
    other = ScriptedModel([summary()])
    compaction = CompactionExtension(max_tokens=10_000, keep_recent_tokens=250)
    agent = await talk.agent(primary, InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    compacted = await agent.compact(config=CONFIG, model=other)

    assert compacted is not None
    assert len(other.requests) == 1
    assert len(primary.requests) == 3


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
    # 220 keeps turn 2 (217) but not the checkpoint (24) in front of it.
    talk = Conversation()
    summariser = ScriptedModel([summary()])
    compaction = CompactionExtension(summariser, max_tokens=10_000, keep_recent_tokens=220)
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    assert await agent.compact(config=CONFIG) is not None
    assert await agent.compact(config=CONFIG) is None
    assert len(summariser.requests) == 1


async def test_a_later_compaction_folds_the_earlier_checkpoint_into_the_new_summary():
    talk = Conversation()
    summariser = ScriptedModel([summary("First."), summary("Second.")])
    memory = InMemoryMessageAccumulator()
    compaction = CompactionExtension(summariser, max_tokens=10_000, keep_recent_tokens=250)
    agent = await talk.agent(talk.primary(), memory, compaction)
    await talk.first_two(agent)
    await agent.compact(config=CONFIG)
    await agent.run(talk.u3, config=CONFIG)

    compaction.keep_recent_tokens = 60
    second = await agent.compact(config=CONFIG)

    transcript = summariser.requests[1].messages[1].content
    assert f"[earlier summary]\n{CHECKPOINT_HEADER}\n\nFirst." in transcript
    assert second is not None
    checkpoints = [m for m in memory.messages("session-1") if isinstance(m, AgentMessage)]
    assert checkpoints == [second.summary]
    assert second.summary.content.endswith("Second.")


async def test_system_messages_among_older_turns_are_kept_before_the_checkpoint():
    rule = SystemMessage("Answer in French.")
    recent = [UserMessage("three"), AssistantMessage("trois")]
    history = SeededHistory(
        UserMessage(sized(30, "a")),
        AssistantMessage(sized(30, "b")),
        rule,
        UserMessage(sized(30, "c")),
        AssistantMessage(sized(30, "d")),
        *recent,
    )
    compaction = CompactionExtension(
        ScriptedModel([summary("Counting in French.")]), max_tokens=100, keep_recent_tokens=15
    )
    agent = await Agent.create(
        ScriptedModel([]), system_prompt=SYSTEM_PROMPT, extensions=[history, compaction]
    )

    compacted = await agent.compact(config=CONFIG)

    assert compacted is not None
    assert [type(m) for m in compacted.messages] == [
        SystemMessage,
        SystemMessage,
        AgentMessage,
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
    compaction = CompactionExtension(
        ScriptedModel([summary()]), max_tokens=1_000, keep_recent_tokens=100
    )
    agent = await Agent.create(
        ScriptedModel([]),
        system_prompt=SYSTEM_PROMPT,
        extensions=[SeededHistory(*batch, *recent), compaction],
    )

    compacted = await agent.compact(config=CONFIG)

    assert compacted is not None
    assert list(compacted.replaced) == batch
    assert list(compacted.messages[2:]) == recent


# -- cancellation and failure --------------------------------------------------------------


async def test_closing_the_stream_mid_summary_closes_the_summary_model_and_changes_nothing():
    talk = Conversation()
    summariser = ProbeModel(answer("Short summary."))
    memory = InMemoryMessageAccumulator()
    observer = Observer()
    compaction = CompactionExtension(summariser, max_tokens=400, keep_recent_tokens=300)
    agent = await talk.agent(talk.primary(), memory, compaction, observer)
    await talk.first_two(agent)
    stored = memory.messages("session-1")

    async with contextlib.aclosing(agent.stream(talk.u3, config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.COMPACTION_TEXT_DELTA:
                break

    assert summariser.streams_closed == 1
    (cancelled,) = observer.of_type(RunCancelledEvent)
    assert cancelled.previous_phase is P.COMPACTING
    assert agent.get_state("session-1").phase is P.CANCELLED
    assert observer.of_type(CompactionEvent) == []
    assert memory.messages("session-1") == (*stored, talk.u3)


async def test_cancelling_agent_compact_mid_summary_propagates_and_frees_the_session():
    talk = Conversation()
    entered, never = asyncio.Event(), asyncio.Event()

    async def parked(request):
        entered.set()
        await never.wait()
        yield ModelEvent.text("unreachable")

    summariser = ProbeModel(parked)
    memory = InMemoryMessageAccumulator()
    observer = Observer()
    compaction = CompactionExtension(summariser, max_tokens=10_000, keep_recent_tokens=250)
    agent = await talk.agent(talk.primary(), memory, compaction, observer)
    await talk.first_two(agent)
    stored = memory.messages("session-1")

    task = asyncio.create_task(agent.compact(config=CONFIG))
    gate = asyncio.create_task(entered.wait())
    await asyncio.wait({task, gate}, return_when=asyncio.FIRST_COMPLETED)
    gate.cancel()
    assert entered.is_set(), "the pass ended without calling the summary model"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert summariser.streams_closed == 1
    assert observer.of_type(RunCancelledEvent)[0].previous_phase is P.COMPACTING
    assert memory.messages("session-1") == stored
    assert not agent.is_conflict("session-1")
    assert (await agent.run(talk.u3, config=CONFIG)).content == "done"


async def test_a_failing_summary_model_fails_the_pass_with_its_own_error():
    talk = Conversation()
    memory = InMemoryMessageAccumulator()
    compaction = CompactionExtension(ScriptedModel([]), max_tokens=10_000, keep_recent_tokens=250)
    agent = await talk.agent(talk.primary(), memory, compaction)
    await talk.first_two(agent)
    stored = memory.messages("session-1")

    with pytest.raises(RuntimeError, match="ran out of turns"):
        await agent.compact(config=CONFIG)

    assert agent.get_state("session-1").phase is P.FAILED
    assert memory.messages("session-1") == stored


async def test_a_summary_stream_without_a_response_is_a_protocol_error():
    talk = Conversation()
    compaction = CompactionExtension(
        ScriptedModel([[ModelEvent.text("half")]]), max_tokens=10_000, keep_recent_tokens=250
    )
    agent = await talk.agent(talk.primary(), InMemoryMessageAccumulator(), compaction)
    await talk.first_two(agent)

    with pytest.raises(AgentProtocolError, match="Summary model stream ended without a response"):
        await agent.compact(config=CONFIG)


# -- counting tokens -----------------------------------------------------------------------


async def test_a_custom_token_counter_decides_when_and_what_to_compact():
    seen: list[tuple[AnyMessage, ...]] = []

    def ten_per_message(messages):
        seen.append(tuple(messages))
        return 10 * len(messages)

    u1, u2, u3 = UserMessage("one"), UserMessage("two"), UserMessage("three")
    primary = ScriptedModel([AssistantMessage("1"), AssistantMessage("2"), AssistantMessage("3")])
    summariser = ScriptedModel([summary("s")])
    compaction = CompactionExtension(
        summariser, max_tokens=45, keep_recent_tokens=20, count_tokens=ten_per_message
    )
    agent = await Agent.create(
        primary,
        system_prompt=SYSTEM_PROMPT,
        extensions=[InMemoryMessageAccumulator(), compaction],
    )

    await agent.run(u1, config=CONFIG)
    await agent.run(u2, config=CONFIG)  # 4 messages: 40 tokens, under the limit
    assert summariser.requests == []
    events = await collect(agent, u3, config=CONFIG)  # 6 messages: 60 tokens

    compacted = next(e.compaction for e in events if e.type is T.COMPACTION_COMPLETED)
    assert [m.content for m in compacted.replaced] == ["one", "1", "two", "2"]
    assert compacted.tokens_before == 60 and compacted.tokens_after == 30
    assert primary.requests[-1].messages[2] is u3
    assert all(isinstance(call, tuple | list) for call in seen)


async def test_a_counter_that_returns_no_count_fails_the_request_clearly():
    compaction = CompactionExtension(
        ScriptedModel([]), max_tokens=45, keep_recent_tokens=20, count_tokens=lambda m: "many"
    )
    agent = await Agent.create(ScriptedModel([]), extensions=[compaction])

    with pytest.raises(TypeError, match="count_tokens must return an int >= 0, got 'many'"):
        await agent.run("hi", config=CONFIG)


def test_the_default_counter_is_the_offline_estimate_when_no_encoding_is_cached():
    assert CompactionExtension().count_tokens is estimate_tokens


def test_the_default_counter_is_the_offline_estimate_when_tiktoken_caching_is_disabled(
    monkeypatch,
):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert CompactionExtension().count_tokens is estimate_tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        pytest.param(UserMessage("abcdefgh"), 4 + 2, id="four characters a token"),
        pytest.param(UserMessage("abcdefghi"), 4 + 3, id="a started token counts"),
        pytest.param(UserMessage(""), 4, id="framing only"),
        pytest.param(
            UserMessage([TextContent("abcd"), ImageContent(ImageUrlSource("https://x/y.png"))]),
            4 + 1 + 1_000,
            id="images cost a flat amount",
        ),
        pytest.param(
            AssistantMessage(tool_calls=(ToolCall("c", "lookup", {"key": "k"}),)),
            4 + 5,  # 'lookup' + '{"key": "k"}' is 18 characters
            id="tool calls count name and arguments",
        ),
        pytest.param(ToolMessage("c", "lookup", "value of k"), 4 + 4, id="results count the name"),
        pytest.param(AssistantMessage("abcd", reasoning="efgh"), 4 + 2, id="reasoning counts"),
    ],
)
def test_the_offline_estimate(message, tokens):
    assert estimate_tokens([message]) == tokens


def test_the_offline_estimate_adds_up_messages():
    assert estimate_tokens([UserMessage("abcd"), AssistantMessage("abcd")]) == 10
    assert estimate_tokens([]) == 0


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be > 0, got 0"),
        ({"keep_recent_tokens": -1}, ValueError, "keep_recent_tokens must be > 0, got -1"),
        (
            {"max_tokens": 1_000, "keep_recent_tokens": 1_000},
            ValueError,
            "keep_recent_tokens must be smaller than max_tokens",
        ),
        ({"max_tokens": "big"}, TypeError, "max_tokens must be an int, got str"),
        ({"max_tokens": True}, TypeError, "max_tokens must be an int, got bool"),
        ({"count_tokens": 5}, TypeError, "count_tokens must be callable or None"),
        ({"model": object()}, TypeError, r"model must have a stream\(request\) method"),
    ],
)
def test_invalid_settings_are_rejected_with_the_rule_and_the_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        CompactionExtension(**kwargs)


def test_defaults_follow_the_spec():
    extension = CompactionExtension()
    assert (extension.model, extension.max_tokens, extension.keep_recent_tokens) == (
        None,
        128_000,
        32_000,
    )
