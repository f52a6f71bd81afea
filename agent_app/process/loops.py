"""The loops of one process: ``Background`` runs them on its event loop.

Some work of a process is nobody's request: webhook deliveries, schedules that come due,
runs whose worker died while no socket watched them. Two kinds of loop do it, and one
``Background`` runs both:

- **registered loops** (``register(name, loop)``): a name and a factory of a coroutine
  function that runs until cancelled. The app registers the webhook deliveries and the
  scheduler when it is ready (``agent_app.background.host.register_loops``); every
  ``Background`` runs each once (or those it names: ``manage.py zett_background`` may
  leave one out), a crash logged and not restarted;
- **periodic jobs** (``every(name, seconds, job)``): ``job()`` at start and then every
  ``seconds()`` (read anew each round, so a setting changed in a test takes effect), one
  round at a time, a failing round logged and retried at the next, none while the process
  drains (``agent_app.process.shutdown``). A web worker's live sessions add their sweep
  (``agent_app.sessions.background``).

``start`` starts them on the running event loop (once), ``close`` cancels them and
returns once they have ended. This module imports nothing of the app but the drain, so
the session code and a process of its own use the same host without depending on what
the loops do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection

from agent_app.process import shutdown

__all__ = ["Background", "Job", "Loop", "register", "registered"]

logger = logging.getLogger(__name__)

#: Makes the coroutine function a process runs (called once per ``Background``).
Loop = Callable[[], Callable[[], Awaitable[None]]]
#: One round of a periodic job.
Job = Callable[[], Awaitable[None]]

_loops: dict[str, Loop] = {}


def register(name: str, loop: Loop) -> None:
    """Run ``loop`` in every process's ``Background`` (a second registration of ``name``
    replaces the first)."""
    _loops[name] = loop


def registered() -> list[tuple[str, Loop]]:
    """The registered loops, in the order they were first registered."""
    return list(_loops.items())


class Background:
    """The loops of one process's event loop (see the module docstring)."""

    def __init__(self, loops: Collection[str] | None = None) -> None:
        """``loops``: the names of the registered loops to run (None: every one)."""
        self._names = loops
        self._jobs: list[tuple[str, Callable[[], float], Job]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def every(self, name: str, seconds: Callable[[], float], job: Job) -> None:
        """Run ``job()`` now and then every ``seconds()`` (once ``start`` was called)."""
        self._jobs.append((name, seconds, job))
        if self._tasks:
            self._tasks.append(self._spawn(name, seconds, job))

    def start(self) -> None:
        """Start the jobs and the registered loops on the running event loop (once)."""
        if not self._tasks:
            self._tasks = [self._spawn(*entry) for entry in self._jobs]
            for name, loop in registered():
                if self._names is None or name in self._names:
                    self._tasks.append(
                        asyncio.create_task(_forever(name, loop()), name=f"zett-loop-{name}")
                    )

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def _spawn(self, name: str, seconds: Callable[[], float], job: Job) -> asyncio.Task[None]:
        return asyncio.create_task(_every(name, seconds, job), name=f"zett-background-{name}")

    async def close(self) -> None:
        """Cancel the loops and wait until they have stopped."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


async def _every(name: str, seconds: Callable[[], float], job: Job) -> None:
    while True:
        if not shutdown.draining():  # a process shutting down takes on nothing new
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("The background job %s failed; it runs again later", name)
        await asyncio.sleep(max(float(seconds()), 0.05))


async def _forever(name: str, run: Callable[[], Awaitable[None]]) -> None:
    """A registered loop, until cancelled; a crash is logged (it is not restarted)."""
    try:
        await run()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.exception("The worker loop %s stopped", name)
