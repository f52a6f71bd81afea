"""OpenAIModel against a local server speaking the Chat Completions streaming format:
what it sends, how it maps the stream, and a whole agent run over it."""

from __future__ import annotations

import base64

import pytest

from zett_agent.agent import Agent
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
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
    ModelEventType,
    ModelRequest,
    ModelUsage,
    ReasoningEffort,
    ServerToolDefinition,
    StopReason,
    ToolCallDelta,
    ToolDefinition,
)
from zett_agent.providers.base import ProviderAuthError, ProviderResponseError
from zett_agent.providers.openai import OpenAIModel

from .fake_server import FakeServer, Reply, sse
from .openai_chunks import DONE, MODEL, chunk, text_stream, tool_call_stream, tool_fragment
from .support import Adapters, ask_weather_in_oslo, collect, deltas, run_stopped_early

# --- streaming ---------------------------------------------------------------------------


async def test_plain_text_streams_as_text_deltas_and_completes_with_the_message(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(text_stream("Hel", "lo", "!")))

    events = await collect(openai_model)

    assert deltas(events, ModelEventType.TEXT) == ["Hel", "lo", "!"]
    assert [event.type for event in events][-1] is ModelEventType.COMPLETED
    response = events[-1].response
    assert response is not None
    assert response.message.content == "Hello!"
    assert response.message.reasoning is None
    assert (response.message.provider, response.message.model) == ("openai", MODEL)
    assert response.response_id == "chatcmpl-1"  # the provider's id of the response
    assert (response.finish_reason, response.stop) == ("stop", None)


async def test_request_reaches_the_chat_completions_endpoint_with_key_and_streaming_options(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(text_stream("ok")))

    await collect(openai_model)

    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json()
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]
    # MEDIUM is the default, so models without a reasoning knob never see one.
    assert "reasoning_effort" not in body
    assert "tools" not in body


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_streams_before_text_and_lands_in_the_message(
    server: FakeServer, openai_model: OpenAIModel, field: str
) -> None:
    server.reply(
        Reply.stream(
            [
                chunk({"role": "assistant", field: "Two plus "}),
                chunk({field: "two is four."}),
                chunk({"content": "It is "}),
                chunk({"content": "4."}),
                chunk(finish="stop"),
                DONE,
            ]
        )
    )

    events = await collect(openai_model)

    assert [event.type for event in events] == [
        ModelEventType.REASONING,
        ModelEventType.REASONING,
        ModelEventType.TEXT,
        ModelEventType.TEXT,
        ModelEventType.COMPLETED,
    ]
    message = events[-1].response.message
    assert message.reasoning == "Two plus two is four."
    assert message.content == "It is 4."


