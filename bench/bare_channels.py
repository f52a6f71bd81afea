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

With ``BENCH_STORE`` naming a SQLite file it is the durable floor instead: each run is
also stored the way the site's contract asks for and no cheaper, in two transactions, each
through one hop to Channels' database thread (``database_sync_to_async``): before the
first frame, the chat's row bumped, the run and the user's message inserted; before the
last frame, the run's status and the chat's row updated and the answer inserted. Three
narrow tables of its own, no ORM models: what storing a run costs a consumer with nothing
else around it.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

if not settings.configured:
    _store = os.environ.get("BENCH_STORE")
    settings.configure(
        ALLOWED_HOSTS=["*"],
        INSTALLED_APPS=[],
        USE_TZ=True,
        # The site's own SQLite settings (``zett_site.settings``).
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": _store,
                "CONN_MAX_AGE": 600,
                "CONN_HEALTH_CHECKS": True,
                "OPTIONS": {
                    "timeout": 20,
                    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                    "transaction_mode": "IMMEDIATE",
                },
            }
        }
        if _store
        else {},
    )

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.routing import ProtocolTypeRouter, URLRouter
from django.db import connection, transaction
from django.urls import path

__all__ = ["BareConsumer", "application"]

#: The durable floor's SQLite file, when it stores runs.
STORE = os.environ.get("BENCH_STORE")


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


_TABLES = (
    "CREATE TABLE IF NOT EXISTS chat (id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "last_seq INTEGER NOT NULL, tokens INTEGER NOT NULL, updated TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, chat_id TEXT NOT NULL, "
    "status TEXT NOT NULL, started TEXT NOT NULL, ended TEXT, tokens INTEGER)",
    "CREATE TABLE IF NOT EXISTS message (id INTEGER PRIMARY KEY, chat_id TEXT NOT NULL, "
    "run_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS message_chat_seq ON message (chat_id, seq)",
)


def _begin_run(chat_id: str, run_id: str, content: str) -> int:
    """The run's start, one transaction: the chat's row bumped (inserted the first time),
    the run and the user's message inserted; the chat's version."""
    now = datetime.now(UTC).isoformat()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO chat (id, version, last_seq, tokens, updated) VALUES (%s, 1, 0, 0, %s) "
            "ON CONFLICT (id) DO UPDATE SET version = version + 1, updated = excluded.updated "
            "RETURNING version",
            [chat_id, now],
        )
        (version,) = cursor.fetchone()
        cursor.execute(
            "INSERT INTO run (id, chat_id, status, started) VALUES (%s, %s, 'running', %s)",
            [run_id, chat_id, now],
        )
        _insert_message(cursor, chat_id, run_id, version, "user", content)
    return version


def _end_run(chat_id: str, run_id: str, seq: int, answer: str) -> None:
    """The run's end, one transaction: its status, the chat's row, the answer."""
    now = datetime.now(UTC).isoformat()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE run SET status = 'completed', ended = %s, tokens = 1 WHERE id = %s",
            [now, run_id],
        )
        cursor.execute(
            "UPDATE chat SET version = version + 1, last_seq = %s, tokens = tokens + 1, "
            "updated = %s WHERE id = %s",
            [seq, now, chat_id],
        )
        _insert_message(cursor, chat_id, run_id, seq, "assistant", answer)


def _insert_message(cursor: Any, chat_id: str, run_id: str, seq: int, role: str, text: str) -> None:
    cursor.execute(
        "INSERT INTO message (chat_id, run_id, seq, role, content) VALUES (%s, %s, %s, %s, %s)",
        [chat_id, run_id, seq, role, text],
    )


if STORE:
    with connection.cursor() as cursor:
        for statement in _TABLES:
            cursor.execute(statement)
    connection.close()  # the database thread opens its own
    begin_run = database_sync_to_async(_begin_run)
    end_run = database_sync_to_async(_end_run)

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
        frames = RECORDINGS.get(content.get("content"), FIRST)
        run_id = str(uuid.uuid4())
        if STORE:
            await begin_run(self.session_id, run_id, str(content.get("content")))
        for index, frame in enumerate(frames):
            if "seq" in frame:  # ``run_started`` and every ``agent_event``
                self.seq += 1
                frame = {**frame, "seq": self.seq}
            if STORE and index == len(frames) - 1:
                await end_run(self.session_id, run_id, self.seq, "the answer")
            await self.send_json(frame)


application = ProtocolTypeRouter(
    {"websocket": URLRouter([path("ws/sessions/<uuid:session_id>/", BareConsumer.as_asgi())])}
)
