"""The leak check every runtime test runs under (``no_leaked_tasks``, from ``tests/leaks.py``)."""

from __future__ import annotations

import asyncio

from tests.leaks import leaked_tasks


async def test_a_task_still_pending_at_the_end_counts_as_leaked():
    before = set(asyncio.all_tasks())
    gate = asyncio.Event()
    task = asyncio.create_task(gate.wait())
    assert leaked_tasks(before) == [task]
    gate.set()
    await task
    assert leaked_tasks(before) == []


async def test_tasks_that_existed_before_do_not_count():
    gate = asyncio.Event()
    task = asyncio.create_task(gate.wait())
    assert leaked_tasks(set(asyncio.all_tasks())) == []
    gate.set()
    await task
