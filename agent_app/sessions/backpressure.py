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
daphne hands the application (``transport_of``). An HTTP view never sees ``send``, so for
the event streams of the HTTP API daphne is made to put the request's transport in its
ASGI scope (``expose_http_transports``, installed from ``AppConfig.ready`` like
``agent_app.sessions.daphne_exit``), which a view reads with ``transport_of_request``.
Under any other server (or daphne's own TLS endpoint) there is no transport to measure and
no cap: the server's own flow control applies.
"""

from __future__ import annotations

import sys
from typing import Any

from agent_app import conf

__all__ = [
    "DEFAULT_SEND_BUFFER_BYTES",
    "FELL_BEHIND_CLOSE_CODE",
    "TRANSPORT_SCOPE_KEY",
    "buffered_bytes",
    "expose_http_transports",
    "send_buffer_cap",
    "transport_of",
    "transport_of_request",
]

#: Close code of a socket dropped for not reading (the page reconnects at once).
FELL_BEHIND_CLOSE_CODE = 4408
#: Most bytes a socket may leave unread before a new frame: two of the largest frames.
DEFAULT_SEND_BUFFER_BYTES = 1024 * 1024
#: What a Twisted ``FileDescriptor`` keeps its unsent bytes in.
_BUFFER_FIELDS = ("dataBuffer", "offset", "_tempDataLen")
#: The key of an HTTP request's transport in its ASGI scope (``expose_http_transports``).
TRANSPORT_SCOPE_KEY = "zett.transport"


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
    return _measurable(transport)


def buffered_bytes(transport: Any) -> int:
    """Bytes the transport holds that the kernel has not taken yet."""
    return len(transport.dataBuffer) - transport.offset + transport._tempDataLen


def _measurable(transport: Any) -> Any | None:
    if transport is None or not all(hasattr(transport, name) for name in _BUFFER_FIELDS):
        return None
    return transport


def transport_of_request(request: Any) -> Any | None:
    """The transport of an HTTP request served by daphne (None under other servers)."""
    scope = getattr(request, "scope", None) or {}
    return _measurable(scope.get(TRANSPORT_SCOPE_KEY))


def expose_http_transports() -> None:
    """Make daphne (if this process loaded it) put each HTTP request's transport in the
    request's scope, under ``TRANSPORT_SCOPE_KEY``."""
    module = sys.modules.get("daphne.server")
    if module is None:
        return
    server = module.Server
    original = server.create_application
    if getattr(original, "zett_exposes_transport", False):
        return

    def create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
        if scope.get("type") == "http":
            transport = _measurable(getattr(protocol, "transport", None))
            if transport is not None:
                scope[TRANSPORT_SCOPE_KEY] = transport
        return original(self, protocol, scope)

    create_application.zett_exposes_transport = True  # type: ignore[attr-defined]
    server.create_application = create_application
