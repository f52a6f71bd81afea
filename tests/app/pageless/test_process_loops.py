"""One host for a process's loops (``agent_app.process.loops.Background``): the jobs it
is given, the registered loops it names, and nothing left running once it is closed; and
``BackgroundWork``, the same host with the webhook and schedule loops alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agent_app.background.host import DELIVERIES, SCHEDULES, BackgroundWork
from agent_app.process import loops
from agent_app.process.loops import Background


@pytest.fixture
def probes() -> Iterator[dict[str, asyncio.Event]]:
    """Loops registered under three names (the app's two among them), each setting its
    event when it starts; the app's registrations are put back afterwards."""
    kept = loops.registered()
    started: dict[str, asyncio.Event] = {}

    def probe(name: str) -> loops.Loop:
        async def run() -> None:
            started[name].set()
            await asyncio.Event().wait()

        return lambda: run

    for name in ("test-a", DELIVERIES, SCHEDULES):
        started[name] = asyncio.Event()
        loops.register(name, probe(name))
    yield started
    loops._loops.clear()
    loops._loops.update(kept)


#: The tasks a ``Background`` names after the loops and the job of these tests.
OURS = {f"zett-loop-{name}" for name in ("test-a", DELIVERIES, SCHEDULES)} | {"zett-background-job"}


def _loop_tasks() -> set[str]:
    """Which of those tasks run now."""
    return {task.get_name() for task in asyncio.all_tasks() if not task.done()} & OURS


async def test_a_background_runs_its_jobs_and_the_loops_it_names_until_closed(probes):
    rounds = asyncio.Event()

    async def job() -> None:
        rounds.set()

    background = Background(loops=["test-a"])
    background.every("job", lambda: 60.0, job)
    background.start()
    await asyncio.wait_for(probes["test-a"].wait(), 10)
    await asyncio.wait_for(rounds.wait(), 10)
    assert background.running
    assert _loop_tasks() == {"zett-loop-test-a", "zett-background-job"}
    await background.close()
    assert not background.running
    assert _loop_tasks() == set()


async def test_background_work_runs_the_loops_it_is_asked_for_and_stops_them(probes):
    work = BackgroundWork(deliveries=False)
    work.start()
    await asyncio.wait_for(probes[SCHEDULES].wait(), 10)
    assert _loop_tasks() == {f"zett-loop-{SCHEDULES}"}
    await work.stop()
    assert _loop_tasks() == set()
