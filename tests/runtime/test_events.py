"""``AgentEvent`` (docs/runtime.md, Events), ``AgentEventType``, ``AgentPhase`` and extension
events."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime

import pytest

from zett_agent.events import (
    AgentEvent,
    AgentEventType,
    AgentPhase,
    runtime_event,
    streamed_event,
)
from zett_agent.extensions.events import (
    ExtensionEvent,
    InternalMessageEvent,
    MessageAppendedEvent,
    MessageTiming,
    PhaseTransitionEvent,
    RunCancelledEvent,
    SteeringMessageEvent,
    _appended,
    _moved,
)
from zett_agent.messages import AgentMessage, AssistantMessage, ToolCall, UserMessage
from zett_agent.model import ModelUsage, ToolCallDelta

SEED_FIELD_ORDER = [
    "type",
    "session_id",
    "phase",
    "delta",
    "tool_call_delta",
    "tool_calls",
    "server_tool_call",
    "server_tool_input_delta",
    "server_tool_result",
    "response",
    "stop",
    "message",
    "internal_message",
    "steering_message",
    "error",
    "compaction",
    "applied",
    "name",
    "payload",
]


def test_the_event_type_enum_has_exactly_the_thirty_documented_members():
    assert [member.name for member in AgentEventType] == [
        "MODEL_STARTED",
        "REASONING_STARTED",
        "REASONING_DELTA",
        "REASONING_COMPLETED",
        "CONTENT_STARTED",
        "TEXT_DELTA",
        "CONTENT_COMPLETED",
        "TOOL_CALL_DELTA",
        "SERVER_TOOL_STARTED",
        "SERVER_TOOL_INPUT_DELTA",
        "SERVER_TOOL_COMPLETED",
        "SERVER_TOOL_FAILED",
        "MODEL_COMPLETED",
        "MODEL_STOPPED",
        "TOOL_STARTED",
        "TOOL_COMPLETED",
        "TOOL_FAILED",
        "TOOL_SKIPPED",
        "STEERING_STARTED",
        "STEERING_COMPLETED",
        "STEERING_INTERRUPTED",
        "INTERNAL_MESSAGE_STARTED",
        "INTERNAL_MESSAGE_COMPLETED",
        "INTERNAL_MESSAGE_INTERRUPTED",
        "COMPACTION_STARTED",
        "COMPACTION_TEXT_DELTA",
        "COMPACTION_REASONING_DELTA",
        "COMPACTION_COMPLETED",
        "RUN_COMPLETED",
        "CUSTOM",
    ]


def test_event_type_values_are_the_lower_case_names():
    for member in AgentEventType:
        assert member.value == member.name.lower()


def test_agent_event_has_the_seed_constructor_in_the_seed_order():
    parameters = list(inspect.signature(AgentEvent).parameters)
    assert parameters == SEED_FIELD_ORDER
    assert [field.name for field in dataclasses.fields(AgentEvent)] == SEED_FIELD_ORDER


def test_only_type_and_session_are_required():
    event = AgentEvent(AgentEventType.TEXT_DELTA, "session-1")
    assert event.session_id == "session-1"
    assert event.phase is None
    assert event.delta == ""
    assert event.tool_calls == []
    for name in SEED_FIELD_ORDER[6:]:
        assert getattr(event, name) is None, name


def test_the_fields_can_be_given_positionally_in_seed_order():
    event = AgentEvent(AgentEventType.TEXT_DELTA, "s", AgentPhase.GENERATING, "hi")
    assert event.phase is AgentPhase.GENERATING
    assert event.delta == "hi"


def test_every_event_gets_its_own_tool_call_list():
    first = AgentEvent(AgentEventType.TOOL_STARTED, "s")
    second = AgentEvent(AgentEventType.TOOL_STARTED, "s")
    first.tool_calls.append(ToolCall(id="1", name="t"))
    assert second.tool_calls == []


@pytest.mark.parametrize(
    ("kind", "delta", "tool_call_delta"),
    [
        (AgentEventType.TEXT_DELTA, "Hel", None),
        (AgentEventType.REASONING_DELTA, "", None),
        (AgentEventType.TOOL_CALL_DELTA, "", ToolCallDelta(0, "call_1", "add", '{"a"')),
    ],
)
def test_the_fast_streamed_event_equals_the_dataclass_one_field_by_field(
    kind, delta, tool_call_delta
):
    fast = streamed_event(kind, "s1", delta, tool_call_delta)
    built = AgentEvent(kind, "s1", delta=delta, tool_call_delta=tool_call_delta)

    assert type(fast) is AgentEvent
    for field in dataclasses.fields(AgentEvent):  # a field it forgot would not be set at all
        assert getattr(fast, field.name) == getattr(built, field.name), field.name
    assert fast == built
    assert fast.tool_calls is not streamed_event(kind, "s1", delta).tool_calls
    stamped = streamed_event(kind, "s1", delta, tool_call_delta, AgentPhase.GENERATING)
    assert stamped == AgentEvent(
        kind, "s1", AgentPhase.GENERATING, delta=delta, tool_call_delta=tool_call_delta
    )


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"tool_calls": [ToolCall(id="1", name="t")]},
        {"message": AssistantMessage(content="done")},
        {"tool_calls": [ToolCall(id="1", name="t")], "error": ValueError("no")},
    ],
)
def test_the_fast_runtime_event_equals_the_dataclass_one_field_by_field(fields):
    fast = runtime_event(AgentEventType.TOOL_COMPLETED, "s1", **fields)
    built = AgentEvent(AgentEventType.TOOL_COMPLETED, "s1", **fields)

    assert type(fast) is AgentEvent
    for field in dataclasses.fields(AgentEvent):
        assert getattr(fast, field.name) == getattr(built, field.name), field.name
    assert fast.tool_calls is not runtime_event(AgentEventType.TOOL_STARTED, "s").tool_calls


def test_a_custom_event_carries_a_name_and_payload():
    event = AgentEvent(
        AgentEventType.CUSTOM, session_id="s", name="progress", payload={"percent": 50}
    )
    assert event.name == "progress"
    assert event.payload == {"percent": 50}


@pytest.mark.parametrize("name", [None, "", "   "])
def test_a_custom_event_without_a_name_is_rejected(name):
    with pytest.raises(ValueError, match="name"):
        AgentEvent(AgentEventType.CUSTOM, session_id="s", name=name, payload={})


def test_a_custom_event_can_be_built_with_keyword_arguments_as_in_seed_000():
    event = AgentEvent(
        AgentEventType.CUSTOM,
        session_id="session-42",
        name="confirmation_requested",
        payload={"tool_call_id": "call-7", "question": "Proceed?"},
    )
    assert event.type is AgentEventType.CUSTOM


def test_an_event_type_given_by_value_becomes_the_enum_member():
    assert AgentEvent("text_delta", "s").type is AgentEventType.TEXT_DELTA


def test_agent_events_may_be_subclassed():
    @dataclasses.dataclass
    class ProgressEvent(AgentEvent):
        pass

    event = ProgressEvent(AgentEventType.CUSTOM, "s", name="progress", payload={})
    assert isinstance(event, AgentEvent)
    with pytest.raises(ValueError):
        ProgressEvent(AgentEventType.CUSTOM, "s")


def test_the_phase_enum_has_the_documented_members():
    assert [phase.name for phase in AgentPhase] == [
        "CREATED",
        "LOADING_CONTEXT",
        "READY",
        "COMPACTING",
        "GENERATING",
        "RUNNING_TOOL",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
    ]


def test_usage_belongs_to_an_assistant_answer_only():
    now = datetime.now(UTC)
    timing = MessageTiming(now, now, 0)
    usage = ModelUsage(input_tokens=3, output_tokens=1)
    assert MessageAppendedEvent(AssistantMessage(content="hi"), timing, usage).usage == usage
    with pytest.raises(ValueError, match="usage belongs to an assistant answer"):
        MessageAppendedEvent(UserMessage(content="hi"), timing, usage)


def test_the_runtime_s_fast_extension_events_equal_the_dataclass_ones():
    now = datetime.now(UTC)
    timing = MessageTiming(now, now, 0)
    usage = ModelUsage(input_tokens=3, output_tokens=1)
    moved = (AgentPhase.READY, AgentPhase.GENERATING, now, 7)
    assert _moved(*moved) == PhaseTransitionEvent(*moved)
    assert type(_moved(*moved)) is PhaseTransitionEvent
    answer = AssistantMessage(content="hi")
    assert _appended(answer, timing, usage) == MessageAppendedEvent(answer, timing, usage)
    question = UserMessage(content="hi")
    assert _appended(question, timing, None) == MessageAppendedEvent(question, timing)


def test_every_extension_event_derives_from_extension_event():
    now = datetime.now(UTC)
    events = [
        MessageAppendedEvent(UserMessage(content="hi"), MessageTiming(now, now, 0)),
        PhaseTransitionEvent(AgentPhase.CREATED, AgentPhase.LOADING_CONTEXT, now, 1),
        RunCancelledEvent(AgentPhase.GENERATING, now, 1),
        SteeringMessageEvent(UserMessage(content="stop")),
        InternalMessageEvent(AgentMessage(content="summarise")),
    ]
    assert all(isinstance(event, ExtensionEvent) for event in events)


def test_phase_transition_events_name_both_phases():
    now = datetime.now(UTC)
    event = PhaseTransitionEvent(
        previous_phase=AgentPhase.READY,
        current_phase=AgentPhase.GENERATING,
        occurred_at=now,
        monotonic_ns=7,
    )
    assert (event.previous_phase, event.current_phase) == (AgentPhase.READY, AgentPhase.GENERATING)


def test_a_steering_event_needs_a_user_message():
    with pytest.raises(TypeError, match="UserMessage"):
        SteeringMessageEvent(AgentMessage(content="x"))  # type: ignore[arg-type]


def test_an_internal_message_event_needs_an_agent_message():
    with pytest.raises(TypeError, match="AgentMessage"):
        InternalMessageEvent(UserMessage(content="x"))  # type: ignore[arg-type]
