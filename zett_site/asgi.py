"""ASGI entry point: HTTP goes to Django, websockets to the chat consumer.

Websockets pass the origin check first (scheme, host and port of a page allowed to open a
socket; see ``agent_app.security``, also for why a client sending no Origin is admitted),
then the cookie, session and auth middleware that puts ``scope["user"]`` and
``scope["session"]`` (the consumer asks ``agent_app.access`` whose chat it is). A path no
route serves is refused quietly (``agent_app.unrouted``).

zett's settings are checked here, before the first handshake: daphne runs no system checks,
and a bad limit would otherwise start fine and fail every handshake.

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
from channels.routing import ProtocolTypeRouter  # noqa: E402
from channels.sessions import (  # noqa: E402
    CookieMiddleware,
    InstanceSessionWrapper,
    SessionMiddleware,
)

from agent_app.checks import raise_on_invalid_settings  # noqa: E402
from agent_app.routing import websocket_urlpatterns  # noqa: E402
from agent_app.security import OriginValidator  # noqa: E402
from agent_app.unrouted import QuietURLRouter  # noqa: E402

raise_on_invalid_settings()


class SocketSessionMiddleware(SessionMiddleware):
    """Puts the Django session in a websocket's scope and leaves ``send`` as it is."""

    async def __call__(self, scope, receive, send):
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": OriginValidator(
            CookieMiddleware(
                SocketSessionMiddleware(AuthMiddleware(QuietURLRouter(websocket_urlpatterns)))
            )
        ),
    }
)