async def test_one_tool_call_with_arguments_split_across_chunks_is_assembled(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(
        Reply.stream(
            [
                chunk({"role": "assistant", "content": None}),
                tool_fragment(0, "", call_id="call_w1", name="get_weather"),
                tool_fragment(0, '{"ci'),
                tool_fragment(0, 'ty": "Par'),
                tool_fragment(0, 'is", "days": 2}'),
                chunk(finish="tool_calls"),
                DONE,
            ]
        )
    )

    events = await collect(openai_model)

    assert [event.tool_call_delta for event in events[:-1]] == [
        ToolCallDelta(0, "call_w1", "get_weather", ""),
        ToolCallDelta(0, None, None, '{"ci'),
        ToolCallDelta(0, None, None, 'ty": "Par'),
        ToolCallDelta(0, None, None, 'is", "days": 2}'),
    ]
    response = events[-1].response
    assert response.message.tool_calls == (
        ToolCall("call_w1", "get_weather", {"city": "Paris", "days": 2}),
    )
    assert (response.finish_reason, response.stop) == ("tool_calls", None)


async def test_several_interleaved_tool_calls_keep_their_order_and_arguments(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(
        Reply.stream(
            [
                chunk({"content": "Checking both."}),
                tool_fragment(0, '{"city":', call_id="call_a", name="get_weather"),
                tool_fragment(1, '{"ci', call_id="call_b", name="get_weather"),
                tool_fragment(0, ' "Oslo"}'),
                tool_fragment(1, 'ty": "Rome"}'),
                tool_fragment(2, "", call_id="call_c", name="get_time"),
                chunk(finish="tool_calls"),
                DONE,
            ]
        )
    )

    events = await collect(openai_model)

    indexes = [e.tool_call_delta.index for e in events if e.type is ModelEventType.TOOL_CALL]
    assert indexes == [0, 1, 0, 1, 2]
    message = events[-1].response.message
    assert message.content == "Checking both."
    assert message.tool_calls == (
        ToolCall("call_a", "get_weather", {"city": "Oslo"}),
        ToolCall("call_b", "get_weather", {"city": "Rome"}),
        ToolCall("call_c", "get_time", {}),
    )


async def test_usage_with_cached_and_reasoning_tokens_is_reported(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    server.reply(Reply.stream([*text_stream("Hi")[:-1], chunk(choices=False, usage=usage), DONE]))

    events = await collect(openai_model)

    assert events[-1].response.usage == ModelUsage(
        input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=12
    )


@pytest.mark.parametrize(
    ("finish", "reason"),
    [("length", StopReason.MAX_TOKENS), ("content_filter", StopReason.CONTENT_FILTER)],
)
async def test_abnormal_finish_reasons_set_stop_info(
    server: FakeServer, openai_model: OpenAIModel, finish: str, reason: StopReason
) -> None:
    server.reply(Reply.stream(text_stream("Once upon a", finish=finish)))

    response = (await collect(openai_model))[-1].response

    assert response.stop is not None
    assert (response.stop.reason, response.stop.detail) == (reason, finish)
    assert response.finish_reason == finish
    assert response.message.content == "Once upon a"


async def test_a_refusal_becomes_the_content_and_stops_with_refusal(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(
        Reply.stream(
            [
                chunk({"role": "assistant", "refusal": "I can't "}),
                chunk({"refusal": "help with that."}),
                chunk(finish="stop"),
                DONE,
            ]
        )
    )

    events = await collect(openai_model)

    assert deltas(events, ModelEventType.TEXT) == ["I can't ", "help with that."]
    response = events[-1].response
    assert response.message.content == "I can't help with that."
    assert response.stop.reason is StopReason.REFUSAL


async def test_an_unknown_finish_reason_stops_with_other(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(text_stream("partial", finish="abort")))

    response = (await collect(openai_model))[-1].response

    assert (response.stop.reason, response.stop.detail) == (StopReason.OTHER, "abort")


async def test_a_stream_cut_before_the_finish_reason_is_a_response_error(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream([chunk({"content": "Hel"})]))

    with pytest.raises(ProviderResponseError, match="ended without a finish reason"):
        await collect(openai_model)


async def test_malformed_tool_arguments_raise_a_response_error_naming_the_tool(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(tool_call_stream("call_x", "get_weather", '{"city": "Par', "is")))

    with pytest.raises(ProviderResponseError, match=r"malformed JSON arguments.*'get_weather'"):
        await collect(openai_model)


# --- request mapping ---------------------------------------------------------------------


async def test_images_in_a_user_message_are_sent_as_image_url_parts(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(text_stream("A cat.")))
    png = b"\x89PNG\r\n\x1a\nfake"
    message = UserMessage(
        [
            TextContent("What is in these pictures?"),
            ImageContent(ImageUrlSource("https://example.test/cat.jpg"), detail="low"),
            ImageContent(ImageBytesSource(png, "image/png")),
        ]
    )

    await collect(openai_model, ModelRequest(messages=(message,)))

    [sent] = server.requests[0].json()["messages"]
    encoded = base64.b64encode(png).decode()
    assert sent == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these pictures?"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.test/cat.jpg", "detail": "low"},
            },
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}},
        ],
    }


