"""Chat Completions stream chunks, written by hand after the API's documented format."""

from __future__ import annotations

from typing import Any

from .fake_server import sse

MODEL = "gpt-test"
DONE = b"data: [DONE]\n\n"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        body["usage"] = usage
    return sse(body)


def text_stream(*pieces: str, finish: str = "stop") -> list[bytes]:
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk(finish=finish),
        DONE,
    ]


def tool_fragment(
    index: int, arguments: str, *, call_id: str | None = None, name: str | None = None
) -> bytes:
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    call: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        call.update(id=call_id, type="function")
    return chunk({"tool_calls": [call]})


def tool_call_stream(call_id: str, name: str, *arguments: str) -> list[bytes]:
    """One tool call whose JSON arguments arrive in the given pieces, then its finish."""
    first, *rest = arguments
    return [
        tool_fragment(0, first, call_id=call_id, name=name),
        *(tool_fragment(0, piece) for piece in rest),
        chunk(finish="tool_calls"),
        DONE,
    ]


RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests"}}
