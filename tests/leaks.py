"""The leak check every test folder shares: a test must not leave asyncio tasks running.

A task that outlives its test (a request never closed, a tool never cancelled, a waiter
never woken) would fire into the next test. No sleeping is needed: every test awaits the
cleanup it starts, so anything still pending at teardown is a leak by definition.
"""

from __future__ import annotations

import asyncio

import pytest


def leaked_tasks(before: set[asyncio.Task]) -> list[asyncio.Task]:
    """Return the unfinished tasks created since ``before`` was taken, except the caller."""
    current = asyncio.current_task()
    return [
        task
        for task in asyncio.all_tasks()
        if task not in before and task is not current and not task.done()
    ]


async def fail_on_leaked_tasks(before: set[asyncio.Task]) -> None:
    """Fail the test if tasks leaked since ``before``; cancel them so later tests are clean."""
    leaked = leaked_tasks(before)
    if leaked:
        for task in leaked:
            task.cancel()
        await asyncio.gather(*leaked, return_exceptions=True)
        pytest.fail(f"The test leaked {len(leaked)} asyncio task(s): {leaked!r}")
