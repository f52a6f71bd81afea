"""The text of outbound frames, and the 512 KiB rule every one of them keeps.

``encode_frame`` turns any dumped frame into the socket's text; ``encode_delta_frame`` builds
a delta's ``agent_event`` frame as text directly, because a run streams thousands of them.

No frame the server sends reaches ``MAX_OUTBOUND_BYTES`` (docs/protocol.md, "Frame sizes").
Checks are cheap first: a frame's text of ``len(text)`` characters has at most 4 bytes per
character (a lone surrogate is already a 6-character escape), and a delta at most 6 per
character of its own (``\\u0001``), so the common, small case costs one length comparison
and is never encoded twice. Only beyond those bounds is the size measured, and then:

- a delta (``split_event``: text, reasoning, compaction, tool arguments, server tool input)
  is cut into consecutive pieces whose frames fit, each sent as its own numbered event of
  the same type; the pieces concatenate to the original, and a cut never falls between
  the two halves of a surrogate pair (``str`` slices never fall inside a UTF-8 sequence);
- any other event is shortened (``fit_event``), never its ``type`` or ids.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "DELTA_FAST_CHARS",
    "FRAME_BUDGET",
    "FRAME_FAST_CHARS",
    "MAX_OUTBOUND_BYTES",
    "TOOL_RESULT_KEEP",
    "agent_event_frame",
    "cut_strings",
    "encode_delta_frame",
    "encode_frame",
    "event_frame_text",
    "fit_event",
    "fits",
    "split_event",
    "split_text",
    "text_bytes",
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
    are encoded per frame; the rest is kept per run. The caller keeps ``delta`` within
    ``DELTA_FAST_CHARS`` (a longer one goes through ``split_event``).
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


# --- the 512 KiB rule --------------------------------------------------------------------

#: Frames the server sends are smaller than this, in UTF-8 bytes.
MAX_OUTBOUND_BYTES = 512 * 1024
#: What a frame (or an event, which its frame wraps in < 1 KiB) is built to fit, in bytes.
FRAME_BUDGET = MAX_OUTBOUND_BYTES - 1024
#: A frame's text this long or shorter fits, unmeasured (at most 4 UTF-8 bytes a character).
FRAME_FAST_CHARS = FRAME_BUDGET // 4
#: A delta this long or shorter fits one frame, unmeasured: at most 6 bytes a character
#: (``\\u001f``), with 1 KiB left for the rest of the frame (its ids are UUIDs).
DELTA_FAST_CHARS = (FRAME_BUDGET - 1024) // 6
#: A tool result longer than this is cut when its event would not fit a frame.
TOOL_RESULT_KEEP = 64 * 1024
#: Events whose final text the deltas already carried.
_FINAL_TEXT_EVENTS = frozenset({"model_completed", "model_stopped", "run_completed"})
#: Events that carry a tool result.
_TOOL_RESULT_EVENTS = frozenset({"tool_completed", "tool_failed", "tool_skipped"})
#: Where each splittable event keeps its delta: (holder key or None for the event, key).
_DELTA_FIELDS: dict[str, tuple[str | None, str]] = {
    "text_delta": (None, "delta"),
    "reasoning_delta": (None, "delta"),
    "compaction_text_delta": (None, "delta"),
    "compaction_reasoning_delta": (None, "delta"),
    "tool_call_delta": ("tool_call_delta", "arguments_delta"),
    "server_tool_input_delta": ("server_tool_input_delta", "delta"),
}
#: Held on every piece of a split delta; any other field (a tool call's ``id`` and
#: ``name``) only on the first, as providers stream a call's later fragments.
_PIECE_KEEPS = frozenset({"index", "call_id"})
#: Strings a shortened event keeps whole: what identifies the event, its call and its wait.
_IDENTITY_KEYS = frozenset(
    {
        "type",
        "session_id",
        "phase",
        "id",
        "name",
        "tool",
        "tool_call_id",
        "call_id",
        "role",
        "response_event",
        "digest",
        "expires_at",
    }
)
#: How much of each long string a shortened event keeps, tried in turn until it fits.
_KEEPS = (TOOL_RESULT_KEEP, 16 * 1024, 4 * 1024, 1024, 256)
#: A ``seq`` with the most digits a frame can carry (sizes are measured with it).
_WIDEST_SEQ = 2**63 - 1


def fits(text: str) -> bool:
    """Whether a frame's text is within ``FRAME_BUDGET`` (cheap for short ones)."""
    return len(text) <= FRAME_FAST_CHARS or len(text.encode("utf-8")) <= FRAME_BUDGET


def event_frame_text(seq: int, request_id: str, event: dict[str, Any]) -> str:
    """The text of an ``agent_event`` frame for ``event``, shortened if need be.

    Encoded once when it fits (nearly always); otherwise ``fit_event`` shortens it first.
    A delta is split first (``split_event``): its pieces always fit.
    """
    text = encode_frame(agent_event_frame(seq, request_id, event))
    if fits(text):
        return text
    return encode_frame(agent_event_frame(seq, request_id, fit_event(event)))


