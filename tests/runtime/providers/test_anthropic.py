"""AnthropicModel against a local server speaking the Messages streaming format: what it
sends, how it maps the stream, and a whole agent run over it (the request mapping of images,
history and tool results is in ``test_anthropic_requests``)."""

from __future__ import annotations

from typing import Any

import pytest

from zett_agent.agent import Agent
from zett_agent.events import AgentEventType
from zett_agent.messages import ToolCall, UserMessage
from zett_agent.model import (
    ModelEvent,
    ModelEventType,
    ModelRequest,
    ModelUsage,
    ReasoningEffort,
    ServerToolCall,
    ServerToolDefinition,
    ServerToolInputDelta,
    ServerToolResult,
    StopReason,
    ToolCallDelta,
)
from zett_agent.providers.anthropic import SIGNATURE_ATTRIBUTE, AnthropicModel
from zett_agent.providers.base import ProviderResponseError

from .anthropic_events import (
    MODEL,
    block_delta,
    block_start,
    block_stop,
    json_delta,
    message_end,
    message_start,
    text_delta,
    text_stream,
    tool_use_stream,
)
from .fake_server import FakeServer, Reply
from .support import agent_events, ask_weather_in_oslo, collect, deltas, run_stopped_early

# --- streaming ---------------------------------------------------------------------------


async def test_plain_text_streams_as_text_deltas_and_completes_with_the_message(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(text_stream("Hel", "lo", "!")))

    events = await collect(anthropic_model)

    assert deltas(events, ModelEventType.TEXT) == ["Hel", "lo", "!"]
    response = events[-1].response
    assert events[-1].type is ModelEventType.COMPLETED
    assert response.message.content == "Hello!"
    assert (response.message.provider, response.message.model) == ("anthropic", MODEL)
    assert response.response_id == "msg_1"  # the provider's id of the response
    assert (response.finish_reason, response.stop) == ("end_turn", None)


async def test_request_reaches_the_messages_endpoint_with_key_system_and_streaming(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(text_stream("ok")))

    await collect(anthropic_model)

    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["authorization"] == "Bearer sk-ant-test"  # how this SDK sends keys
    assert "anthropic-version" in request.headers
    body = request.json()
    assert body == {
        "model": MODEL,
        "max_tokens": 4096,
        "stream": True,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}],
    }


async def test_thinking_streams_as_reasoning_and_keeps_its_signature_for_replay(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                block_delta(0, {"type": "thinking_delta", "thinking": "Two plus two "}),
                block_delta(0, {"type": "thinking_delta", "thinking": "is four."}),
                block_delta(0, {"type": "signature_delta", "signature": "sig-abc"}),
                block_stop(0),
                block_start(1, {"type": "text", "text": ""}),
                text_delta(1, "It is 4."),
                block_stop(1),
                *message_end(),
            ]
        )
    )

    events = await collect(anthropic_model)

    assert [item.type for item in events] == [
        ModelEventType.REASONING,
        ModelEventType.REASONING,
        ModelEventType.TEXT,
        ModelEventType.COMPLETED,
    ]
    message = events[-1].response.message
    assert message.reasoning == "Two plus two is four."
    assert message.content == "It is 4."
    assert message.attributes == {SIGNATURE_ATTRIBUTE: "sig-abc"}


@pytest.mark.parametrize(
    ("effort", "thinking", "max_tokens"),
    [
        (ReasoningEffort.NONE, None, 4096),
        (ReasoningEffort.MEDIUM, None, 4096),
        (ReasoningEffort.LOW, {"type": "enabled", "budget_tokens": 1024}, 4096 + 1024),
        (ReasoningEffort.HIGH, {"type": "enabled", "budget_tokens": 8192}, 4096 + 8192),
    ],
)
async def test_reasoning_effort_maps_to_a_thinking_budget_on_top_of_max_tokens(
    server: FakeServer,
    anthropic_model: AnthropicModel,
    effort: ReasoningEffort,
    thinking: dict[str, Any] | None,
    max_tokens: int,
) -> None:
    server.reply(Reply.stream(text_stream("ok")))

    await collect(
        anthropic_model, ModelRequest(messages=(UserMessage("hi"),), reasoning_effort=effort)
    )

    body = server.requests[0].json()
    assert body.get("thinking") == thinking
    assert body["max_tokens"] == max_tokens


