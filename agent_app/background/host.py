"""The webhook deliveries and the scheduler: the loops the app registers for its
processes, and ``BackgroundWork``, a process that runs them alone.

The webhook deliveries (``agent_app.webhooks.delivery.Deliverer``) and the scheduler
(``agent_app.schedules.loop.Scheduler``) each need nothing but the database and an event
loop, and each may run in any number of processes at once (every due delivery attempt
and every due schedule time is claimed by exactly one). ``register_loops`` (called when
the app is ready) registers both with ``agent_app.process.loops``, so every web worker's
``Background`` runs them beside its sweep. ``BackgroundWork`` is that same host with the
two loops and nothing else: ``start()`` on the running event loop, ``await stop()`` when
it ends (``manage.py zett_background`` is such a process).
"""

from __future__ import annotations

from agent_app.process import loops
from agent_app.schedules.loop import Scheduler
from agent_app.webhooks.delivery import Deliverer

__all__ = ["DELIVERIES", "SCHEDULES", "BackgroundWork", "register_loops"]

#: The names the two loops are registered under.
DELIVERIES = "webhooks"
SCHEDULES = "schedules"


def register_loops() -> None:
    """Make every process's ``Background`` run the deliveries and the scheduler."""
    loops.register(DELIVERIES, lambda: Deliverer().run)
    loops.register(SCHEDULES, lambda: Scheduler().run)


class BackgroundWork(loops.Background):
    """The webhook deliveries and the scheduler of one process, with no sessions to sweep."""

    def __init__(self, *, deliveries: bool = True, schedules: bool = True) -> None:
        wanted = {DELIVERIES: deliveries, SCHEDULES: schedules}
        super().__init__(loops=[name for name, on in wanted.items() if on])

    async def stop(self) -> None:
        """Stop the loops; runs the scheduler started go on (they are the chats' now)."""
        await self.close()
