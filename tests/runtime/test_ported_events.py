"""Event and timing shapes as the upstream library documents them (docs/runtime.md, Events).

``ModelEventType`` answers to upstream's member names too; a ``MessageAppendedEvent``
carries a ``MessageTiming`` span (``instant()`` for messages that took no time, the model
call or the tool call otherwise) and the answer's ``usage``; ``RunCancelledEvent`` shares
the instant of the move into CANCELLED; ``context.append_message`` publishes at once.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tests.runtime.support import (
    Observer,
    ProbeModel,
    answer,
    call,
    calls,
    cancel_when,
    lookup,
    parked_turn,
)
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentPhase, check_transition
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import (
    MessageAppendedEvent,
    MessageTiming,
    PhaseTransitionEvent,
    RunCancelledEvent,
)
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    ModelEvent,
    ModelEventType,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ServerToolCall,
    ServerToolDefinition,
    ServerToolInputDelta,
    ServerToolResult,
)


def test_model_event_types_answer_to_upstream_names():
    assert ModelEventType.TEXT_DELTA is ModelEventType.TEXT
    assert ModelEventType.REASONING_DELTA is ModelEventType.REASONING
    assert ModelEventType.TOOL_CALL_DELTA is ModelEventType.TOOL_CALL
    assert ModelEventType.SERVER_TOOL_INPUT_DELTA is ModelEventType.SERVER_TOOL_INPUT
    assert ModelEventType.RESPONSE is ModelEventType.COMPLETED
    completed = ModelEvent.completed(ModelResponse(AssistantMessage("x")))
    assert completed.type is ModelEventType.RESPONSE


def test_a_model_request_refuses_a_blank_cache_key():
    with pytest.raises(ValueError, match="cache_key"):
        ModelRequest(messages=(UserMessage("q"),), cache_key="   ")
    assert ModelRequest(messages=(), cache_key="s1").cache_key == "s1"


def test_an_illegal_phase_move_reads_as_upstream_s():
    with pytest.raises(AgentProtocolError, match="Invalid agent phase transition"):
        check_transition(AgentPhase.COMPLETED, AgentPhase.GENERATING)


def test_message_timing_validates_its_spans():
    now = datetime.now(UTC)
    instant = MessageTiming.instant()
    assert instant.started_at == instant.completed_at and instant.duration_ns == 0
    assert instant.started_at.tzinfo is not None
    assert instant.reasoning_duration_ns is None and instant.content_duration_ns is None
    with pytest.raises(ValueError, match="duration_ns cannot be negative"):
        MessageTiming(now, now, -1)
    with pytest.raises(ValueError, match="reasoning timing fields must be supplied together"):
        MessageTiming(now, now, 0, reasoning_started_at=now)
    with pytest.raises(ValueError, match="content_duration_ns cannot be negative"):
        MessageTiming(now, now, 0, content_started_at=now, content_completed_at=now,
                      content_duration_ns=-5)  # fmt: skip


class Appended(AgentExtension):
    def __init__(self) -> None:
        self.events: list[MessageAppendedEvent] = []
        self.phases: list[PhaseTransitionEvent] = []

    async def on_event(self, context, event):
        if isinstance(event, MessageAppendedEvent):
            self.events.append(event)
        elif isinstance(event, PhaseTransitionEvent):
            self.phases.append(event)


async def test_an_answer_is_timed_from_generating_to_ready_with_its_segments_and_usage():
    usage = ModelUsage(input_tokens=12, output_tokens=3)
    turn = [
        ModelEvent.reasoning("Checking."),
        ModelEvent.text("Answer"),
        ModelEvent.completed(ModelResponse(AssistantMessage("Answer"), usage=usage)),
    ]
    watch = Appended()
    agent = await Agent.create(ProbeModel(turn), extensions=[watch])
    await agent.run("Question")
    user, assistant = watch.events
    assert user.timing.duration_ns == 0 and user.usage is None
    timing = assistant.timing
    assert assistant.usage == usage
    generating = next(p for p in watch.phases if p.current_phase is AgentPhase.GENERATING)
    back = next(p for p in watch.phases if p.previous_phase is AgentPhase.GENERATING)
    assert (timing.started_at, timing.completed_at) == (generating.occurred_at, back.occurred_at)
    assert timing.duration_ns == back.monotonic_ns - generating.monotonic_ns
    assert timing.duration_ns >= timing.reasoning_duration_ns >= 0
    assert timing.duration_ns >= timing.content_duration_ns >= 0
    assert timing.reasoning_completed_at <= timing.content_started_at <= timing.content_completed_at


async def test_a_tool_result_is_timed_over_the_call_without_segments():
    watch = Appended()
    model = ProbeModel(calls(call("lookup", key="k")), answer("ok"))
    agent = await Agent.create(model, tools=[lookup], extensions=[watch])
    await agent.run("hi")
    result = next(e for e in watch.events if isinstance(e.message, ToolMessage))
    running = next(p for p in watch.phases if p.current_phase is AgentPhase.RUNNING_TOOL)
    assert result.timing.started_at == running.occurred_at
    assert result.timing.duration_ns >= 0
    assert result.timing.reasoning_duration_ns is None
    assert result.timing.content_duration_ns is None
    assert result.usage is None


async def test_run_cancelled_shares_the_instant_of_the_move_into_cancelled():
    reached, release = asyncio.Event(), asyncio.Event()
    watch = Observer()
    agent = await Agent.create(ProbeModel(parked_turn(reached, release)), extensions=[watch])
    await cancel_when(reached, agent.run("hi"))
    (cancelled,) = watch.cancelled
    move = watch.transitions[-1]
    assert move.current_phase is AgentPhase.CANCELLED
    assert (cancelled.occurred_at, cancelled.monotonic_ns) == (move.occurred_at, move.monotonic_ns)
    assert watch.events.index(cancelled) > watch.events.index(move)
    assert isinstance(cancelled, RunCancelledEvent)


async def test_append_message_publishes_at_once_after_earlier_additions():
    seen: list[list[str]] = []

    class Recorder(AgentExtension):
        def __init__(self) -> None:
            self.published: list[str] = []

        async def on_event(self, context, event):
            if isinstance(event, MessageAppendedEvent):
                assert event.message in context.state.messages  # in the context already
                self.published.append(event.message.content)

    recorder = Recorder()

    class Note(AgentExtension):
        async def before_run(self, context):
            context.add_message(AgentMessage("added"))
            await context.append_message(AgentMessage("appended"))
            seen.append(list(recorder.published))

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[recorder, Note()])
    await agent.run("hi", config=AgentRunConfig(session_id="s"))
    assert seen == [["hi", "added", "appended"]]  # published before append_message returned
    assert [m.content for m in agent.get_state("s").messages[-3:]] == ["added", "appended", "ok"]
    assert recorder.published == ["hi", "added", "appended", "ok"]


async def test_append_message_refuses_what_is_not_a_message():
    class Bad(AgentExtension):
        async def before_run(self, context):
            await context.append_message("text")

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Bad()])
    with pytest.raises(TypeError, match="append_message needs a message"):
        await agent.run("hi")


@pytest.mark.parametrize(
    ("configuration", "message"), [({"type": "other"}, "cannot override type")]
)
def test_a_server_tool_configuration_cannot_override_its_type(configuration, message):
    with pytest.raises(ValueError, match=message):
        ServerToolDefinition("web_search", configuration)
    with pytest.raises(ValueError, match="cannot be empty"):
        ServerToolDefinition("  ")


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        ([ModelEvent.server_tool_input(ServerToolInputDelta("h1", "{}"))], "input requires its"),
        (
            [ModelEvent.server_tool_completed(ServerToolResult("h1", "web_fetch"))],
            "result requires its matching start",
        ),
        (
            [
                ModelEvent.server_tool_started(ServerToolCall("h1", "web_fetch")),
                ModelEvent.server_tool_started(ServerToolCall("h1", "web_fetch")),
            ],
            "started more than once",
        ),
        (
            [ModelEvent.server_tool_started(ServerToolCall("h1", "web_fetch"))],
            "before server tools completed",
        ),
    ],
)
async def test_an_invalid_server_tool_lifecycle_reads_as_upstream_s(turn, message):
    agent = await Agent.create(ProbeModel([*turn, *answer("done")]))
    with pytest.raises(AgentProtocolError, match=message):
        await agent.run("Fetch it")


def test_external_event_errors_read_as_upstream_s():
    from zett_agent.extensions.external import ExternalEvent, ExternalEventExtension

    with pytest.raises(ValueError, match="name cannot be empty"):
        ExternalEvent("  ", {})
    for payload in (None, {1: "value"}):
        with pytest.raises(TypeError, match="dictionary with string keys"):
            ExternalEvent("event", payload)
    with pytest.raises(ValueError, match="response_event_name cannot be empty"):
        ExternalEventExtension(response_event_name="", correlation_field="operation_id")
    with pytest.raises(ValueError, match="correlation_field cannot be empty"):
        ExternalEventExtension(response_event_name="response", correlation_field="")


async def test_a_second_wait_for_one_key_is_already_pending():
    from zett_agent.extensions.external import ExternalEventExtension

    seen: list[str] = []

    class Twice(ExternalEventExtension):
        def __init__(self) -> None:
            super().__init__(response_event_name="response", correlation_field="operation_id")

        async def before_run(self, context):
            async with self._wait_for_external_event(context, "op-1"):
                try:
                    async with self._wait_for_external_event(context, "op-1"):
                        pass
                except RuntimeError as error:
                    seen.append(str(error))
                try:
                    self._take_external_event(context)
                except RuntimeError as error:
                    seen.append(str(error))
                raise LookupError("leave without waiting")

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Twice()])
    with pytest.raises(LookupError, match="leave without waiting"):
        await agent.run("hi")
    assert "already pending" in seen[0]
    assert "without an accepted external response" in seen[1]
