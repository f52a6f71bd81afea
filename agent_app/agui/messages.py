"""A chat's shown path as AG-UI messages: the ``MESSAGES_SNAPSHOT`` a new run's stream opens with.

A client of the AG-UI endpoint keeps the thread's messages itself; the snapshot tells it
what the thread holds as the run starts — the path the chat shows, never another version of a turn
(docs/protocol.md, *Versions of a turn*) — so an edit or a switch made in the page is what
the next run's client reads too. It is built from the history items a ``session`` frame
would carry (``agent_app.durable.history.shown_path``: the newest messages, the same
bound) without the run's own, read once the stream's ``RUN_STARTED`` is out (off the way
to the first byte; only rows the worker has not read before are read whole, so a thread's
next run reads its new rows, not its whole page); the run's own message comes from its
``run_started`` frame. Each message's ``id`` is the stored message's id; messages that are no
conversation for a client (the application's instructions) are left out.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["agui_messages", "json_text", "result_text", "snapshot_event"]


def agui_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History items (oldest first) as AG-UI ``Message`` objects."""
    messages = []
    for item in items:
        message = _message(item)
        if message is not None:
            messages.append(message)
    return messages


def _message(item: dict[str, Any]) -> dict[str, Any] | None:
    role, key = item.get("role"), str(item.get("id", ""))
    text = _text(item.get("content"))
    if role == "user":
        return {"id": key, "role": "user", "content": text}
    if role == "assistant":
        message: dict[str, Any] = {"id": key, "role": "assistant", "content": text}
        calls = [_call(call) for call in item.get("tool_calls") or () if isinstance(call, dict)]
        if calls:
            message["toolCalls"] = calls
        return message
    if role == "tool":
        return {
            "id": key,
            "role": "tool",
            "content": text,
            "toolCallId": str(item.get("tool_call_id") or ""),
        }
    return None


def _text(content: Any) -> str:
    """A history item's content as text (the text parts of a list, images left out)."""
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return content if isinstance(content, str) else ""


def _call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments")
    return {
        "id": str(call.get("id", "")),
        "type": "function",
        "function": {
            "name": str(call.get("name", "")),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {}),
        },
    }


def snapshot_event(items: list[dict[str, Any]], started: dict[str, Any]) -> dict[str, Any]:
    """The ``MESSAGES_SNAPSHOT`` of history items read before a run, then the run's own
    message (its ``run_started`` frame: ``message_id``, ``content``)."""
    messages = agui_messages(items)
    if started.get("message_id") is not None:
        messages.append(
            {
                "id": str(started["message_id"]),
                "role": "user",
                "content": str(started.get("content") or ""),
            }
        )
    return {"type": "MESSAGES_SNAPSHOT", "messages": messages}


def result_text(content: Any) -> str:
    """A tool result's content as text: images are named, not sent."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append("[image]")
        return "\n".join(parts)
    return "" if content is None else json_text(content)


def json_text(value: Any) -> str:
    """A value as JSON text (None as ``{}``; what JSON cannot hold, as its text)."""
    return json.dumps({} if value is None else value, ensure_ascii=False, default=str)
