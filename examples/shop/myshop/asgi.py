"""HTTP to Django, websockets to zett's whole websocket stack; lifespan (uvicorn) starts
zett's background loop (daphne starts it by itself)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "myshop.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from agent_app.asgi import lifespan_application, websocket_application  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_application(),
        "lifespan": lifespan_application(),
    }
)
