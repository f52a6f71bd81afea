"""ASGI entry point: HTTP goes to Django (``agent_app.asgi.http_application``: Django's
handler with its request threads kept for the next requests), websockets to the chat
app's whole websocket stack (``agent_app.asgi.websocket_application``: origin check,
cookies, session, user or API token, router; zett's settings are checked before the
first handshake)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

# Set up Django (apps registry, settings) before importing anything that touches models,
# as ``get_asgi_application()`` does.
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter  # noqa: E402

from agent_app.asgi import (  # noqa: E402
    http_application,
    lifespan_application,
    websocket_application,
)

application = ProtocolTypeRouter(
    {
        "http": http_application(),
        "websocket": websocket_application(),
        # uvicorn: the worker's background loop (the sweep) starts with the server.
        "lifespan": lifespan_application(),
    }
)
