"""The site's script prefix on sockets: zett under ``daphne --root-path /shop`` or a proxy's
sub-path.

Django's HTTP handler sets the script prefix of each request (``FORCE_SCRIPT_NAME``, else
the ASGI ``root_path``), so ``reverse()`` and ``{% url %}`` give ``/shop/…``. Nothing sets
it for a websocket, yet a socket's work builds URLs too (attachment links in its frames,
the runs it starts): ``ScriptPrefixMiddleware`` sets it from the socket's scope the same
way, for the socket's task and every task it starts (the prefix is a context variable).
``socket_prefix()`` is where the pages and the widget open their sockets: the script
prefix plus ``ZETT_WEBSOCKET_PATH``. Channels' ``URLRouter`` strips ``root_path`` from the
socket's path before routing, so the routes themselves stay as they are.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import get_script_prefix, set_script_prefix

from agent_app import conf

__all__ = ["ScriptPrefixMiddleware", "socket_prefix"]


def socket_prefix() -> str:
    """The absolute path under which the chat sockets live (``/shop/ws/sessions/``)."""
    return f"{get_script_prefix()}{conf.ZETT_WEBSOCKET_PATH}"


def prefix_of(scope: dict[str, Any]) -> str:
    """The script prefix of a connection, as Django's ASGI handler derives it."""
    forced = getattr(settings, "FORCE_SCRIPT_NAME", None)
    prefix = forced if forced is not None else str(scope.get("root_path") or "")
    return prefix if prefix.endswith("/") else f"{prefix}/"


class ScriptPrefixMiddleware:
    """Sets the script prefix of each websocket connection before its consumer runs."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        set_script_prefix(prefix_of(scope))
        return await self.inner(scope, receive, send)
