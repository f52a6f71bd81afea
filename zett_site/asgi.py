"""ASGI entry point: HTTP goes to Django, websockets to the chat consumer.

Websockets pass the origin check first (a page on another site cannot open a socket with
the visitor's cookies; see ``agent_app.security`` for why a client sending no Origin is
admitted), then the session/auth middleware that puts ``scope["user"]``.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

# Set up Django (apps registry, settings) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agent_app.routing import websocket_urlpatterns  # noqa: E402
from agent_app.security import BrowserOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": BrowserOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
