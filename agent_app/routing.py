"""WebSocket routes: one socket per chat session (the frame protocol is docs/protocol.md)."""

from django.urls import path

from agent_app.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/sessions/<uuid:session_id>/", ChatConsumer.as_asgi()),
]
