"""Which WebSocket handshakes may open a chat socket.

The threat the origin check answers is cross-site WebSocket hijacking: a page on another
site opening a socket with the visitor's cookies. Browsers always send ``Origin`` on a
WebSocket handshake, so a handshake whose ``Origin`` is not one of ``ALLOWED_HOSTS`` is
refused, exactly as Channels' ``AllowedHostsOriginValidator`` does. A handshake with no
``Origin`` at all does not come from a browser (a CLI, a script, a test's
``WebsocketCommunicator``); it carries no ambient browser credentials to abuse, and could
send any ``Origin`` it liked anyway, so it is let through.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import ParseResult

from channels.security.websocket import AllowedHostsOriginValidator, OriginValidator

__all__ = ["BrowserOriginValidator"]


class _NoOriginAllowed(OriginValidator):
    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        return parsed_origin is None or super().valid_origin(parsed_origin)


def BrowserOriginValidator(application: Any) -> OriginValidator:
    """``AllowedHostsOriginValidator`` that also admits clients sending no ``Origin``."""
    validator = AllowedHostsOriginValidator(application)
    return _NoOriginAllowed(validator.application, validator.allowed_origins)
