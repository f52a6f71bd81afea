"""WebSocket routes: one socket per chat session at ``ZETT_WEBSOCKET_PATH`` + ``<uuid>/``
(the frame protocol is docs/protocol.md). ``socket_path`` is what the chat page connects
to, so the page never hard-codes it."""

from __future__ import annotations

from django.urls import path

from agent_app import conf
from agent_app.consumers import ChatConsumer
from agent_app.websocket.script_prefix import socket_prefix

__all__ = ["socket_path", "websocket_urlpatterns"]

websocket_urlpatterns = [
    path(f"{conf.ZETT_WEBSOCKET_PATH}<uuid:session_id>/", ChatConsumer.as_asgi()),
]


def socket_path(session_id: object) -> str:
    """The absolute path of chat ``session_id``'s socket (under the site's script prefix)."""
    return f"{socket_prefix()}{session_id}/"
