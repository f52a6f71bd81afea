"""ASGI entry point: HTTP goes to Django, websockets to the chat consumer.

Websockets pass the origin check first (a page on another site cannot open a socket with
the visitor's cookies; see ``agent_app.security`` for why a client sending no Origin is
admitted), then the cookie, session and auth middleware that puts ``scope["user"]``.

The session middleware is Channels' own minus its ``send`` wrapper: that wrapper saves a
modified session when an HTTP response starts, which a websocket never sends, so on a socket
it only added two lazy-object lookups to every frame.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

# Set up Django (apps registry, settings) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddleware  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.sessions import (  # noqa: E402
    CookieMiddleware,
    InstanceSessionWrapper,
    SessionMiddleware,
)

from agent_app.routing import websocket_urlpatterns  # noqa: E402
from agent_app.security import BrowserOriginValidator  # noqa: E402


class SocketSessionMiddleware(SessionMiddleware):
    """Puts the Django session in a websocket's scope and leaves ``send`` as it is."""

    async def __call__(self, scope, receive, send):
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginValidator(
            CookieMiddleware(
                SocketSessionMiddleware(AuthMiddleware(URLRouter(websocket_urlpatterns)))
            )
        ),
    }
)
