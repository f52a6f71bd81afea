"""JSON codecs for messages and events (zett_agent/serialization.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.extensions.events import CompactionEvent
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    CompactedMessage,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    ModelResponse,
    ModelUsage,
    ServerToolCall,
    ServerToolInputDelta,
    ServerToolResult,
    StopInfo,
    StopReason,
    ToolCallDelta,
)
from zett_agent.serialization import event_to_dict, message_from_dict, message_to_dict

T = AgentEventType

MESSAGES = [
    SystemMessage(content="Be brief."),
    SystemMessage(content="Kept", include_in_messages=True),
    UserMessage(content="hello"),
    UserMessage(
        content=[
            TextContent(text="What is in these pictures?"),
            ImageContent(source=ImageUrlSource(url="https://example.com/a.png"), detail="high"),
            ImageContent(
                source=ImageBytesSource(data=b"\x89PNG\r\n\x00\xff", media_type="image/png")
            ),
            ImageContent(
                source=ImageUrlSource(url="https://example.com/b.png"), alt_text="A red box"
            ),
        ],
        attributes={"client": "web", "nested": {"ids": [1, 2]}},
    ),
    AssistantMessage(content="Hi!", reasoning="The user greeted me.", provider="demo", model="m1"),
    AssistantMessage(
        tool_calls=(
            ToolCall(id="c1", name="lookup", arguments={"key": "k", "deep": {"list": [1, None]}}),
            ToolCall(id="c2", name="noop"),
        )
    ),
    ToolMessage(tool_call_id="c1", name="lookup", content="value", success=True),
    ToolMessage(tool_call_id="c2", name="noop", content="boom", success=False, persist=False),
    ToolMessage(
        tool_call_id="c3",
        name="chart",
        content=[
            TextContent(text="chart"),
            ImageContent(source=ImageUrlSource(url="data:image/png;base64,AAAA")),
        ],
    ),
    AgentMessage(content="Summarise the thread.", attributes={"source": "scheduler"}),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_exactly_through_json(message):
    encoded = json.dumps(message_to_dict(message))
    decoded = message_from_dict(json.loads(encoded))
    assert type(decoded) is type(message)
    assert decoded == message


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_dict_names_its_role_and_content(message):
    data = message_to_dict(message)
    assert data["role"] == message.role.value
    assert "content" in data


def test_round_tripped_image_bytes_are_bytes_again():
    message = UserMessage(
        content=[
            ImageContent(source=ImageBytesSource(data=bytes(range(256)), media_type="image/jpeg"))
        ]
    )
    decoded = message_from_dict(json.loads(json.dumps(message_to_dict(message))))
    assert decoded.content[0].source.data == bytes(range(256))
    assert decoded.content[0].source.media_type == "image/jpeg"


def test_round_tripped_tool_calls_are_a_tuple_of_tool_calls():
    message = AssistantMessage(tool_calls=(ToolCall(id="c1", name="t", arguments={"a": 1}),))
    decoded = message_from_dict(json.loads(json.dumps(message_to_dict(message))))
    assert isinstance(decoded.tool_calls, tuple)
    assert decoded.tool_calls[0] == ToolCall(id="c1", name="t", arguments={"a": 1})


def test_an_unknown_role_is_a_clear_error():
    with pytest.raises(ValueError, match="wizard"):
        message_from_dict({"role": "wizard", "content": "abracadabra"})


def event_dict(event: AgentEvent) -> dict:
    data = event_to_dict(event)
    assert json.loads(json.dumps(data)) == data
    return data


def test_an_event_dict_has_type_session_and_phase_and_only_its_relevant_fields():
    data = event_dict(AgentEvent(T.TEXT_DELTA, "s", AgentPhase.GENERATING, delta="Hi"))
    assert data == {"type": "text_delta", "session_id": "s", "phase": "generating", "delta": "Hi"}


def test_an_event_without_a_phase_serialises_phase_as_null():
    data = event_dict(AgentEvent(T.MODEL_STARTED, "s"))
    assert data["phase"] is None
    assert data["type"] == "model_started"


def test_a_custom_event_dict_carries_name_and_payload():
    data = event_dict(AgentEvent(T.CUSTOM, "s", name="progress", payload={"percent": 5}))
    assert data["name"] == "progress"
    assert data["payload"] == {"percent": 5}
    assert "delta" not in data
    assert "message" not in data


def test_a_failed_tool_event_turns_its_exception_into_type_and_message():
    call = ToolCall(id="c1", name="lookup", arguments={"key": "k"})
    event = AgentEvent(
        T.TOOL_FAILED,
        "s",
        AgentPhase.READY,
        tool_calls=[call],
        message=ToolMessage(tool_call_id="c1", name="lookup", content="nope", success=False),
        error=KeyError("k"),
    )
    data = event_dict(event)
    assert data["error"] == {"type": "KeyError", "message": str(KeyError("k"))}
    assert data["tool_calls"][0]["id"] == "c1"
    assert data["tool_calls"][0]["arguments"] == {"key": "k"}
    assert message_from_dict(data["message"]) == event.message


def test_a_run_completed_event_carries_the_final_message():
    final = AssistantMessage(content="Done.")
    data = event_dict(AgentEvent(T.RUN_COMPLETED, "s", AgentPhase.COMPLETED, message=final))
    assert message_from_dict(data["message"]) == final
    assert "error" not in data


def test_a_model_completed_event_carries_the_response_and_usage():
    response = ModelResponse(
        AssistantMessage(content="ok"), finish_reason="stop", usage=ModelUsage(3, 4)
    )
    data = event_dict(AgentEvent(T.MODEL_COMPLETED, "s", response=response))
    assert json.dumps(data["response"])
    assert "ok" in json.dumps(data["response"])


EVERY_TYPE_EXAMPLE = {
    T.MODEL_STARTED: {},
    T.REASONING_STARTED: {},
    T.REASONING_DELTA: {"delta": "hmm"},
    T.REASONING_COMPLETED: {},
    T.CONTENT_STARTED: {},
    T.TEXT_DELTA: {"delta": "hi"},
    T.CONTENT_COMPLETED: {},
    T.TOOL_CALL_DELTA: {
        "tool_call_delta": ToolCallDelta(index=0, id="c", name="t", arguments_delta="{")
    },
    T.SERVER_TOOL_STARTED: {
        "server_tool_call": ServerToolCall(id="s1", name="web_search", input={"q": "x"})
    },
    T.SERVER_TOOL_INPUT_DELTA: {
        "server_tool_input_delta": ServerToolInputDelta(call_id="s1", delta="{")
    },
    T.SERVER_TOOL_COMPLETED: {
        "server_tool_result": ServerToolResult(
            call_id="s1", name="web_search", output={"hits": [1]}
        )
    },
    T.SERVER_TOOL_FAILED: {
        "server_tool_result": ServerToolResult(call_id="s1", name="web_search", error="quota")
    },
    T.MODEL_COMPLETED: {"response": ModelResponse(AssistantMessage(content="x"))},
    T.MODEL_STOPPED: {
        "stop": StopInfo(StopReason.MAX_TOKENS, "length"),
        "response": ModelResponse(
            AssistantMessage(content="cut"), stop=StopInfo(StopReason.MAX_TOKENS)
        ),
        "message": AssistantMessage(content="cut"),
    },
    T.TOOL_STARTED: {"tool_calls": [ToolCall(id="c", name="t")]},
    T.TOOL_COMPLETED: {
        "tool_calls": [ToolCall(id="c", name="t")],
        "message": ToolMessage(tool_call_id="c", name="t", content="ok"),
    },
    T.TOOL_FAILED: {
        "tool_calls": [ToolCall(id="c", name="t")],
        "message": ToolMessage(tool_call_id="c", name="t", content="bad", success=False),
        "error": ValueError("bad"),
    },
    T.TOOL_SKIPPED: {
        "tool_calls": [ToolCall(id="c", name="t")],
        "message": ToolMessage(tool_call_id="c", name="t", content="skipped", success=False),
    },
    T.STEERING_STARTED: {"steering_message": UserMessage(content="stop")},
    T.STEERING_COMPLETED: {"steering_message": UserMessage(content="stop")},
    T.STEERING_INTERRUPTED: {"steering_message": UserMessage(content="stop")},
    T.INTERNAL_MESSAGE_STARTED: {"internal_message": AgentMessage(content="do")},
    T.INTERNAL_MESSAGE_COMPLETED: {"internal_message": AgentMessage(content="do")},
    T.INTERNAL_MESSAGE_INTERRUPTED: {"internal_message": AgentMessage(content="do")},
    T.COMPACTION_STARTED: {},
    T.COMPACTION_TEXT_DELTA: {"delta": "sum"},
    T.COMPACTION_REASONING_DELTA: {"delta": "think"},
    T.COMPACTION_COMPLETED: {
        "applied": True,
        "compaction": CompactionEvent(
            1,
            2,
            3,
            3,
            "summary",
            checkpoint=CompactedMessage(content="summary"),
            replaced=(UserMessage(content="old"), AssistantMessage(content="old answer")),
            messages=(CompactedMessage(content="summary"), UserMessage(content="new")),
            tokens_before=100,
            tokens_after=10,
            occurred_at=datetime(2025, 1, 2, tzinfo=UTC),
        ),
    },
    T.RUN_COMPLETED: {"message": AssistantMessage(content="done")},
    T.CUSTOM: {"name": "progress", "payload": {"percent": 1}},
}


def test_the_example_table_covers_every_event_type():
    assert set(EVERY_TYPE_EXAMPLE) == set(AgentEventType)


@pytest.mark.parametrize("kind", list(AgentEventType), ids=lambda kind: kind.value)
def test_every_event_type_becomes_a_json_safe_dict_with_its_fields(kind):
    fields = EVERY_TYPE_EXAMPLE[kind]
    data = event_dict(AgentEvent(kind, "s", AgentPhase.READY, **fields))
    assert data["type"] == kind.value
    assert data["session_id"] == "s"
    assert data["phase"] == "ready"
    for name in fields:
        assert name in data, name
    unrelated = {"delta", "payload", "name", "steering_message", "internal_message", "compaction"}
    for name in unrelated - set(fields):
        assert name not in data, name