async def test_history_tools_and_options_are_mapped_to_chat_completions_fields(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.stream(text_stream("done")))
    chart = ImageContent(ImageBytesSource(b"GIF89a", "image/gif"))
    request = ModelRequest(
        messages=(
            SystemMessage("Be brief."),
            UserMessage("Weather in Oslo and Rome?"),
            AssistantMessage(
                "",
                reasoning="I should call the tool twice.",
                tool_calls=(
                    ToolCall("call_a", "get_weather", {"city": "Oslo"}),
                    ToolCall("call_b", "get_weather", {"city": "Rome"}),
                ),
            ),
            ToolMessage("call_a", "get_weather", [TextContent("Sunny"), chart]),
            ToolMessage("call_b", "get_weather", "city not found", success=False),
            AgentMessage("Answer in one line."),
        ),
        tools=(ToolDefinition("get_weather", "Current weather.", {"type": "object"}),),
        tool_choice="get_weather",
        reasoning_effort=ReasoningEffort.HIGH,
        server_tools=(ServerToolDefinition("web_search_20250305"),),
        cache_key="session-1",
    )

    await collect(openai_model, request)

    body = server.requests[0].json()
    assert body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Tool call failed: city not found"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by tool 'get_weather' (call call_a):"},
                {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lGODlh"}},
            ],
        },
        {"role": "user", "content": "Answer in one line."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather.",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["reasoning_effort"] == "high"
    # A compatible server gets neither OpenAI-only field.
    assert "prompt_cache_key" not in body


async def test_max_tokens_uses_the_field_compatible_servers_understand(
    server: FakeServer, adapters: Adapters
) -> None:
    server.reply(Reply.stream(text_stream("ok")))

    await collect(adapters.openai(max_tokens=64))

    body = server.requests[0].json()
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body


# --- through the agent -------------------------------------------------------------------


async def test_an_agent_runs_a_whole_tool_loop_over_the_api(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(
        Reply.stream(tool_call_stream("call_1", "get_weather", '{"city"', ': "Oslo"}')),
        Reply.stream(text_stream("It is ", "sunny in Oslo.")),
    )

    first, second = await ask_weather_in_oslo(openai_model, server)

    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny in Oslo"},
    ]


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (text_stream("Once upon", finish="length"), StopReason.MAX_TOKENS),
        (text_stream("Once upon", finish="content_filter"), StopReason.CONTENT_FILTER),
        ([chunk({"refusal": "I can't."}), chunk(finish="stop"), DONE], StopReason.REFUSAL),
    ],
)
async def test_an_abnormal_finish_ends_the_agent_run_with_model_stopped(
    server: FakeServer, openai_model: OpenAIModel, stream: list[bytes], reason: StopReason
) -> None:
    server.reply(Reply.stream(stream))

    stop = await run_stopped_early(openai_model, server)

    assert stop.reason is reason


async def test_a_provider_failure_reaches_the_agent_caller_unchanged(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    server.reply(Reply.error(401, {"error": {"message": "Incorrect API key provided"}}))
    agent = await Agent.create(openai_model)

    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        await agent.run("Hello")


async def test_chunks_without_model_or_usage_fields_still_stream(
    server: FakeServer, openai_model: OpenAIModel
) -> None:
    # Some compatible servers send only ``choices``: the SDK then leaves the other fields
    # None, and the response takes the configured model's name and no usage.
    def bare(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    server.reply(Reply.stream([bare({"content": "Hi"}), bare({}, "stop"), DONE]))

    events = await collect(openai_model)

    assert deltas(events, ModelEventType.TEXT) == ["Hi"]
    response = events[-1].response
    assert response is not None
    assert (response.message.content, response.message.model) == ("Hi", openai_model.model)
    assert response.usage == ModelUsage()
