"""``BackgroundWork``: the loops a worker process runs besides its sockets.

The webhook deliveries (``agent_app.webhooks.delivery.Deliverer``) and the scheduler
(``agent_app.schedules.loop.Scheduler``) each need nothing but the database and an event
loop, and each may run in any number of processes at once (every due delivery attempt
and every due schedule time is claimed by exactly one). ``start()`` starts both on the
running event loop, ``stop()`` stops both and returns once they have; a process runs
them for as long as it serves (``manage.py zett_background`` is such a process of its own).
``register_loops`` offers the same two loops to whatever runs a worker's background work
(``agent_app.background.worker_loops``).
"""

from __future__ import annotations

from agent_app.schedules.loop import Scheduler
from agent_app.webhooks.delivery import Deliverer

__all__ = ["BackgroundWork", "register_loops"]


def register_loops() -> None:
    """Make every worker process run the deliveries and the scheduler
    (``agent_app.background.worker_loops``; called when the app is ready)."""
    from agent_app.background import worker_loops

    worker_loops.register("webhooks", lambda: Deliverer().run)
    worker_loops.register("schedules", lambda: Scheduler().run)


class BackgroundWork:
    """The webhook deliveries and the scheduler of one process."""

    def __init__(self, *, deliveries: bool = True, schedules: bool = True) -> None:
        self.deliverer = Deliverer() if deliveries else None
        self.scheduler = Scheduler() if schedules else None

    def start(self) -> None:
        """Start the loops on the running event loop (idempotent)."""
        if self.deliverer is not None:
            self.deliverer.start()
        if self.scheduler is not None:
            self.scheduler.start()

    async def stop(self) -> None:
        """Stop the loops; runs the scheduler started go on (they are the chats' now)."""
        if self.scheduler is not None:
            await self.scheduler.stop()
        if self.deliverer is not None:
            await self.deliverer.stop()
