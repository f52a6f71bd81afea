"""A worker's background loop: periodic work that needs no socket and no request.

Some work of a worker is nobody's request: a run whose worker died while no socket watched
it must still be continued, and nobody will open its chat to make that happen. Each
worker process runs one ``Background`` on its event loop, beside its live sessions
(``agent_app.sessions.registry``), and any periodic job hangs off it: ``every(name,
seconds, job)`` runs ``job()`` at start-up and then every ``seconds()`` (read anew each
round, so a setting changed in a test takes effect), one job at a time, a failing round
logged and retried at the next. ``close`` cancels the loop and waits for it.

It also runs, once per process, every loop the app registered for its workers
(``agent_app.background.worker_loops``: webhook deliveries, the scheduler).

The one job it has from the start is the **sweep** (``sweep``): every
``ZETT_SWEEP_SECONDS`` it reads the runs stored as ``running`` and, for each one no worker
holds the lease of, settles its session as a socket joining it would
(``agent_app.sessions.settling``): the run is continued here from its checkpoint, or
settled; paused runs whose replies are all known go on too. Every worker sweeps; the
session's lease makes sure one of them takes each run. At start-up the first sweep runs at
once: with one process and no Redis, the runs the last process left (a crash, a deploy,
``runserver``'s reload) go on before anyone asks.

Where it starts: ``install_with_server`` is called when the ASGI application is built; in a
daphne server (the ``daphne`` command, ``runserver``) it starts the loop once the reactor
runs, before the first connection. Elsewhere (uvicorn, tests) the loop starts with the
first use of the live sessions if ``start`` is called, or not at all; a test sweeps by
calling ``sweep`` itself.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app import conf
from agent_app.background import worker_loops
from agent_app.models import ChatRun, RunStatus
from agent_app.sessions import shutdown

__all__ = ["Background", "install_with_server", "sweep", "sweep_seconds"]

logger = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]


class Sessions(Protocol):
    """What the sweep needs of the live sessions (``LiveSessions``)."""

    async def is_live(self, session_id: str, request_id: str) -> bool: ...

    def session(self, session_id: str) -> Any: ...


class Background:
    """The periodic jobs of one worker's event loop (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: list[tuple[str, Callable[[], float], Job]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, name: str, seconds: Callable[[], float], job: Job) -> None:
        """Run ``job()`` now and then every ``seconds()`` (once ``start`` was called)."""
        self._jobs.append((name, seconds, job))
        if self._tasks:
            self._tasks.append(self._spawn(name, seconds, job))

    def start(self) -> None:
        """Start the jobs on the running loop, and every loop the app registered for its
        workers (``agent_app.background.worker_loops``: webhook deliveries, schedules), once."""
        if not self._tasks:
            self._tasks = [self._spawn(*entry) for entry in self._jobs]
            for name, loop in worker_loops.registered():
                self._tasks.append(
                    asyncio.create_task(_forever(name, loop()), name=f"zett-loop-{name}")
                )

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def _spawn(self, name: str, seconds: Callable[[], float], job: Job) -> asyncio.Task[None]:
        return asyncio.create_task(self._loop(name, seconds, job), name=f"zett-background-{name}")

    @staticmethod
    async def _loop(name: str, seconds: Callable[[], float], job: Job) -> None:
        while True:
            if not shutdown.draining():  # a worker shutting down takes on nothing new
                try:
                    await job()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("The background job %s failed; it runs again later", name)
            await asyncio.sleep(max(float(seconds()), 0.05))

    async def close(self) -> None:
        """Cancel the jobs and wait until they have stopped."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


async def _forever(name: str, run: Callable[[], Awaitable[None]]) -> None:
    """A registered loop, until cancelled; a crash is logged (it is not restarted)."""
    try:
        await run()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("The worker loop %s stopped", name)


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
