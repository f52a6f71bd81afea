"""Bounded send buffers: a socket that does not read is dropped before it costs memory.

A run streams its frames to every socket of the session; the server cannot wait for the
slowest one (one idle tab would stall everyone's answer), so what a socket does not read
piles up in its transport's send buffer: a long answer, times every idle tab. This caps
it. After each frame it sends, a socket looks at how many bytes its transport still holds
(``buffered_bytes``) from before that frame; past ``ZETT_WS_SEND_BUFFER_BYTES`` it is
dropped (``FELL_BEHIND_CLOSE_CODE``). Only the backlog counts, so a single large frame
(up to the 512 KiB frame limit) never drops a socket however small the cap. A page that
reads again later sees that close code and reconnects with ``after_seq``: it misses
nothing, the replay buffer or the stored history has every frame since.

The transport is daphne's Twisted TCP transport, reached through the ``send`` callable
daphne hands the application (``transport_of``). Under any other server (or daphne's own
TLS endpoint) there is no transport to measure and no cap: the server's own flow
control applies.
"""

from __future__ import annotations

from typing import Any

from agent_app import conf

__all__ = [
    "DEFAULT_SEND_BUFFER_BYTES",
    "FELL_BEHIND_CLOSE_CODE",
    "buffered_bytes",
    "send_buffer_cap",
    "transport_of",
]

#: Close code of a socket dropped for not reading (the page reconnects at once).
FELL_BEHIND_CLOSE_CODE = 4408
#: Most bytes a socket may leave unread before a new frame: two of the largest frames.
DEFAULT_SEND_BUFFER_BYTES = 1024 * 1024
#: What a Twisted ``FileDescriptor`` keeps its unsent bytes in.
_BUFFER_FIELDS = ("dataBuffer", "offset", "_tempDataLen")


def send_buffer_cap() -> int:
    """``ZETT_WS_SEND_BUFFER_BYTES`` (at least one frame's worth; 0 or unset: the default)."""
    value = int(conf.ZETT_WS_SEND_BUFFER_BYTES or 0)
    return value if value > 0 else DEFAULT_SEND_BUFFER_BYTES


def transport_of(send: Any) -> Any | None:
    """The Twisted transport behind daphne's ``send`` (``partial(handle_reply, protocol)``)."""
    args = getattr(send, "args", None)
    if not args:
        return None
    transport = getattr(args[0], "transport", None)
    if transport is None or not all(hasattr(transport, name) for name in _BUFFER_FIELDS):
        return None
    return transport


def buffered_bytes(transport: Any) -> int:
    """Bytes the transport holds that the kernel has not taken yet."""
    return len(transport.dataBuffer) - transport.offset + transport._tempDataLen
