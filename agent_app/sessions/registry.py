"""The process-wide registry of live sessions: which sessions are live on this event loop.

``live_sessions()`` gives the running loop's ``LiveSessions``, which brings a session's
``agent_app.sessions.live.LiveSession`` up when a socket or a run needs it and drops it once
it has neither (``drop_if_idle``). It owns the loop's session bus: a ``RedisBus`` with
``REDIS_URL``, a ``LocalBus`` without; and it is the bus's listener, handing what arrives
from other workers to the session it is for. What a live session holds and who may change
it is told once, in ``agent_app.sessions.live``.
"""

from __future__ import annotations

import asyncio
import functools
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from agent_app import conf
from agent_app.agents.factory import build_agent
from agent_app.bus.base import WORKER_ID, SessionBus
from agent_app.bus.local import LocalBus
from agent_app.process import shutdown
from agent_app.process.loops import Background
from agent_app.sessions.background import sweep, sweep_seconds
from agent_app.sessions.live import AgentFactory, LiveSession

__all__ = [
    "LiveSessions",
    "existing_live_sessions",
    "live_sessions",
    "sockets_here",
    "start_background",
]


#: A session dropped here keeps its agent this long for its next arrival: a program that
#: posts runs one after another (an AG-UI client, a new request each) reuses it as a
#: connected socket does, and the run checks it serves the chat's assistant as then.
AGENT_KEPT_SECONDS = 30.0
AGENTS_KEPT = 256


class LiveSessions:
    """The live sessions of one event loop, by session id, and their bus."""

    def __init__(self, factory: AgentFactory | None = None, cluster_url: str | None = None):
        self._sessions: dict[str, LiveSession] = {}
        #: The agents of sessions dropped lately, by session, with when and by which
        #: factory they were built (another factory since: built again; ``session``).
        self._agents: OrderedDict[str, tuple[float, Any, Any]] = OrderedDict()
        self.factory = factory or build_agent
        self.bus: SessionBus = LocalBus(WORKER_ID)
        if cluster_url:
            # Imported only for a cluster: the Redis client imports OpenTelemetry when it
            # is installed, which a single process with tracing off must not pay for.
            from agent_app.bus.redis import RedisBus

            self.bus = RedisBus(self, cluster_url, WORKER_ID)
        self._cleanups: set[asyncio.Task[None]] = set()
        #: This process's loops (``agent_app.process.loops``): the sweep, and the loops
        #: registered for every worker (webhook deliveries, the scheduler).
        self.background = Background()
        self.background.every("sweep", sweep_seconds, functools.partial(sweep, self))

    def get(self, session_id: str) -> LiveSession | None:
        return self._sessions.get(session_id)

    def session(self, session_id: str) -> LiveSession:
        """The live session of ``session_id``, brought up if needed (with the agent it had
        when it was last dropped here, if that was at most ``AGENT_KEPT_SECONDS`` ago and
        the factory is the one that built it)."""
        live = self._sessions.get(session_id)
        if live is None:
            live = self._sessions[session_id] = LiveSession(self, session_id)
            kept = self._agents.pop(session_id, None)
            if kept is not None and kept[1] is self.factory:
                live.agent = kept[2] if time.monotonic() - kept[0] <= AGENT_KEPT_SECONDS else None
        return live

    async def is_live(self, session_id: str, request_id: str) -> bool:
        """Whether some process runs ``request_id`` (it holds the session's lease)."""
        return await self.bus.is_live(session_id, request_id)

    def drop_if_idle(self, live: LiveSession) -> None:
        if not live.idle or self._sessions.get(live.session_id) is not live:
            return
        del self._sessions[live.session_id]
        if live.agent is not None:
            self._agents[live.session_id] = (time.monotonic(), self.factory, live.agent)
            while len(self._agents) > AGENTS_KEPT:
                self._agents.popitem(last=False)
        live.follower.stop()
        if live.follower.subscribed:
            task = asyncio.create_task(self.bus.unsubscribe(live.session_id))
            self._cleanups.add(task)
            task.add_done_callback(self._cleanups.discard)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LiveSession]:
        return iter(list(self._sessions.values()))

    async def close(self) -> None:
        """Stop this registry's background work (its loop, its bus's inbox and renewal)."""
        await self.background.close()
        for task in list(self._cleanups):
            await asyncio.wait([task])
        await self.bus.close()
        loop = asyncio.get_running_loop()
        if _registries.get(loop) is self:
            del _registries[loop]

    # --- the bus's listener ------------------------------------------------------------

    async def session_frames(self, session_id: str, frames: list[list[Any]]) -> None:
        live = self._sessions.get(session_id)
        if live is not None:
            await live.follower.remote_frames(frames)

    async def lease_lost(self, session_id: str, request_id: str) -> None:
        live = self._sessions.get(session_id)
        if live is not None:
            await live.lost_lease(request_id)

    async def owner_request(self, session_id: str, message: dict[str, Any]) -> None:
        await self.session(session_id).follower.serve(message)


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


def start_background() -> None:
    """Start the running event loop's background loop (``agent_app.process.loops``)."""
    live_sessions().background.start()


def existing_live_sessions() -> LiveSessions | None:
    """The running event loop's registry if it has one (``live_sessions`` would make one)."""
    return _registries.get(asyncio.get_running_loop())


def sockets_here(session_id: str) -> list[Any]:
    """The sockets the running event loop's live session of ``session_id`` holds (none
    when it has no such session)."""
    here = existing_live_sessions()
    live = here.get(session_id) if here is not None else None
    return [] if live is None else list(live.sockets)
