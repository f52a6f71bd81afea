"""Graceful shutdown: a worker stopped with SIGTERM lets its runs finish, then says so.

On SIGTERM this process stops taking new runs (``draining``: a ``user_message`` is
answered ``busy``, the health check answers 503 so a load balancer sends no one new), then
waits up to ``ZETT_SHUTDOWN_GRACE`` seconds for its runs to end. Runs still going after
that are never dropped silently:

- a run that waits for a question or approval is left to the database, where the wait is
  already stored: its lease is let go and it is settled as after a crash — ``paused``,
  answerable from any worker (or this one once it is back) — and the sockets are told;
- a run that is working (streaming, running a tool) is cancelled and recorded as
  ``interrupted``, its open tool calls closed, and the sockets are told.

Then what else the process holds open is closed (``at_drain``: every MCP connection).

Then the server's own SIGTERM handling runs (daphne's cancels every connection's
application and stops the reactor, ``daphne_exit``; uvicorn's stops its server). The
handler is installed once per process, with ``signal.signal`` (it runs on the main thread,
where the event loop runs, and hands the work to the loop), and only where a server runs:
``install`` is called when the first socket of the process opens.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from agent_app import conf

__all__ = ["DRAINING_MESSAGE", "at_drain", "draining", "install"]

logger = logging.getLogger(__name__)

DRAINING_MESSAGE = "The server is restarting; send your message again in a moment"


class Draining(Protocol):
    """A session's part in a drain (``LiveSession``)."""

    session_id: str

    @property
    def run_task(self) -> asyncio.Task[None] | None: ...

    async def stop_for_shutdown(self) -> None: ...


class Registry(Protocol):
    """The sessions to drain (``agent_app.sessions.registry.LiveSessions``)."""

    def __iter__(self) -> Iterator[Draining]: ...

    async def close(self) -> None: ...


_installed = False
_draining = threading.Event()
#: Awaited once the runs are settled: what else the process holds open (MCP connections).
_closers: list[Callable[[], Any]] = []


def at_drain(closer: Callable[[], Any]) -> None:
    """Await ``closer()`` at the end of a drain (once per process; a second add is ignored)."""
    if closer not in _closers:
        _closers.append(closer)


def draining() -> bool:
    """Whether this process is shutting down (no new runs)."""
    return _draining.is_set()


def install(registry: Registry, loop: asyncio.AbstractEventLoop) -> None:
    """Drain ``registry`` on SIGTERM, then hand over to the previous handler (once)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    if not conf.ZETT_GRACEFUL_SHUTDOWN:
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(number: int, frame: Any) -> None:
        if _draining.is_set():
            _hand_over(previous, number, frame)  # a second SIGTERM: stop now
            return
        _draining.set()
        loop.call_soon_threadsafe(
            _start_drain, registry, lambda: _hand_over(previous, number, frame)
        )

    signal.signal(signal.SIGTERM, on_sigterm)
    _installed = True


def _start_drain(registry: Registry, done: Callable[[], None]) -> None:
    task = asyncio.ensure_future(_drain(registry))
    task.add_done_callback(lambda _: done())


async def _drain(registry: Registry) -> None:
    grace = float(conf.ZETT_SHUTDOWN_GRACE)
    running = [live.run_task for live in registry if live.run_task is not None]
    logger.info("SIGTERM: waiting up to %s s for %d run(s) to end", grace, len(running))
    if running:
        await asyncio.wait(running, timeout=grace)
    for live in registry:
        try:
            await live.stop_for_shutdown()
        except Exception:
            logger.exception("Could not stop the run of session %s", live.session_id)
    await registry.close()
    for closer in _closers:
        try:
            await closer()
        except Exception:
            logger.exception("Could not close %r at shutdown", closer)


def _hand_over(previous: Any, number: int, frame: Any) -> None:
    """Let the server's own SIGTERM handling run (or exit as the default would)."""
    if callable(previous):
        previous(number, frame)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
