"""ASGI entry point: HTTP goes to Django, websockets to the chat app's whole websocket stack
(``agent_app.asgi.websocket_application``: origin check, cookies, session, user or API
token, router; zett's settings are checked before the first handshake)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

# Set up Django (apps registry, settings) before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from agent_app.asgi import lifespan_application, websocket_application  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_application(),
        # uvicorn: the worker's background loop (the sweep) starts with the server.
        "lifespan": lifespan_application(),
    }
)
