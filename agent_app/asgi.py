"""``websocket_application()``: the whole websocket stack of the chat app, for a project's
ASGI ``ProtocolTypeRouter``::

    application = ProtocolTypeRouter({
        "http": http_application(),  # or Django's get_asgi_application()
        "websocket": websocket_application(),
    })

``http_application()`` is Django's ASGI handler with its request threads kept from one
request to the next (``agent_app.process.request_threads``).

Layers, outermost first: the origin check (``agent_app.guard.origins``: scheme, host and port
of a page allowed to open a socket; a refusal is logged with its reason), cookies, the
Django session, the person (a browser's signed-in user, or a program's
``Authorization: Bearer`` API token, ``agent_app.guard.tokens``), and the router of the chat
sockets (``agent_app.routing``, at ``ZETT_WEBSOCKET_PATH``; a path no route serves is refused
quietly, ``agent_app.websocket.unrouted``).

zett's settings are checked when the stack is built, before the first handshake: daphne
runs no system checks, and a bad limit would otherwise start fine and fail every handshake.

The session middleware is Channels' own minus its ``send`` wrapper: that wrapper saves a
modified session when an HTTP response starts, which a websocket never sends, so on a socket
it only added two lazy-object lookups to every frame.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware

__all__ = [
    "SocketSessionMiddleware",
    "http_application",
    "lifespan_application",
    "websocket_application",
]


class SocketSessionMiddleware(SessionMiddleware):
    """Puts the Django session in a websocket's scope and leaves ``send`` as it is."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


def websocket_application(*, check_settings: bool = True) -> Any:
    """The chat app's websocket ASGI application (call it once Django is set up)."""
    from agent_app.checks import raise_on_invalid_settings
    from agent_app.guard.origins import OriginValidator
    from agent_app.guard.tokens import BearerTokenMiddleware
    from agent_app.routing import websocket_urlpatterns
    from agent_app.sessions.background import install_with_server
    from agent_app.sessions.registry import start_background
    from agent_app.websocket.script_prefix import ScriptPrefixMiddleware
    from agent_app.websocket.unrouted import QuietURLRouter

    if check_settings:
        raise_on_invalid_settings()
    # In a daphne server, the worker's background loop (the sweep) starts with the server.
    install_with_server(start_background)
    return OriginValidator(
        CookieMiddleware(
            SocketSessionMiddleware(
                AuthMiddleware(
                    BearerTokenMiddleware(
                        ScriptPrefixMiddleware(QuietURLRouter(websocket_urlpatterns))
                    )
                )
            )
        )
    )


def http_application() -> Any:
    """Django's ASGI handler for HTTP, with each request's thread for sync work kept for
    the next requests instead of started and joined per request
    (``agent_app.process.request_threads``). Call it once Django is set up, in place of
    ``get_asgi_application()``."""
    from agent_app.process.request_threads import RequestThreadsHandler

    return RequestThreadsHandler()


def lifespan_application() -> Any:
    """The ASGI ``lifespan`` application: a server that speaks it (uvicorn) starts this
    worker's background loop with itself (``agent_app.sessions.background``: the sweep that
    continues runs whose worker died). Daphne does not speak it; there the loop starts with
    the server anyway (``websocket_application``)."""

    async def lifespan(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                from agent_app.sessions.registry import start_background

                start_background()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    return lifespan
