"""``LoopTask``: a loop that runs in one task of the running event loop, started and
stopped from outside.

``start()`` runs ``run()`` in a task (again only once it has ended); ``stop()`` cancels that
task and returns once it has ended, so whatever ``run()`` was awaiting is cancelled with it.
What a cancelled round leaves undone is the subclass's story (its module docstring tells it).
"""

from __future__ import annotations

import asyncio

__all__ = ["LoopTask"]


class LoopTask:
    """Base of a loop with one owned task (see the module docstring)."""

    #: The task's name (shown by ``asyncio.all_tasks()`` and in leak reports).
    task_name = "zett-loop"
    _task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Run the loop in a task of the running event loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=self.task_name)

    async def stop(self) -> None:
        """Cancel the loop's task and return once it has ended."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