async def test_one_tool_call_with_arguments_split_across_chunks_is_assembled(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Let me check."),
                block_stop(0),
                block_start(
                    1, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
                ),
                json_delta(1, '{"ci'),
                json_delta(1, 'ty": "Par'),
                json_delta(1, 'is"}'),
                block_stop(1),
                *message_end("tool_use"),
            ]
        )
    )

    events = await collect(anthropic_model)

    assert [item.tool_call_delta for item in events if item.type is ModelEventType.TOOL_CALL] == [
        ToolCallDelta(0, "toolu_1", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"ci'),
        ToolCallDelta(0, None, None, 'ty": "Par'),
        ToolCallDelta(0, None, None, 'is"}'),
    ]
    response = events[-1].response
    assert response.message.content == "Let me check."
    assert response.message.tool_calls == (ToolCall("toolu_1", "get_weather", {"city": "Paris"}),)
    assert (response.finish_reason, response.stop) == ("tool_use", None)


async def test_several_tool_calls_are_numbered_in_order_and_parameterless_ones_get_no_arguments(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(0, {"type": "tool_use", "id": "toolu_a", "name": "get_weather"}),
                json_delta(0, '{"city": '),
                json_delta(0, '"Oslo"}'),
                block_stop(0),
                block_start(1, {"type": "tool_use", "id": "toolu_b", "name": "get_weather"}),
                json_delta(1, '{"city": "Rome"}'),
                block_stop(1),
                block_start(2, {"type": "tool_use", "id": "toolu_c", "name": "get_time"}),
                block_stop(2),
                *message_end("tool_use"),
            ]
        )
    )

    events = await collect(anthropic_model)

    indexes = [e.tool_call_delta.index for e in events if e.type is ModelEventType.TOOL_CALL]
    assert indexes == [0, 0, 0, 1, 1, 2]
    assert events[-1].response.message.tool_calls == (
        ToolCall("toolu_a", "get_weather", {"city": "Oslo"}),
        ToolCall("toolu_b", "get_weather", {"city": "Rome"}),
        ToolCall("toolu_c", "get_time", {}),
    )


async def test_server_tools_are_sent_and_reported_as_server_tool_events(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    results = [{"type": "web_search_result", "title": "Zett", "url": "https://zett.test"}]
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(
                    0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
                ),
                json_delta(0, '{"query": '),
                json_delta(0, '"zett"}'),
                block_stop(0),
                block_start(
                    1,
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": results,
                    },
                ),
                block_stop(1),
                block_start(
                    2, {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search"}
                ),
                block_stop(2),
                block_start(
                    3,
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_2",
                        "content": {
                            "type": "web_search_tool_result_error",
                            "error_code": "max_uses_exceeded",
                        },
                    },
                ),
                block_stop(3),
                block_start(4, {"type": "text", "text": ""}),
                text_delta(4, "Zett is an agent runtime."),
                block_stop(4),
                *message_end(usage={"server_tool_use": {"web_search_requests": 2}}),
            ]
        )
    )
    search = ServerToolDefinition("web_search_20250305", {"max_uses": 2})

    events = await collect(
        anthropic_model,
        ModelRequest(messages=(UserMessage("What is zett?"),), server_tools=(search,)),
    )

    assert server.requests[0].json()["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    ]
    assert events[:-2] == [
        ModelEvent.server_tool_started(ServerToolCall("srvtoolu_1", "web_search", {})),
        ModelEvent.server_tool_input(ServerToolInputDelta("srvtoolu_1", '{"query": ')),
        ModelEvent.server_tool_input(ServerToolInputDelta("srvtoolu_1", '"zett"}')),
        ModelEvent.server_tool_completed(ServerToolResult("srvtoolu_1", "web_search", results)),
        ModelEvent.server_tool_started(ServerToolCall("srvtoolu_2", "web_search", {})),
        ModelEvent.server_tool_failed(
            ServerToolResult(
                "srvtoolu_2",
                "web_search",
                {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
                "max_uses_exceeded",
            )
        ),
    ]
    assert events[-2] == ModelEvent.text("Zett is an agent runtime.")
    message = events[-1].response.message
    assert (message.content, message.tool_calls) == ("Zett is an agent runtime.", ())


async def test_usage_adds_cached_input_and_reports_cache_and_thinking_tokens(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(
                    input_tokens=20, cache_read_input_tokens=100, cache_creation_input_tokens=30
                ),
                block_start(0, {"type": "text", "text": ""}),
                text_delta(0, "Hi"),
                block_stop(0),
                *message_end(
                    output_tokens=42, usage={"output_tokens_details": {"thinking_tokens": 12}}
                ),
            ]
        )
    )

    events = await collect(anthropic_model)

    assert events[-1].response.usage == ModelUsage(
        input_tokens=150,
        output_tokens=42,
        cache_read_tokens=100,
        cache_write_tokens=30,
        reasoning_tokens=12,
    )


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("max_tokens", StopReason.MAX_TOKENS),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("refusal", StopReason.REFUSAL),
        ("pause_turn", StopReason.OTHER),
    ],
)
async def test_abnormal_stop_reasons_set_stop_info(
    server: FakeServer, anthropic_model: AnthropicModel, stop_reason: str, reason: StopReason
) -> None:
    server.reply(Reply.stream(text_stream("Once upon a", stop_reason=stop_reason)))

    response = (await collect(anthropic_model))[-1].response

    assert response.stop is not None
    assert (response.stop.reason, response.stop.detail) == (reason, stop_reason)
    assert response.finish_reason == stop_reason


