"""``LocalBus``: the session bus of one process, in memory (no ``REDIS_URL``).

Every lease is this process's own, so a session never follows another worker's run, never
forwards a request and has nobody to send its frames to: those methods do nothing. The
leases still work as a cluster's do (one run, or one recovery, per session at a time), so
the sessions code runs the same steps with one process as with many.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agent_app.bus.base import Lease

__all__ = ["LocalBus"]

#: The inbox a local lease names: nothing is ever sent to it.
LOCAL_CHANNEL = "local"


class LocalBus:
    """The ``SessionBus`` of a single process (see the module docstring)."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self._leases: dict[str, Lease] = {}

    async def acquire(self, session_id: str, request_id: str) -> Lease | None:
        if session_id in self._leases:
            return None
        lease = self._leases[session_id] = Lease(self.worker, LOCAL_CHANNEL, request_id)
        return lease

    async def release(self, session_id: str) -> None:
        self._leases.pop(session_id, None)

    async def holder(self, session_id: str) -> Lease | None:
        return self._leases.get(session_id)

    async def ttl(self, session_id: str) -> int:
        return -1 if session_id in self._leases else -2  # as Redis: no expiry / no key

    async def is_live(self, session_id: str, request_id: str) -> bool:
        lease = self._leases.get(session_id)
        return lease is not None and lease.request_id == request_id

    async def subscribe(self, session_id: str) -> None:
        return None

    async def unsubscribe(self, session_id: str) -> None:
        return None

    def publish(self, session_id: str, frame: list[Any]) -> Awaitable[None] | None:
        return None

    def rewrite_replay(
        self, session_id: str, request_id: str, entries: list[tuple[int, dict[str, str]]]
    ) -> None:
        return None

    async def flushed(self, session_id: str) -> None:
        return None

    async def replay(
        self, session_id: str, request_id: str, after_seq: int | None
    ) -> list[tuple[int, str]]:
        return []

    async def call(
        self,
        lease: Lease,
        message: dict[str, Any],
        on_answer: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> dict[str, Any] | None:
        return None  # every lease is this process's own: there is no other owner

    async def answer(self, reply_to: str, ticket: str, body: dict[str, Any]) -> None:
        return None

    async def close(self) -> None:
        self._leases.clear()
