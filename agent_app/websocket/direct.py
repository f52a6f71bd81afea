"""Text frames written straight to daphne's transport: a socket's hot path, one write each.

Every frame a socket sends goes, through Channels, to daphne's ``handle_reply`` and then
autobahn's ``sendMessage``, ``sendFrame`` and ``sendData``: checks, counters, and a debug
log line whose arguments are formatted for every frame even when nothing logs it. That
path costs a streaming run more server CPU per frame than the frame's own work. An
unmasked, unfragmented, uncompressed text frame is a two-to-ten byte header and the UTF-8
payload (RFC 6455), so while a socket is in that plain state its frames are written here,
byte for byte what autobahn would write, into the same transport (``direct_writer``).

Whenever the socket is not plainly open — closing or closed, gone from daphne's
connections, per-message compression negotiated, frames still queued inside autobahn, a
frame to fragment or past the payload limit, frame logging or timing switched on — the
writer declines and the caller sends through Channels as before, so nothing is reordered
or lost. Under another server (``send`` is not daphne's) there is no writer at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["direct_writer", "text_frame"]

#: What the writer reads of autobahn's protocol on every frame.
_PROTOCOL_FIELDS = (
    "state",
    "STATE_OPEN",
    "transport",
    "send_queue",
    "_perMessageCompress",
    "autoFragmentSize",
    "maxMessagePayloadSize",
    "trackedTimings",
    "logFrames",
    "logOctets",
    "maskServerFrames",
    "factory",
)


def text_frame(payload: bytes) -> bytes:
    """A final, unmasked text frame carrying ``payload`` (UTF-8), as a server sends it."""
    length = len(payload)
    if length <= 125:
        return bytes((0x81, length)) + payload
    if length <= 0xFFFF:
        return b"\x81\x7e" + length.to_bytes(2, "big") + payload
    return b"\x81\x7f" + length.to_bytes(8, "big") + payload


def direct_writer(send: Any) -> Callable[[str], bool] | None:
    """A function that writes a text frame for daphne's ``send`` (``partial(handle_reply,
    protocol)``) and returns True, or returns False, writing nothing, when the socket is
    not plainly open; None when ``send`` is not daphne's."""
    args, server = (
        getattr(send, "args", None),
        getattr(getattr(send, "func", None), "__self__", None),
    )
    if not args or not isinstance(getattr(server, "connections", None), dict):
        return None
    protocol = args[0]
    if not all(hasattr(protocol, name) for name in _PROTOCOL_FIELDS):
        return None
    if not getattr(protocol.factory, "isServer", False) or protocol.maskServerFrames:
        return None
    connections, transport, open_state = server.connections, protocol.transport, protocol.STATE_OPEN

    def write(text: str) -> bool:
        if (
            not text  # daphne sends no frame for empty text: neither does this
            or protocol.state != open_state
            or protocol.send_queue
            or protocol._perMessageCompress is not None
            or protocol.trackedTimings
            or protocol.logFrames
            or protocol.logOctets
        ):
            return False
        details = connections.get(protocol)
        if details is None or details.get("disconnected"):
            return False  # daphne drops such a frame: the caller's send does just that
        payload = text.encode()
        length = len(payload)
        if 0 < protocol.autoFragmentSize < length or 0 < protocol.maxMessagePayloadSize < length:
            return False  # fragmented, or refused: autobahn's own path decides
        transport.write(text_frame(payload))
        return True

    return write
