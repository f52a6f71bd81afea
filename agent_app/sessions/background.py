"""The sweep: runs whose worker died, continued with no socket to ask for it.

A run whose worker died while no socket watched it must still be continued, and nobody
will open its chat to make that happen. So every worker's live sessions
(``agent_app.sessions.registry``) add the **sweep** (``sweep``) to their process's
``agent_app.process.loops.Background``: every ``ZETT_SWEEP_SECONDS`` it reads the runs
stored as ``running`` and, for each one no worker holds the lease of, settles its session
as a socket joining it would (``agent_app.sessions.settling``): the run is continued here
from its checkpoint, or settled; paused runs whose replies are all known go on too. Every
worker sweeps; the session's lease makes sure one of them takes each run. At start-up the
first sweep runs at once: with one process and no Redis, the runs the last process left (a
crash, a deploy, ``runserver``'s reload) go on before anyone asks.

Where it starts: ``install_with_server`` is called when the ASGI application is built; in a
daphne server (the ``daphne`` command, ``runserver``) it starts the loops once the reactor
runs, before the first connection. Elsewhere (uvicorn, tests) the loops start with the
first use of the live sessions if ``start`` is called, or not at all; a test sweeps by
calling ``sweep`` itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.models import ChatRun, RunStatus

__all__ = ["install_with_server", "sweep", "sweep_seconds"]


class Sessions(Protocol):
    """What the sweep needs of the live sessions (``LiveSessions``)."""

    async def is_live(self, session_id: str, request_id: str) -> bool: ...

    def session(self, session_id: str) -> Any: ...


def _running_runs() -> list[tuple[str, str]]:
    """``(session_id, request_id)`` of every run stored as ``running``."""
    return [
        (str(session_id), request_id)
        for session_id, request_id in ChatRun.objects.filter(status=RunStatus.RUNNING)
        .order_by("started_at")
        .values_list("session_id", "request_id")
    ]


async def sweep(registry: Sessions) -> int:
    """Settle (continue, where it can) every running run no worker holds; how many."""
    swept = 0
    for session_id, request_id in await database_sync_to_async(_running_runs)():
        if await registry.is_live(session_id, request_id):
            continue
        live = registry.session(session_id)
        ready: list[str] = []
        try:
            async with live.feed.lock:
                if live.run is None and live.follower.remote is None:
                    ready = await live.settler.settle()
                    swept += 1
            for paused in ready:
                await live.replies.resume(paused)
        finally:
            live.check_idle()
    return swept


def install_with_server(start: Callable[[], None]) -> None:
    """Call ``start`` (it starts this process's background loop) once a daphne server runs
    (see the module docstring); elsewhere do nothing."""
    if "daphne.server" not in sys.modules:
        return
    from twisted.internet import reactor

    reactor.callLater(0, start)  # type: ignore[attr-defined]  (runs once the loop runs)


def sweep_seconds() -> float:
    return float(conf.ZETT_SWEEP_SECONDS)
