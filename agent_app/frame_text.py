"""The text of outbound frames: ``encode_frame`` for any frame, and the 512 KiB rule.

``encode_frame`` turns any dumped frame into the socket's text; ``encode_delta_frame`` builds
a delta's ``agent_event`` frame as text directly, because a run streams thousands of them;
``fit_event`` shortens an event whose frame would pass ``MAX_OUTBOUND_BYTES``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "MAX_OUTBOUND_BYTES",
    "TOOL_RESULT_KEEP",
    "agent_event_frame",
    "encode_delta_frame",
    "encode_frame",
    "fit_event",
]


def agent_event_frame(seq: int, request_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """``AgentEventFrame(...).dump()`` without the model: ``event`` must be JSON-safe."""
    return {"type": "agent_event", "seq": seq, "request_id": request_id, "event": event}


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
#: Only ever meets the output of ``_json_safe``.
_SAFE_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: A JSON string literal exactly as ``_ENCODER`` writes one (the C function it calls).
_STRING = json.encoder.encode_basestring
#: The text between a delta frame's ``seq`` and its ``delta``, by (request, event type,
#: session, phase): a run's deltas share a handful of them.
_DELTA_MIDDLES: dict[tuple[str, str, str, str | None], str] = {}
_DELTA_MIDDLES_KEPT = 256


def encode_delta_frame(
    seq: int, request_id: str, kind: str, session_id: str, phase: str | None, delta: str
) -> str:
    """The socket text of a delta event's frame, built without a dict or the encoder.

    Exactly ``encode_frame(agent_event_frame(seq, request_id, event_to_dict(event)))`` for
    an event of type ``kind`` that carries only ``delta`` (text, reasoning and compaction
    deltas): the same keys in the same order, the same separators, the same escapes
    (lone surrogates too). A run streams thousands of these, so only ``seq`` and the delta
    are encoded per frame; the rest is kept per run. Such an event is never shortened by
    ``fit_event`` (it has no message), so neither is this frame.
    """
    key = (request_id, kind, session_id, phase)
    middle = _DELTA_MIDDLES.get(key)
    if middle is None:
        if len(_DELTA_MIDDLES) >= _DELTA_MIDDLES_KEPT:
            _DELTA_MIDDLES.clear()
        middle = _DELTA_MIDDLES[key] = _escape_surrogates(
            f', "request_id": {_STRING(request_id)}, "event": {{"type": {_STRING(kind)}, '
            f'"session_id": {_STRING(session_id)}, '
            f'"phase": {"null" if phase is None else _STRING(phase)}, "delta": '
        )
    literal = _STRING(delta)
    if not delta.isascii():
        literal = _escape_surrogates(literal)
    return f'{{"type": "agent_event", "seq": {seq}{middle}{literal}}}}}'


def _escape_surrogates(text: str) -> str:
    """Lone surrogates (only ever inside string literals) as ``\\u`` escapes."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def encode_frame(frame: dict[str, Any]) -> str:
    """The text sent on the socket for a dumped frame (UTF-8 as is, no ``\\u`` escapes).

    Never raises, and the text always encodes to UTF-8: NaN and infinities become ``null``,
    a value that is not JSON becomes its ``str``, a lone surrogate its ``\\u`` escape.
    """
    try:
        text = _ENCODER.encode(frame)
    except (ValueError, TypeError, RecursionError):
        text = _SAFE_ENCODER.encode(_json_safe(frame))
    # Only inside string literals: escaping keeps the JSON valid and the value intact.
    return _escape_surrogates(text)


def _json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` with non-finite floats as None and other non-JSON values as text."""
    if depth > 200:
        return "…"
    if isinstance(value, dict):
        return {str(key): _json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


#: Largest frame the server sends, in UTF-8 bytes.
MAX_OUTBOUND_BYTES = 512 * 1024
#: A tool result longer than this is cut when its event would not fit a frame.
TOOL_RESULT_KEEP = 64 * 1024
#: Events whose final text the deltas already carried.
_FINAL_TEXT_EVENTS = frozenset({"model_completed", "model_stopped", "run_completed"})
#: Events that carry a tool result.
_TOOL_RESULT_EVENTS = frozenset({"tool_completed", "tool_failed", "tool_skipped"})


def fit_event(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as it may be sent: shortened when its frame would pass 512 KiB.

    Events are small nearly always; only those with a message are measured. The final text
    of an answer is dropped (``content_omitted``: the deltas carried it), a tool result cut
    (``content_truncated``); the stored message stays whole.
    """
    if "message" not in event and "response" not in event:
        return event
    text = _ENCODER.encode(event)
    if len(text) * 4 < MAX_OUTBOUND_BYTES - 1024 or _bytes(text) < MAX_OUTBOUND_BYTES - 1024:
        return event
    kind = event.get("type")
    fitted = dict(event)
    if kind in _FINAL_TEXT_EVENTS:
        for key in ("message", "response"):
            holder = fitted.get(key)
            if isinstance(holder, dict) and key == "response":
                holder = {**holder, "message": {**(holder.get("message") or {}), "content": ""}}
                fitted[key] = holder
            elif isinstance(holder, dict):
                fitted[key] = {**holder, "content": ""}
        fitted["content_omitted"] = True
    elif kind in _TOOL_RESULT_EVENTS and isinstance(fitted.get("message"), dict):
        message = fitted["message"]
        content = message.get("content")
        content = content if isinstance(content, str) else _ENCODER.encode(content)
        fitted["message"] = {
            **message,
            "content": content[:TOOL_RESULT_KEEP] + f"\n… [cut: {len(content)} characters in all]",
        }
        fitted["content_truncated"] = True
    if _bytes(_ENCODER.encode(fitted)) >= MAX_OUTBOUND_BYTES - 1024:
        # Still too large (huge arguments, reasoning …): keep only what identifies it.
        fitted = {key: fitted[key] for key in ("type", "session_id", "phase") if key in fitted}
        fitted["content_omitted"] = True
    return fitted


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
