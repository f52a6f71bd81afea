"""Agent messages in the shapes the OpenTelemetry GenAI conventions give recorded content.

Used by ``zett_agent.extensions.tracing`` only when content recording is on: a message is
``{"role", "parts": [...]}`` with ``text``, ``reasoning``, ``tool_call`` and
``tool_call_response`` parts; images are noted as ``{"type": "image"}`` without their bytes
or URL. Attribute values are JSON strings (span attributes hold no nested structures).
"""

from __future__ import annotations

import json
from typing import Any

from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    ContentPart,
    ImageContent,
    TextContent,
    ToolMessage,
)

__all__ = ["content_json", "message_json", "message_parts", "output_json", "to_json"]


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def message_parts(content: str | list[ContentPart]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextContent):
            parts.append({"type": "text", "content": part.text})
        elif isinstance(part, ImageContent):
            parts.append({"type": "image"})  # bytes and URLs stay out of traces
    return parts


def content_json(content: str | list[ContentPart]) -> str:
    if isinstance(content, str):
        return content
    return to_json(message_parts(content))


def message_json(message: AnyMessage) -> dict[str, Any]:
    role = message.role.value
    if role == "agent":
        role = "user"  # an application instruction reaches the provider as a user turn
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": content_json(message.content),
                }
            ],
        }
    parts = message_parts(message.content)
    if isinstance(message, AssistantMessage):
        if message.reasoning:
            parts.insert(0, {"type": "reasoning", "content": message.reasoning})
        parts.extend(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
            for call in message.tool_calls
        )
    return {"role": role, "parts": parts}


def output_json(message: AssistantMessage, finish_reasons: list[str]) -> dict[str, Any]:
    """One model response as an output message (with its finish reason)."""
    data = message_json(message)
    if finish_reasons:
        data["finish_reason"] = finish_reasons[0]
    return data
