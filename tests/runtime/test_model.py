"""The model protocol's data types (docs/runtime.md, Events)."""

from __future__ import annotations

import dataclasses

import pytest

from zett_agent.messages import AssistantMessage, UserMessage
from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelEventType,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    ServerToolCall,
    ServerToolDefinition,
    ServerToolInputDelta,
    ServerToolResult,
    StopInfo,
    StopReason,
    ToolCallDelta,
    ToolDefinition,
    runtime_request,
)


def test_a_request_has_documented_defaults():
    request = ModelRequest(messages=(UserMessage(content="hi"),))
    assert request.tools == ()
    assert request.server_tools == ()
    assert request.reasoning_effort is ReasoningEffort.MEDIUM
    assert request.tool_choice is None
    assert request.cache_key is None


def test_a_request_is_frozen():
    request = ModelRequest(messages=())
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.tool_choice = "auto"  # type: ignore[misc]


def test_usage_counts_default_to_zero_and_total_input_plus_output():
    assert ModelUsage().total_tokens == 0
    usage = ModelUsage(input_tokens=10, output_tokens=5, cache_read_tokens=3, reasoning_tokens=2)
    assert usage.total_tokens == 15
    assert usage.cache_write_tokens == 0


@pytest.mark.parametrize(
    "field",
    [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ],
)
def test_usage_rejects_negative_counts(field):
    with pytest.raises(ValueError, match=field):
        ModelUsage(**{field: -1})


def test_usage_rejects_counts_that_are_not_integers():
    with pytest.raises(TypeError, match="input_tokens"):
        ModelUsage(input_tokens=1.5)  # type: ignore[arg-type]


def test_stop_reasons_have_the_documented_values():
    assert {reason.value for reason in StopReason} == {
        "max_tokens",
        "content_filter",
        "refusal",
        "other",
    }


def test_stop_info_accepts_a_reason_by_value():
    stop = StopInfo("max_tokens", detail="length")
    assert stop.reason is StopReason.MAX_TOKENS
    assert stop.detail == "length"


def test_stop_info_rejects_an_unknown_reason():
    with pytest.raises(ValueError):
        StopInfo("tired")  # type: ignore[arg-type]


def test_a_response_is_normal_unless_stop_is_set():
    response = ModelResponse(AssistantMessage(content="hi"))
    assert response.stop is None
    assert response.finish_reason is None
    assert response.usage == ModelUsage()


def test_a_response_needs_an_assistant_message():
    with pytest.raises(TypeError, match="AssistantMessage"):
        ModelResponse(UserMessage(content="hi"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event", "kind", "field", "value"),
    [
        (ModelEvent.text("a"), ModelEventType.TEXT, "delta", "a"),
        (ModelEvent.reasoning("b"), ModelEventType.REASONING, "delta", "b"),
        (
            ModelEvent.tool_call(ToolCallDelta(index=0, id="c", name="t")),
            ModelEventType.TOOL_CALL,
            "tool_call_delta",
            ToolCallDelta(index=0, id="c", name="t"),
        ),
        (
            ModelEvent.server_tool_started(ServerToolCall(id="s", name="web_search")),
            ModelEventType.SERVER_TOOL_STARTED,
            "server_tool_call",
            ServerToolCall(id="s", name="web_search"),
        ),
        (
            ModelEvent.server_tool_input(ServerToolInputDelta(call_id="s", delta="{")),
            ModelEventType.SERVER_TOOL_INPUT,
            "server_tool_input_delta",
            ServerToolInputDelta(call_id="s", delta="{"),
        ),
        (
            ModelEvent.server_tool_completed(ServerToolResult(call_id="s", name="web_search")),
            ModelEventType.SERVER_TOOL_COMPLETED,
            "server_tool_result",
            ServerToolResult(call_id="s", name="web_search"),
        ),
        (
            ModelEvent.server_tool_failed(
                ServerToolResult(call_id="s", name="web_search", error="quota")
            ),
            ModelEventType.SERVER_TOOL_FAILED,
            "server_tool_result",
            ServerToolResult(call_id="s", name="web_search", error="quota"),
        ),
        (
            ModelEvent.completed(ModelResponse(AssistantMessage(content="x"))),
            ModelEventType.COMPLETED,
            "response",
            ModelResponse(AssistantMessage(content="x")),
        ),
    ],
    ids=lambda value: value.value if isinstance(value, ModelEventType) else None,
)
def test_each_model_event_factory_sets_its_type_and_payload(event, kind, field, value):
    assert event.type is kind
    assert getattr(event, field) == value


def test_a_tool_definition_defaults_to_an_object_schema():
    definition = ToolDefinition(name="t", description="d")
    assert definition.parameters == {"type": "object", "properties": {}}


def test_a_server_tool_needs_a_type():
    assert ServerToolDefinition(type="web_search").configuration == {}
    with pytest.raises(ValueError, match="type"):
        ServerToolDefinition(type=" ")


def test_any_object_with_a_stream_method_is_an_agent_model():
    class EchoModel:
        async def stream(self, request):
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="echo")))

    assert isinstance(EchoModel(), AgentModel)
    assert not isinstance(object(), AgentModel)


def test_the_runtime_request_equals_the_dataclass_one_field_by_field():
    messages = (UserMessage(content="hi"),)
    tools = (ToolDefinition("add", "Add.", {"type": "object"}),)
    server_tools = (ServerToolDefinition("web_search"),)
    fast = runtime_request(messages, tools, server_tools, "session-1")
    slow = ModelRequest(messages, tools, server_tools, cache_key="session-1")
    assert type(fast) is ModelRequest
    for field in dataclasses.fields(ModelRequest):
        assert getattr(fast, field.name) is getattr(slow, field.name), field.name
    assert fast == slow
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.tool_choice = "auto"  # type: ignore[misc]