def text_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` inside a JSON string as ``encode_frame`` writes it."""
    literal = _STRING(text)
    if text.isascii():
        return len(literal) - 2
    return len(_escape_surrogates(literal).encode("utf-8")) - 2


def split_text(text: str, room: int) -> list[str]:
    """``text`` as consecutive pieces of at most ``room`` (≥ 12) bytes of JSON string each.

    Greedy and linear: each step adds as many characters as surely fit what is left of the
    piece (6 bytes a character at most) and measures only those. A piece never ends
    between a high and a low surrogate.
    """
    pieces: list[str] = []
    start, length = 0, len(text)
    while start < length:
        end, used = start, 0
        while end < length:
            step = (room - used) // 6
            if not step:
                break
            stop = min(length, end + step)
            used += text_bytes(text[end:stop])
            end = stop
        if end < length and _is_pair(text[end - 1], text[end]):
            end -= 1
        pieces.append(text[start:end])
        start = end
    return pieces


def split_event(request_id: str, event: dict[str, Any]) -> list[dict[str, Any]]:
    """The events to send for ``event``: its delta over several when one frame cannot hold it.

    Each piece is ``event`` with a part of the delta, in order, sized so that its frame
    (with any ``seq``) fits. Any other event, or one whose frame is too large even with an
    empty delta, comes back alone (``event_frame_text`` then shortens it).
    """
    where = _DELTA_FIELDS.get(event.get("type", ""))
    if where is None:
        return [event]
    holder_key, key = where
    holder = event if holder_key is None else event.get(holder_key)
    delta = holder.get(key) if isinstance(holder, dict) else None
    if not isinstance(delta, str) or not delta:
        return [event]
    empty = _with_delta(event, holder_key, key, "", first=True)
    room = FRAME_BUDGET - len(
        encode_frame(agent_event_frame(_WIDEST_SEQ, request_id, empty)).encode("utf-8")
    )
    if room < 64:
        return [event]
    return [
        _with_delta(event, holder_key, key, piece, first=index == 0)
        for index, piece in enumerate(split_text(delta, room))
    ]


def _is_pair(high: str, low: str) -> bool:
    return "\ud800" <= high <= "\udbff" and "\udc00" <= low <= "\udfff"


def _with_delta(
    event: dict[str, Any], holder_key: str | None, key: str, delta: str, *, first: bool
) -> dict[str, Any]:
    if holder_key is None:
        return {**event, key: delta}
    holder = event[holder_key]
    if not first:
        holder = {name: value if name in _PIECE_KEEPS else None for name, value in holder.items()}
    return {**event, holder_key: {**holder, key: delta}}


def fit_event(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as it may be sent: shortened when its JSON would pass ``FRAME_BUDGET``.

    In turn, until it fits: the final text of an answer is dropped (``content_omitted``:
    the deltas carried it), then its reasoning too; a tool result is cut to
    ``TOOL_RESULT_KEEP`` characters; then every long string but the identifying ones is
    cut (``cut_strings``, ``content_truncated``). Failing all that, only the event's
    ``type``, ``session_id`` and ``phase`` are left. The stored message stays whole.
    """
    if _event_fits(event):
        return event
    kind = event.get("type")
    fitted = dict(event)
    if kind in _FINAL_TEXT_EVENTS:
        fitted["content_omitted"] = True
        _set_final(fitted, "content", "")
        if not _event_fits(fitted):
            _set_final(fitted, "reasoning", None)
    elif kind in _TOOL_RESULT_EVENTS and isinstance(fitted.get("message"), dict):
        message = fitted["message"]
        content = message.get("content")
        content = content if isinstance(content, str) else encode_frame(content)
        if len(content) > TOOL_RESULT_KEEP:
            fitted["message"] = {**message, "content": _cut(content, TOOL_RESULT_KEEP)}
            fitted["content_truncated"] = True
    if _event_fits(fitted):
        return fitted
    shortened = cut_strings(fitted, FRAME_BUDGET)
    if shortened is not None:
        return {**shortened, "content_truncated": True}
    # Still too large (a huge number of small values …): keep only what identifies it.
    fitted = {key: fitted[key] for key in ("type", "session_id", "phase") if key in fitted}
    fitted["content_omitted"] = True
    return fitted


def _event_fits(event: dict[str, Any]) -> bool:
    return fits(encode_frame(event))


def _set_final(event: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` of a final-text event's message(s) (``message``, ``response.message``)."""
    message = event.get("message")
    if isinstance(message, dict) and (key == "content" or key in message):
        event["message"] = {**message, key: value}
    response = event.get("response")
    if isinstance(response, dict):
        inner = response.get("message") or {}
        if key == "content" or key in inner:
            event["response"] = {**response, "message": {**inner, key: value}}


def cut_strings(value: dict[str, Any], budget: int) -> dict[str, Any] | None:
    """A copy of ``value`` whose long strings are cut so that its JSON fits ``budget`` bytes.

    Strings under the identifying keys (``type``, ids, names …) are kept whole; every other
    string over a length (``_KEEPS``, tried from the longest) keeps its start and says how
    long it was. None when even the shortest cut does not fit.
    """
    for keep in _KEEPS:
        cut = _cut_value(value, keep, 0)
        if len(encode_frame(cut).encode("utf-8")) <= budget:
            return cut
    return None


def _cut_value(value: Any, keep: int, depth: int) -> Any:
    if isinstance(value, str):
        return _cut(value, keep) if len(value) > keep else value
    if depth > 100:  # deeper than any event holds: left as is (the fallback takes it)
        return value
    if isinstance(value, dict):
        return {
            key: item if key in _IDENTITY_KEYS else _cut_value(item, keep, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_cut_value(item, keep, depth + 1) for item in value]
    return value


def _cut(text: str, keep: int) -> str:
    """The first ``keep`` characters of ``text`` (never half a surrogate pair), marked."""
    end = keep - 1 if _is_pair(text[keep - 1], text[keep]) else keep
    return text[:end] + f"\n… [cut: {len(text)} characters in all]"
