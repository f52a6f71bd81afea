"""Websocket handshakes for paths no route serves: refused quietly.

Channels' ``URLRouter`` raises ``ValueError`` for a path it cannot route, which daphne
turns into an HTTP 500 and a traceback in the log, one per handshake: anyone could fill
the log with ``/ws/x/``. ``QuietURLRouter`` refuses such a handshake instead, with one INFO
line. A refused handshake is daphne's ``403`` (daphne offers no other status for a
websocket it did not accept); the path is shown shortened and escaped, so what a client
puts in it cannot forge log lines.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.routing import URLRouter

__all__ = ["QuietURLRouter"]

logger = logging.getLogger(__name__)

#: Longest part of an unknown path the log line shows.
SHOWN_PATH_CHARS = 120
_NO_ROUTE = "No route found for path"


class QuietURLRouter(URLRouter):
    """A ``URLRouter`` that refuses a websocket handshake for an unknown path quietly."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        try:
            return await super().__call__(scope, receive, send)
        except ValueError as error:
            if scope.get("type") != "websocket" or not str(error).startswith(_NO_ROUTE):
                raise
        await refuse_unrouted(scope, receive, send)
        return None


async def refuse_unrouted(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Refuse the handshake of a socket nothing serves, saying so in one INFO line."""
    path = str(scope.get("path", ""))
    shown = path[:SHOWN_PATH_CHARS] + ("…" if len(path) > SHOWN_PATH_CHARS else "")
    logger.info("Refused a websocket for an unknown path %r", shown)
    message = await receive()
    if message.get("type") == "websocket.connect":
        await send({"type": "websocket.close"})
