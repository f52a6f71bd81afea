"""JSON codecs: messages both ways, events one way.

``message_to_dict`` / ``message_from_dict`` round-trip every message exactly, images
included (bytes travel as base64). ``event_to_dict`` turns an ``AgentEvent`` into a
JSON-safe dict with ``type``, ``session_id``, ``phase`` and only the fields relevant to its
type; exceptions become ``{"type": <class name>, "message": str(error)}``.
"""

from __future__ import annotations

import base64
from typing import Any

import pydantic_core

from zett_agent.events import AgentEvent, AgentEventType, RelayedEvent
from zett_agent.extensions.events import CompactionEvent
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    CompactedMessage,
    ContentPart,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    MessageRole,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelResponse, ModelUsage, StopInfo

__all__ = [
    "content_from_json",
    "content_to_json",
    "error_to_dict",
    "event_to_dict",
    "message_from_dict",
    "message_to_dict",
    "response_to_dict",
    "usage_to_dict",
]

E = AgentEventType


def content_to_json(content: str | list[ContentPart]) -> str | list[dict[str, Any]]:
    """Message content as JSON: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextContent):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImageContent):
            source = part.source
            if isinstance(source, ImageUrlSource):
                encoded: dict[str, Any] = {"type": "url", "url": source.url}
            else:
                encoded = {
                    "type": "bytes",
                    "media_type": source.media_type,
                    "data": base64.b64encode(source.data).decode("ascii"),
                }
            parts.append({"type": "image", "source": encoded, "detail": part.detail})
        else:
            raise TypeError(f"Unknown content part {type(part).__name__}")
    return parts


def content_from_json(data: Any) -> str | list[ContentPart]:
    """Inverse of ``content_to_json``."""
    if isinstance(data, str):
        return data
    if not isinstance(data, list):
        raise ValueError(f"Message content must be a string or a list, got {type(data).__name__}")
    parts: list[ContentPart] = []
    for item in data:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            parts.append(TextContent(item["text"]))
        elif kind == "image":
            source = item["source"]
            if source.get("type") == "url":
                parts.append(ImageContent(ImageUrlSource(source["url"]), item.get("detail")))
            elif source.get("type") == "bytes":
                raw = base64.b64decode(source["data"], validate=True)
                parts.append(
                    ImageContent(ImageBytesSource(raw, source["media_type"]), item.get("detail"))
                )
            else:
                raise ValueError(f"Unknown image source {source.get('type')!r}")
        else:
            raise ValueError(f"Unknown content part {item!r}")
    return parts


def _tool_call_to_dict(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": _jsonable(call.arguments)}


def message_to_dict(message: AnyMessage) -> dict[str, Any]:
    """A message as a JSON-safe dict with at least ``role`` and ``content``."""
    data: dict[str, Any] = {"role": message.role.value, "content": content_to_json(message.content)}
    if isinstance(message, AssistantMessage):
        data["reasoning"] = message.reasoning
        data["tool_calls"] = [_tool_call_to_dict(call) for call in message.tool_calls]
        data["provider"] = message.provider
        data["model"] = message.model
    elif isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
        data["name"] = message.name
        data["success"] = message.success
    data["attributes"] = _jsonable(message.attributes)
    data["persist"] = message.persist
    data["include_in_messages"] = message.include_in_messages
    return data


def message_from_dict(data: dict[str, Any]) -> AnyMessage:
    """Rebuild a message from ``message_to_dict`` output; ``ValueError`` on bad input."""
    if not isinstance(data, dict):
        raise ValueError(f"A message must be a dict, got {type(data).__name__}")
    try:
        role = MessageRole(data["role"])
    except (KeyError, ValueError):
        raise ValueError(f"Unknown message role {data.get('role')!r}") from None
    common: dict[str, Any] = {"attributes": dict(data.get("attributes") or {})}
    if "persist" in data:
        common["persist"] = bool(data["persist"])
    if "include_in_messages" in data:
        common["include_in_messages"] = bool(data["include_in_messages"])
    content = content_from_json(data.get("content", ""))
    if role is MessageRole.SYSTEM:
        return SystemMessage(_text(content, role), **common)
    if role is MessageRole.USER:
        return UserMessage(content, **common)
    if role is MessageRole.AGENT:
        kind = CompactedMessage if common["attributes"].get("compaction") is True else AgentMessage
        return kind(_text(content, role), **common)
    if role is MessageRole.ASSISTANT:
        calls = tuple(
            ToolCall(call["id"], call["name"], dict(call.get("arguments") or {}))
            for call in data.get("tool_calls") or ()
        )
        return AssistantMessage(
            _text(content, role),
            reasoning=data.get("reasoning"),
            tool_calls=calls,
            provider=data.get("provider"),
            model=data.get("model"),
            **common,
        )
    return ToolMessage(
        data["tool_call_id"],
        data["name"],
        content,
        success=bool(data.get("success", True)),
        **common,
    )


def _text(content: str | list[ContentPart], role: MessageRole) -> str:
    if not isinstance(content, str):
        raise ValueError(f"{role.value} message content must be a string")
    return content


def usage_to_dict(usage: ModelUsage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "total_tokens": usage.total_tokens,
    }


def _stop_to_dict(stop: StopInfo | None) -> dict[str, Any] | None:
    if stop is None:
        return None
    return {"reason": stop.reason.value, "detail": stop.detail}


def response_to_dict(response: ModelResponse | None) -> dict[str, Any] | None:
    if response is None:
        return None
    return {
        "message": message_to_dict(response.message),
        "finish_reason": response.finish_reason,
        "usage": usage_to_dict(response.usage),
        "stop": _stop_to_dict(response.stop),
    }


def error_to_dict(error: BaseException | None) -> dict[str, str] | None:
    if error is None:
        return None
    return {"type": type(error).__name__, "message": str(error)}


def _compaction_to_dict(compaction: CompactionEvent | None) -> dict[str, Any] | None:
    if compaction is None:
        return None
    return {
        "compressed_from": compaction.compressed_from,
        "compressed_to": compaction.compressed_to,
        "kept_from": compaction.kept_from,
        "kept_to": compaction.kept_to,
        "summary": compaction.summary,
        "checkpoint": _optional_message(compaction.checkpoint),
        "replaced_count": len(compaction.replaced),
        "tokens_before": compaction.tokens_before,
        "tokens_after": compaction.tokens_after,
        "occurred_at": compaction.occurred_at.isoformat(),
    }


def _jsonable(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=repr)


def _optional_message(message: AnyMessage | None) -> dict[str, Any] | None:
    return None if message is None else message_to_dict(message)


_FIELDS: dict[AgentEventType, tuple[str, ...]] = {
    E.REASONING_DELTA: ("delta",),
    E.TEXT_DELTA: ("delta",),
    E.TOOL_CALL_DELTA: ("tool_call_delta",),
    E.SERVER_TOOL_STARTED: ("server_tool_call",),
    E.SERVER_TOOL_INPUT_DELTA: ("server_tool_input_delta",),
    E.SERVER_TOOL_COMPLETED: ("server_tool_result",),
    E.SERVER_TOOL_FAILED: ("server_tool_result",),
    E.MODEL_COMPLETED: ("response",),
    E.MODEL_STOPPED: ("stop", "response", "message"),
    E.TOOL_STARTED: ("tool_calls",),
    E.TOOL_COMPLETED: ("tool_calls", "message", "error"),
    E.TOOL_FAILED: ("tool_calls", "message", "error"),
    E.TOOL_SKIPPED: ("tool_calls", "message"),
    E.STEERING_STARTED: ("steering_message",),
    E.STEERING_COMPLETED: ("steering_message",),
    E.STEERING_INTERRUPTED: ("steering_message",),
    E.INTERNAL_MESSAGE_STARTED: ("internal_message",),
    E.INTERNAL_MESSAGE_COMPLETED: ("internal_message", "message"),
    E.INTERNAL_MESSAGE_INTERRUPTED: ("internal_message",),
    E.COMPACTION_TEXT_DELTA: ("delta",),
    E.COMPACTION_REASONING_DELTA: ("delta",),
    E.COMPACTION_COMPLETED: ("applied", "compaction"),
    E.RUN_COMPLETED: ("message",),
    E.CUSTOM: ("name", "payload"),
}

_ENCODERS: dict[str, Any] = {
    "delta": lambda value: value,
    "tool_call_delta": _jsonable,
    "server_tool_call": _jsonable,
    "server_tool_input_delta": _jsonable,
    "server_tool_result": _jsonable,
    "response": response_to_dict,
    "stop": _stop_to_dict,
    "message": _optional_message,
    "tool_calls": lambda calls: [_tool_call_to_dict(call) for call in calls],
    "steering_message": _optional_message,
    "internal_message": _optional_message,
    "error": error_to_dict,
    "applied": lambda value: value,
    "compaction": _compaction_to_dict,
    "name": lambda value: value,
    "payload": _jsonable,
}


#: Events whose only field is ``delta``, a string: most of a streamed answer.
_DELTA_EVENTS = frozenset(
    {E.TEXT_DELTA, E.REASONING_DELTA, E.COMPACTION_TEXT_DELTA, E.COMPACTION_REASONING_DELTA}
)


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """An event as a JSON-safe dict: ``type``, ``session_id``, ``phase`` and its fields."""
    kind = event.type
    phase = event.phase
    # ``_value_`` is the member's value as a plain attribute: ``.value`` is a descriptor,
    # several times slower, and a UI serialises an event per streamed delta.
    data: dict[str, Any] = {
        "type": kind._value_,
        "session_id": event.session_id,
        "phase": phase._value_ if phase is not None else None,
    }
    if type(event) is RelayedEvent:  # a sub-run's event: who emitted it, before its fields
        data["agent"] = event.agent
        data["parent_tool_call_id"] = event.parent_tool_call_id
    if kind in _DELTA_EVENTS:
        data["delta"] = event.delta
        return data
    for field in _FIELDS.get(kind, ()):
        data[field] = _ENCODERS[field](getattr(event, field))
    return data
