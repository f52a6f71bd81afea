"""The process-wide registry of live sessions: which sessions are live on this event loop.

``live_sessions()`` gives the running loop's ``LiveSessions``, which brings a session's
``agent_app.live.LiveSession`` up when a socket or a run needs it and drops it once it has
neither (``drop_if_idle``); with ``REDIS_URL`` it owns the ``agent_app.cluster.Cluster``.
What a live session holds and who may change it is told once, in ``agent_app.live``.
"""

from __future__ import annotations

import asyncio
import os
import socket as _socket
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from agent_app import conf, shutdown
from agent_app.agents import build_agent
from agent_app.cluster import Cluster
from zett_agent.agent import Agent

if TYPE_CHECKING:
    from agent_app.live import LiveSession

__all__ = ["WORKER_ID", "AgentFactory", "LiveSessions", "existing_live_sessions", "live_sessions"]

#: This process, as run rows and leases name it: host, pid and a random boot id.
WORKER_ID = f"{_socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

#: Builds the agent of one session, given its id.
AgentFactory = Callable[[str], Awaitable[Agent]]


class LiveSessions:
    """The live sessions of one event loop, by session id (and the cluster, if any)."""

    def __init__(self, factory: AgentFactory | None = None, cluster_url: str | None = None):
        self._sessions: dict[str, LiveSession] = {}
        self.factory = factory or build_agent
        self.cluster = Cluster(self, cluster_url, WORKER_ID) if cluster_url else None
        self._cleanups: set[asyncio.Task[None]] = set()

    def get(self, session_id: str) -> LiveSession | None:
        return self._sessions.get(session_id)

    def session(self, session_id: str) -> LiveSession:
        """The live session of ``session_id``, brought up if needed."""
        live = self._sessions.get(session_id)
        if live is None:
            from agent_app.live import LiveSession  # (it imports this module)

            live = self._sessions[session_id] = LiveSession(self, session_id)
        return live

    async def is_live(self, session_id: str, request_id: str) -> bool:
        """Whether some process runs ``request_id`` (with one process: this one)."""
        if self.cluster is not None:
            return await self.cluster.is_live(session_id, request_id)
        live = self._sessions.get(session_id)
        return live is not None and live.active_request_id == request_id

    def drop_if_idle(self, live: LiveSession) -> None:
        if not live.idle or self._sessions.get(live.session_id) is not live:
            return
        del self._sessions[live.session_id]
        if live.remote is not None and live.remote.watcher is not None:
            live.remote.watcher.cancel()
        if self.cluster is not None and live.subscribed:
            task = asyncio.create_task(self.cluster.unsubscribe(live.session_id))
            self._cleanups.add(task)
            task.add_done_callback(self._cleanups.discard)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LiveSession]:
        return iter(list(self._sessions.values()))

    async def close(self) -> None:
        """Stop this registry's background work (its cluster's inbox and lease renewal)."""
        for task in list(self._cleanups):
            await asyncio.wait([task])
        if self.cluster is not None:
            await self.cluster.close()
        loop = asyncio.get_running_loop()
        if _registries.get(loop) is self:
            del _registries[loop]


_registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LiveSessions] = (
    weakref.WeakKeyDictionary()
)


def live_sessions() -> LiveSessions:
    """The registry of the running event loop (asyncio objects never cross loops)."""
    loop = asyncio.get_running_loop()
    registry = _registries.get(loop)
    if registry is None:
        url = conf.ZETT_REDIS_URL or None
        registry = _registries[loop] = LiveSessions(cluster_url=url)
        shutdown.install(registry, loop)
    return registry


def existing_live_sessions() -> LiveSessions | None:
    """The running event loop's registry if it has one (``live_sessions`` would make one)."""
    return _registries.get(asyncio.get_running_loop())