async def test_a_refusal_with_details_carries_the_explanation(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    details = {"type": "refusal", "category": "cyber", "explanation": "Exploit development."}
    server.reply(
        Reply.stream(
            [
                message_start(),
                *message_end("refusal", delta={"stop_details": details}),
            ]
        )
    )

    response = (await collect(anthropic_model))[-1].response

    assert response.stop.reason is StopReason.REFUSAL
    assert response.stop.detail == "Exploit development."


async def test_a_stream_cut_before_the_stop_reason_is_a_response_error(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream([message_start(), block_start(0, {"type": "text", "text": ""})]))

    with pytest.raises(ProviderResponseError, match="ended without a stop reason"):
        await collect(anthropic_model)


async def test_malformed_tool_arguments_raise_a_response_error_naming_the_tool(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(tool_use_stream("toolu_x", "get_weather", '{"city": Paris}')))

    with pytest.raises(ProviderResponseError, match=r"malformed JSON arguments.*'get_weather'"):
        await collect(anthropic_model)


# --- through the agent -------------------------------------------------------------------


async def test_an_agent_runs_a_whole_tool_loop_over_the_api(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(tool_use_stream("toolu_1", "get_weather", '{"city"', ': "Oslo"}')),
        Reply.stream(text_stream("It is ", "sunny in Oslo.")),
    )

    first, second = await ask_weather_in_oslo(anthropic_model, server)

    assert first["system"].startswith("Be brief.")
    assert first["tools"][0]["name"] == "get_weather"
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny in Oslo"}
            ],
        },
    ]


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [("max_tokens", StopReason.MAX_TOKENS), ("refusal", StopReason.REFUSAL)],
)
async def test_an_abnormal_stop_ends_the_agent_run_with_model_stopped(
    server: FakeServer, anthropic_model: AnthropicModel, stop_reason: str, reason: StopReason
) -> None:
    server.reply(Reply.stream(text_stream("Once upon", stop_reason=stop_reason)))

    stop = await run_stopped_early(anthropic_model, server)

    assert stop.reason is reason


async def test_server_tool_events_reach_the_agent_stream(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(
        Reply.stream(
            [
                message_start(),
                block_start(
                    0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
                ),
                json_delta(0, '{"query": "zett"}'),
                block_stop(0),
                block_start(
                    1,
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                ),
                block_stop(1),
                block_start(2, {"type": "text", "text": ""}),
                text_delta(2, "Nothing found."),
                block_stop(2),
                *message_end(),
            ]
        )
    )
    agent = await Agent.create(anthropic_model)

    events = await agent_events(agent, "Search zett")

    kinds = [item.type for item in events]
    assert [kind for kind in kinds if kind.name.startswith("SERVER_TOOL")] == [
        AgentEventType.SERVER_TOOL_STARTED,
        AgentEventType.SERVER_TOOL_INPUT_DELTA,
        AgentEventType.SERVER_TOOL_COMPLETED,
    ]
    assert events[-1].message.content == "Nothing found."
