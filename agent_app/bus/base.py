"""The session bus: where one session's runs, frames and requests meet, in one or many workers.

``SessionBus`` is the one seam between a session and the other workers. Session code
(``agent_app.sessions``) talks to it only, never to Redis, and has no single-process branch:

- ``agent_app.bus.local.LocalBus`` is one process's bus, in memory (the default): its leases
  are a dict, and there is nobody to fan out to or forward to.
- ``agent_app.bus.redis.RedisBus`` (with ``REDIS_URL``) shares leases, frames and replay
  over Redis, so any worker serves any socket of any session.

So the single-process suite runs the very logic a cluster runs. A transport never imports
session code: what arrives for a session (another worker's frames, a lost lease, a request
forwarded to the run's owner) is handed to the ``BusListener`` it was built with.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["WORKER_ID", "BusListener", "Lease", "Marker", "SessionBus"]

#: This process, as run rows and leases name it: host, pid and a random boot id.
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Marker(StrEnum):
    """What a published frame is to a run (its place in the replay stream)."""

    #: A frame of a run, kept for replay.
    KEPT = ""
    #: A run's first frame: the replay stream starts over.
    START = "start"
    #: A run's last frame: not kept; the stream expires.
    END = "end"
    #: A frame that is not part of a run (a recovery's outcome): not kept.
    UNKEPT = "unkept"
    #: Not a frame: the owner merged its replay buffer, the stream is rewritten.
    REWRITE = "rewrite"
    #: Not a frame: the owner hands the run over (it shuts down) and lets its lease go
    #: now: a worker following the run continues it at once (``sessions.follower``).
    HANDOVER = "handover"


@dataclass(frozen=True, slots=True)
class Lease:
    """Who runs a session's run: the worker, its inbox channel, the request."""

    worker: str
    channel: str
    request_id: str

    def encode(self) -> str:
        return json.dumps(
            {"worker": self.worker, "channel": self.channel, "request_id": self.request_id}
        )

    @classmethod
    def decode(cls, raw: bytes | str | None) -> Lease | None:
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return cls(str(data["worker"]), str(data["channel"]), str(data["request_id"]))
        except (ValueError, KeyError, TypeError):
            return None


class BusListener(Protocol):
    """What a bus hands back to the sessions of its process (the registry implements it)."""

    async def session_frames(self, session_id: str, frames: list[list[Any]]) -> None:
        """Frames another worker's run sent, in order."""

    async def lease_lost(self, session_id: str, request_id: str) -> None:
        """This process failed to renew the lease of ``request_id``: stop that run."""

    async def owner_request(self, session_id: str, message: dict[str, Any]) -> None:
        """A reply or ``cancel`` another worker forwarded to the run this process runs."""


class SessionBus(Protocol):
    """Leases, fan-out, replay and requests to a run's owner (see the module docstring)."""

    #: This process (``WORKER_ID``); a lease naming it is this process's own.
    worker: str

    async def acquire(self, session_id: str, request_id: str) -> Lease | None:
        """Take the session's run lease; None when another run (or recovery) holds it."""

    async def release(self, session_id: str) -> None:
        """Let go of the session's lease, if this process holds it."""

    async def holder(self, session_id: str) -> Lease | None:
        """The lease of the session's active run, whoever holds it."""

    async def ttl(self, session_id: str) -> int:
        """Milliseconds left on the session's lease (negative: none, or no expiry)."""

    async def is_live(self, session_id: str, request_id: str) -> bool:
        """Whether some process runs ``request_id`` now."""

    async def subscribe(self, session_id: str) -> None:
        """Receive the session's frames from the other workers."""

    async def unsubscribe(self, session_id: str) -> None: ...

    def publish(self, session_id: str, frame: list[Any]) -> Awaitable[None] | None:
        """Queue ``[seq, prev_seq, text, marker, request_id]`` for the others, in order.

        An awaitable when the queue is long: the caller waits for it (back-pressure).
        """

    def rewrite_replay(
        self, session_id: str, request_id: str, entries: list[tuple[int, dict[str, str]]]
    ) -> None:
        """Queue a rewrite of the shared replay stream (the owner merged its buffer)."""

    async def flushed(self, session_id: str) -> None:
        """Return once every frame queued for the session went out."""

    async def replay(
        self, session_id: str, request_id: str, after_seq: int | None
    ) -> list[tuple[int, str]]:
        """``(seq, text)`` of the run's shared frames after ``after_seq``."""

    async def call(
        self,
        lease: Lease,
        message: dict[str, Any],
        on_answer: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> dict[str, Any] | None:
        """Send a request to the owner of ``lease``; its answer, None if none came."""

    async def answer(self, reply_to: str, ticket: str, body: dict[str, Any]) -> None:
        """Answer a request another worker forwarded here."""

    async def close(self) -> None:
        """Stop the bus's background work and close its connections."""
