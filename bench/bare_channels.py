"""A bare Channels app: the frames our consumer sends, with no agent and no database behind.

It is the transport limit of the socket benchmark. Served by daphne exactly like the real
site (``daphne bench.bare_channels:application``), it answers on the same path,
``/ws/sessions/<uuid>/``, and speaks just enough of the protocol for the benchmark client:
a ``session`` frame on connect, and for every ``user_message`` the frames of one recorded
run of the real consumer (its ``run_started`` and every ``agent_event``), re-numbered and
re-encoded one by one as a real consumer must. The recordings are a JSON object named by
``BENCH_FRAMES``, user message → frames (``bench.socket`` writes it before starting this
server); a message that was not recorded gets the first recording.

Nothing else from Django is used: minimal settings are configured here, before the
Channels imports that need them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from django.conf import settings

if not settings.configured:
    settings.configure(ALLOWED_HOSTS=["*"], INSTALLED_APPS=[], USE_TZ=True)

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import path

__all__ = ["BareConsumer", "application"]


def _load_frames() -> dict[str, list[dict[str, Any]]]:
    """The recordings: user message content → the frames the site sent for it."""
    source = os.environ.get("BENCH_FRAMES")
    if not source:
        raise RuntimeError("BENCH_FRAMES must name a JSON file with the frames to replay")
    with open(source) as handle:
        recorded = json.load(handle)
    if isinstance(recorded, list):
        recorded = {"": recorded}
    for frames in recorded.values() if isinstance(recorded, dict) else [None]:
        if not isinstance(frames, list) or not all(isinstance(frame, dict) for frame in frames):
            raise RuntimeError(f"{source} must map messages to JSON lists of frame objects")
    return recorded


RECORDINGS = _load_frames()
#: For a message that was not recorded: the first recording.
FIRST = next(iter(RECORDINGS.values()))


class BareConsumer(AsyncJsonWebsocketConsumer):
    """Replays the recorded frames of one run for each ``user_message``."""

    async def connect(self) -> None:
        self.session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        self.seq = 0
        await self.accept()
        await self.send_json(
            {
                "type": "session",
                "session_id": self.session_id,
                "history": [],
                "active_request_id": None,
            }
        )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "user_message":
            await self.send_json({"type": "error", "code": "unknown_type", "message": "bench"})
            return
        for frame in RECORDINGS.get(content.get("content"), FIRST):
            if "seq" in frame:  # ``run_started`` and every ``agent_event``
                self.seq += 1
                frame = {**frame, "seq": self.seq}
            await self.send_json(frame)


application = ProtocolTypeRouter(
    {"websocket": URLRouter([path("ws/sessions/<uuid:session_id>/", BareConsumer.as_asgi())])}
)
