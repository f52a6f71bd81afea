"""The loops every worker process runs beside its sockets, registered at start-up.

A loop is a name and a factory of a coroutine function that runs until cancelled (the
webhook deliveries, the scheduler: ``agent_app.background.host.register_loops`` adds
them when the app is ready). Whatever starts a worker's background work reads
``registered()`` and runs each loop once per process. This module imports nothing of the
app, so the session code may read it without depending on what the loops do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

__all__ = ["Loop", "register", "registered"]

#: Makes the coroutine function a worker runs (called once per worker process).
Loop = Callable[[], Callable[[], Awaitable[None]]]

_loops: dict[str, Loop] = {}


def register(name: str, loop: Loop) -> None:
    """Run ``loop`` in every worker process (a second registration of ``name`` replaces
    the first)."""
    _loops[name] = loop


def registered() -> list[tuple[str, Loop]]:
    """The registered loops, in the order they were first registered."""
    return list(_loops.items())
