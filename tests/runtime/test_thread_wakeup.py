"""A sync tool's outcome wakes the consumer as soon as it would wake a task awaiting the
tool's future itself: the driver's wake-up future completes in the loop callback that
settles the ``ThreadFuture``, not in a done callback one loop iteration later.

Each loop iteration polls the selector once, so the polls between a sync tool's start and
its result are what the hop costs in iterations.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import aclosing

from zett_agent._driver import Driver, drive, emission
from zett_agent._threads import ThreadFuture, run_in_thread
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.tools.base import tool

from .support import ProbeModel, answer, call, calls

E = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


class SelectorPolls:
    """Counts the loop's selector polls (one per loop iteration) while ``counting``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.polls = 0
        self.counting = False
        self._selector = loop._selector  # type: ignore[attr-defined]
        self._select = self._selector.select
        self._selector.select = self._counted

    def _counted(self, timeout: float | None = None) -> list:
        if self.counting:
            self.polls += 1
        return self._select(timeout)

    def restore(self) -> None:
        del self._selector.select


def _add(a: int, b: int) -> int:
    return a + b


async def _polls_of_a_bare_hop(loop: asyncio.AbstractEventLoop) -> int:
    polls = SelectorPolls(loop)
    try:
        await run_in_thread(_add, a=1, b=1)  # the worker exists before counting
        polls.counting = True
        assert await run_in_thread(_add, a=2, b=3) == 5
        return polls.polls
    finally:
        polls.restore()


async def test_a_sync_tool_result_costs_no_more_loop_iterations_than_a_bare_thread_hop():
    loop = asyncio.get_running_loop()
    bare = await _polls_of_a_bare_hop(loop)

    @tool
    def plus(a: int, b: int) -> int:
        """Add.

        Guidelines:
            - Use in tests.
        """
        return a + b

    model = ProbeModel(calls(call("plus", "c1", a=2, b=3)), answer("five"))
    agent = await Agent.create(model, tools=[plus], extensions=[])
    polls = SelectorPolls(loop)
    try:
        async with aclosing(agent.stream("add", config=CONFIG)) as events:
            async for event in events:
                if event.type is E.TOOL_STARTED:
                    polls.counting = True
                elif event.type is E.TOOL_COMPLETED:
                    polls.counting = False
                    assert event.message.content == "5"
    finally:
        polls.restore()
    assert polls.polls == bare
    assert bare <= 2


async def test_settling_a_thread_future_completes_its_waiter_in_the_same_callback():
    loop = asyncio.get_running_loop()
    settled = run_in_thread(_add, a=1, b=2)
    waiter = loop.create_future()
    settled.waiter = waiter
    assert await settled == 3  # not the waiter: the settling callback completed it
    assert waiter.done()

    cancelled = ThreadFuture(loop=loop)
    cancelled.waiter = other = loop.create_future()
    assert cancelled.cancel()
    assert other.done() and not other.cancelled()
    assert not cancelled.cancel()  # cancelled already: nothing more to wake


async def test_a_thread_future_cancelled_by_an_interrupt_wakes_the_waiting_driver():
    gate = threading.Event()
    started = asyncio.Event()
    loop = asyncio.get_running_loop()

    def blocking() -> str:
        loop.call_soon_threadsafe(started.set)
        gate.wait(10)
        return "late"

    async def runtime() -> None:
        try:
            await run_in_thread(blocking)
        except asyncio.CancelledError:
            await emission(AgentEvent(E.CUSTOM, "s", name="cut short"))

    driver = Driver(runtime())
    events = drive(lambda: driver)
    try:
        first = asyncio.ensure_future(anext(events))
        await started.wait()
        assert driver.interrupt()
        event = await asyncio.wait_for(first, 10)
        assert event.name == "cut short"
    finally:
        gate.set()
        await events.aclose()
