"""AnthropicModel's request mapping, checked on what a local server receives: images,
history turns, tool results with images."""

from __future__ import annotations

import base64

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
from zett_agent.model import ModelRequest, ToolDefinition
from zett_agent.providers.anthropic import SIGNATURE_ATTRIBUTE, AnthropicModel

from .anthropic_events import text_stream
from .fake_server import FakeServer, Reply
from .support import collect

# --- request mapping ---------------------------------------------------------------------


async def test_images_in_a_user_message_are_sent_as_base64_and_url_sources(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(text_stream("Cats.")))
    png = b"\x89PNG\r\n\x1a\nfake"
    message = UserMessage(
        [
            TextContent("What is in these pictures?"),
            ImageContent(ImageBytesSource(png, "image/png")),
            ImageContent(ImageUrlSource("https://example.test/cat.jpg")),
            ImageContent(ImageUrlSource("data:image/gif;base64,R0lGODlh")),
        ]
    )

    await collect(anthropic_model, ModelRequest(messages=(message,)))

    [sent] = server.requests[0].json()["messages"]
    assert sent["content"] == [
        {"type": "text", "text": "What is in these pictures?"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(png).decode(),
            },
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.test/cat.jpg"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlh"},
        },
    ]


async def test_history_becomes_alternating_turns_with_tool_results_first(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(text_stream("done")))
    request = ModelRequest(
        messages=(
            SystemMessage("Be brief."),
            SystemMessage("Use tools."),
            UserMessage("Weather in Oslo and Rome?"),
            AssistantMessage(
                "Checking.",
                reasoning="Call the tool twice.",
                tool_calls=(
                    ToolCall("toolu_a", "get_weather", {"city": "Oslo"}),
                    ToolCall("toolu_b", "get_weather", {"city": "Rome"}),
                ),
                attributes={SIGNATURE_ATTRIBUTE: "sig-1"},
            ),
            ToolMessage("toolu_a", "get_weather", "Sunny"),
            ToolMessage("toolu_b", "get_weather", "city not found", success=False),
            AgentMessage("Answer in one line."),
            AssistantMessage("Oslo is sunny.", reasoning="No signature, so not replayed."),
            UserMessage("Thanks"),
        ),
        tools=(ToolDefinition("get_weather", "Current weather.", {"type": "object"}),),
        tool_choice="required",
    )

    await collect(anthropic_model, request)

    body = server.requests[0].json()
    assert body["system"] == "Be brief.\n\nUse tools."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Call the tool twice.", "signature": "sig-1"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "city not found",
                    "is_error": True,
                },
                {"type": "text", "text": "Answer in one line."},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Oslo is sunny."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Current weather.",
            "input_schema": {"type": "object"},
        }
    ]
    assert body["tool_choice"] == {"type": "any"}


async def test_tool_results_with_images_keep_them_as_content_blocks(
    server: FakeServer, anthropic_model: AnthropicModel
) -> None:
    server.reply(Reply.stream(text_stream("A chart.")))
    request = ModelRequest(
        messages=(
            UserMessage("Plot it"),
            AssistantMessage(tool_calls=(ToolCall("toolu_p", "plot", {}),)),
            ToolMessage(
                "toolu_p",
                "plot",
                [TextContent("Here:"), ImageContent(ImageBytesSource(b"GIF89a", "image/gif"))],
            ),
        )
    )

    await collect(anthropic_model, request)

    assert server.requests[0].json()["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_p",
            "content": [
                {"type": "text", "text": "Here:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/gif", "data": "R0lGODlh"},
                },
            ],
        }
    ]
