"""A future the runtime awaits wakes the consumer as soon as it would wake a task awaiting
it itself: the driver hands the task a ``zett_agent._wait.Wait`` whose callbacks run from
the future's own done callback, not from a wake-up future that callback would complete one
loop iteration later.

Each loop iteration polls the selector once. Counted from the moment the future settles
(a thread's return reaches the loop whenever the worker gets there, and its wake-up byte
may be read one iteration later), the polls until the awaiting code runs again are what the
wait costs in iterations: one, for a task awaiting the future itself.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import aclosing

import pytest

import zett_agent._threads as threads
from zett_agent._driver import Driver, drive, emission
from zett_agent._threads import run_in_thread
from zett_agent._wait import Wait
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


def _counting_from_settling(monkeypatch: pytest.MonkeyPatch, polls: SelectorPolls) -> None:
    """Start counting when a thread's outcome settles its future on the loop."""
    settle = threads._settle

    def settling(*args: object) -> None:
        polls.counting = True
        settle(*args)

    monkeypatch.setattr(threads, "_settle", settling)


async def _add_through_the_tool(adder: object, polls: SelectorPolls) -> None:
    """A request whose model calls ``adder`` (2 + 3) once: ``polls`` stops counting when
    the tool's result is out, and its selector is restored however the request ends."""
    name = adder.name  # type: ignore[attr-defined]
    model = ProbeModel(calls(call(name, "c1", a=2, b=3)), answer("five"))
    agent = await Agent.create(model, tools=[adder], extensions=[])
    try:
        async with aclosing(agent.stream("add", config=CONFIG)) as events:
            async for event in events:
                if event.type is E.TOOL_COMPLETED:
                    polls.counting = False
                    assert event.message.content == "5"
    finally:
        polls.restore()


async def test_a_sync_tool_result_costs_no_more_loop_iterations_than_a_bare_thread_hop(
    monkeypatch: pytest.MonkeyPatch,
):
    loop = asyncio.get_running_loop()
    assert await run_in_thread(_add, a=1, b=1) == 2  # the worker exists before counting
    bare = SelectorPolls(loop)
    try:
        _counting_from_settling(monkeypatch, bare)
        assert await run_in_thread(_add, a=2, b=3) == 5
    finally:
        bare.restore()

    @tool
    def plus(a: int, b: int) -> int:
        """Add.

        Guidelines:
            - Use in tests.
        """
        return a + b

    polls = SelectorPolls(loop)
    _counting_from_settling(monkeypatch, polls)
    await _add_through_the_tool(plus, polls)
    assert bare.polls == 1
    assert polls.polls == bare.polls


async def test_any_future_a_tool_awaits_costs_no_more_loop_iterations_than_awaiting_it_bare():
    loop = asyncio.get_running_loop()
    bare = SelectorPolls(loop)

    def settle(future: asyncio.Future[int], value: int, polls: SelectorPolls) -> None:
        polls.counting = True
        future.set_result(value)

    try:
        settled = loop.create_future()
        loop.call_soon(settle, settled, 5, bare)
        assert await settled == 5
    finally:
        bare.restore()

    polls = SelectorPolls(loop)

    @tool
    async def later(a: int, b: int) -> int:
        """Add, on the loop's next turn.

        Guidelines:
            - Use in tests.
        """
        result = loop.create_future()
        loop.call_soon(settle, result, a + b, polls)
        return await result

    await _add_through_the_tool(later, polls)
    assert bare.polls == 1
    assert polls.polls == bare.polls


async def test_a_wait_calls_its_callbacks_when_its_future_settles_and_schedules_them_otherwise():
    loop = asyncio.get_running_loop()
    blocked = loop.create_future()
    wait = Wait(blocked)
    seen: list[tuple[str, bool]] = []
    wait.add_done_callback(lambda done: seen.append(("first", done.done())))
    wait.add_done_callback(lambda done: seen.append(("second", done.done())))
    blocked.set_result("ignored")
    await asyncio.sleep(0)  # blocked's own callback runs: both of the wait's run in it
    assert seen == [("first", True), ("second", True)]
    assert wait.result() is None and not wait.cancelled()

    other = loop.create_future()
    cancelled = Wait(other)

    def taken_back(done: object) -> None:
        seen.append(("taken back", True))

    cancelled.add_done_callback(taken_back)
    cancelled.add_done_callback(lambda done: seen.append(("cancelled", done.cancelled())))
    assert cancelled.remove_done_callback(taken_back) == 1
    assert cancelled.cancel("stop") and not cancelled.cancel()
    assert not other.cancelled() and not other.done()  # the runtime's future is left alone
    with pytest.raises(asyncio.CancelledError, match="stop"):
        cancelled.result()
    await asyncio.sleep(0)
    assert seen[2:] == [("cancelled", True)]
    other.set_result(None)
    await asyncio.sleep(0)  # detached: the settling calls nothing more
    assert len(seen) == 3

    woken = Wait(loop.create_future())
    woken.add_done_callback(lambda done: seen.append(("woken", done.done())))
    woken.wake()
    assert woken.done() and woken.result() is None
    await asyncio.sleep(0)
    assert seen[3:] == [("woken", True)]


async def test_a_future_cancelled_by_an_interrupt_wakes_the_waiting_driver():
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


async def test_a_failing_callback_of_a_wait_is_reported_and_the_next_still_runs():
    loop = asyncio.get_running_loop()
    reported: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: reported.append(context["exception"]))
    try:
        blocked = loop.create_future()
        wait = Wait(blocked)
        ran: list[str] = []

        def failing(_: object) -> None:
            raise ValueError("broken callback")

        wait.add_done_callback(failing)
        wait.add_done_callback(lambda _: ran.append("next"))
        blocked.set_result(None)
        await asyncio.sleep(0)
        assert ran == ["next"]
        assert [str(error) for error in reported] == ["broken callback"]
    finally:
        loop.set_exception_handler(None)
