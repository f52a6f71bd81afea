"""``Scheduler``: the loop that fires due schedules, run by any number of workers at once.

Each round claims what is due (``agent_app.schedules.firing.claim_due``: each due time is
won by exactly one worker) and starts those runs in this process. Between rounds it
sleeps until the next due time, at most ``POLL_SECONDS`` (so a schedule added or changed
elsewhere is seen within that). ``start``/``stop`` (or ``run`` in a task of one's own) is
the whole seam; ``clock`` is the time it reads (tests move it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from channels.db import database_sync_to_async
from django.db.models import Min
from django.utils import timezone

from agent_app.models.schedules import ScheduledRun
from agent_app.process.loop_task import LoopTask
from agent_app.schedules.firing import claim_due, start_fire

__all__ = ["POLL_SECONDS", "Scheduler"]

logger = logging.getLogger(__name__)

#: Longest sleep between rounds.
POLL_SECONDS = 10.0


def _seconds_to_next(now: datetime) -> float:
    first = ScheduledRun.objects.filter(enabled=True).aggregate(first=Min("next_fire_at"))["first"]
    if first is None:
        return POLL_SECONDS
    return min(POLL_SECONDS, max(0.0, (first - now).total_seconds()))


class Scheduler(LoopTask):
    """The scheduling loop of one process (see the module docstring)."""

    task_name = "zett-scheduler"
    # Stopping it leaves the runs it started going: they are the chats' now.

    def __init__(
        self, *, poll: float = POLL_SECONDS, clock: Callable[[], datetime] = timezone.now
    ) -> None:
        self.poll = poll
        self.clock = clock
        self._claim = database_sync_to_async(claim_due)
        self._next = database_sync_to_async(_seconds_to_next)
        #: Due times this loop fired (started or refused), and a condition set after each.
        self.fires = 0
        self._fired = asyncio.Condition()

    async def run(self) -> None:
        """Fire what is due, round after round, until cancelled."""
        while True:
            try:
                await self.fire_due()
                delay = min(self.poll, await self._next(self.clock()))
            except Exception:
                logger.exception("The scheduler failed this round; trying again")
                delay = self.poll
            await asyncio.sleep(max(delay, 0.05))

    async def fire_due(self) -> list[str | None]:
        """One round: claim what is due and start it; the request ids (None: refused)."""
        fires = await self._claim(self.clock())
        started = []
        for fire in fires:
            started.append(await start_fire(fire))
            async with self._fired:
                self.fires += 1
                self._fired.notify_all()
        return started

    async def fired(self, count: int) -> None:
        """Return once this loop has fired ``count`` due times."""
        async with self._fired:
            await self._fired.wait_for(lambda: self.fires >= count)
