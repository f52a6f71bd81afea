"""Messages API stream events, written by hand after the API's documented format."""

from __future__ import annotations

from typing import Any

from .fake_server import sse

MODEL = "claude-test"


def event(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, event=kind)


def message_start(input_tokens: int = 25, **usage: int) -> bytes:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
    }
    return event("message_start", message=message)


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return event("content_block_start", index=index, content_block=block)


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return event("content_block_delta", index=index, delta=delta)


def text_delta(index: int, text: str) -> bytes:
    return block_delta(index, {"type": "text_delta", "text": text})


def json_delta(index: int, partial: str) -> bytes:
    return block_delta(index, {"type": "input_json_delta", "partial_json": partial})


def block_stop(index: int) -> bytes:
    return event("content_block_stop", index=index)


def message_end(
    stop_reason: str = "end_turn", output_tokens: int = 15, **extra: Any
) -> list[bytes]:
    delta = {"stop_reason": stop_reason, "stop_sequence": None, **extra.pop("delta", {})}
    usage = {"output_tokens": output_tokens, **extra.pop("usage", {})}
    return [event("message_delta", delta=delta, usage=usage), event("message_stop")]


def text_stream(*pieces: str, stop_reason: str = "end_turn") -> list[bytes]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        event("ping"),
        *(text_delta(0, piece) for piece in pieces),
        block_stop(0),
        *message_end(stop_reason),
    ]


def tool_use_stream(call_id: str, name: str, *arguments: str) -> list[bytes]:
    """One ``tool_use`` block whose JSON input arrives in the given pieces, then its stop."""
    return [
        message_start(),
        block_start(0, {"type": "tool_use", "id": call_id, "name": name}),
        *(json_delta(0, piece) for piece in arguments),
        block_stop(0),
        *message_end("tool_use"),
    ]


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
