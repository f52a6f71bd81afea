"""Back-pressure: how ``Agent.stream`` runs a request inside its consumer's task.

A request is one coroutine, ``Request.execute``. It is not wrapped in a task and no queue
sits between it and the consumer. Instead ``advance`` steps the coroutine by hand, in the
consumer's task: when the runtime emits an event it awaits ``emission(event)``, which
yields the event object itself up through every frame of the coroutine. ``advance``
recognises it, stops stepping and returns the event to the consumer. So the runtime does
no work between two events until the consumer asks for the next one (it runs zero events
ahead), and emitting costs a few generator frames, not a task switch.

Every other object the coroutine yields is a real asyncio suspension. A bare ``yield``
(``asyncio.sleep(0)``) is passed up to the task unchanged. A future is awaited on the
runtime's behalf: ``advance`` waits on a small wake-up future that completes when the
runtime's future does, or when another task emits an event for this request (a tool's
subtask reporting progress through ``context.emit``). Such foreign events are handed to the
consumer while the runtime stays suspended, and each emitter resumes once its event was
taken, so they get the same back-pressure as the runtime's own events. The wake-up is a
``zett_agent._wait.Wait``: the task steps in the loop iteration right after the runtime's
future settles, as it would had it awaited that future itself.

Cancellation:

- cancelling the consumer's task while the runtime waits (model, tool, external reply)
  cancels the future the runtime awaits and throws ``CancelledError`` into the runtime, as
  a task would: work stops at once and the runtime's cancellation handling runs;
- closing the iterator between events calls ``abort``, which does the same at the
  suspended emission (or wait) and drives the cancellation handling to its end (it may
  await hooks), discarding anything still emitted. The runtime re-raises that same
  ``CancelledError`` object, which ``abort`` swallows; any other exception escapes.

Each step runs in a ``contextvars.Context`` of the request's own, like a task would, so
context variables set by the runtime never leak into the consumer.

``drive`` is the async generator ``Agent.stream`` hands out. Its fast path is the common
case, written out in its own loop: the runtime goes from one event to the next without
waiting for anything, so it sends into the coroutine once and an event comes straight back.
Anything else (a future, a bare yield) is kept for ``advance``, which continues exactly
where the fast path stopped.

A shortcut for streamed deltas: once a model call's text or reasoning segment is open it
hands the segment's further deltas to a small generator of their own
(``zett_agent._model_call``) and awaits it.
That coroutine first yields a ``Shortcut``; from then on the driver sends straight into it,
not through every frame of the request above it, so a delta passes one frame instead of
four. When the stream brings anything else, ends or fails, the shortcut yields ``REJOIN``
and the driver steps the request again, which resumes the shortcut's coroutine where it
waits and reads its outcome. A coroutine awaited by a suspended one may be sent into
directly as long as it does not finish meanwhile: the shortcut never returns or raises while
the driver holds it, it always rejoins first.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from typing import Any

from zett_agent._wait import Wait
from zett_agent.events import AgentEvent

__all__ = ["FINISHED", "REJOIN", "Driver", "Shortcut", "drive", "emission"]


@types.coroutine
def emission(event: AgentEvent) -> Generator[AgentEvent, None, None]:
    """Awaited by the runtime to hand one event to the consumer (``Driver.advance``).

    A plain generator: awaiting it yields the event up to ``drive`` or ``Driver.advance``
    and resumes with None. It is cheaper than any object with an ``__await__`` of its own
    (a one-item tuple whose ``__await__`` is its iterator cost 1.6 % more instructions per
    W1 request: the interpreter looks a Python-level ``__await__`` up and calls it).
    """
    yield event


class Shortcut:
    """Yielded by a coroutine the request awaits, with the first event it hands over: the
    driver then sends into ``coro`` directly until it yields ``REJOIN``."""

    __slots__ = ("coro", "event")

    def __init__(self, event: AgentEvent) -> None:
        self.event = event
        self.coro: Coroutine[Any, Any, Any] | None = None


#: Yielded by a ``Shortcut``'s coroutine when the request is to be stepped again.
REJOIN: Any = object()

#: Returned by ``Driver.advance`` once the request coroutine has returned.
FINISHED: Any = object()
_NO_SIGNAL: Any = object()
#: ``Driver._foreign`` until another task emits: most requests never need the deque.
_NO_FOREIGN: Any = ()


def _wake(waker: asyncio.Future[None], _: object = None) -> None:
    if not waker.done():
        waker.set_result(None)


class Driver:
    """Steps one request coroutine on behalf of whichever task consumes its events."""

    __slots__ = (
        "_blocked_on",
        "_foreign",
        "_held",
        "_send",
        "_signal",
        "_target",
        "_waker",
        "aborting",
        "cancel_seen",
        "context",
        "coro",
        "finished",
    )

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self.coro = coro
        #: What is stepped: the request, or the coroutine of a ``Shortcut`` it awaits.
        self._target: Coroutine[Any, Any, Any] = coro
        self._send = coro.send  # bound once: ``drive`` sends into it once per event
        self.context = contextvars.copy_context()
        self.finished = False
        self.aborting = False
        #: The iterator was closed, or whoever waited on the runtime's behalf cancelled that
        #: wait: a ``CancelledError`` the runtime reads then is a real cancellation, not an
        #: ``interrupt`` (``cancelled`` adds the consumer's task being cancelled).
        self.cancel_seen = False
        #: The future the suspended runtime awaits, while ``advance`` waits on its behalf.
        self._blocked_on: asyncio.Future[Any] | None = None
        self._waker: Wait | None = None
        #: Events of other tasks waiting to be handed over; a deque from the first one on.
        self._foreign: deque[tuple[AgentEvent, asyncio.Future[None]]] = _NO_FOREIGN
        #: What the coroutine yielded on the fast path when that was not an event.
        self._signal: Any = _NO_SIGNAL
        #: The fast path must leave the next move to ``advance``: a foreign event waits, the
        #: runtime is suspended (``_blocked_on``, ``_signal``), or it has finished. One flag,
        #: so the fast path reads one attribute per event.
        self._held = False

    async def emit_foreign(self, event: AgentEvent) -> None:
        """Hand an event from another task to the consumer; return once it was taken."""
        if self.finished or self.aborting:
            return
        delivered = asyncio.get_running_loop().create_future()
        if self._foreign is _NO_FOREIGN:
            self._foreign = deque()
        self._foreign.append((event, delivered))
        self._held = True
        if self._waker is not None:
            self._waker.wake()
        await delivered

    def interrupt(self) -> bool:
        """Cut the runtime's current wait short, as ``Task.cancel`` would: cancel the
        future it awaits, so it reads a ``CancelledError`` there. False when it awaits
        nothing (it runs, or waits for the consumer to take an event).

        Used by a steering message ending a model stream (``zett_agent._interrupt``); the
        runtime tells it from a real cancellation by ``cancelled``.
        """
        blocked = self._blocked_on
        if blocked is None or self.finished or self.aborting:
            return False
        return blocked.cancel()

    @property
    def stepping(self) -> bool:
        """The runtime runs (the request, or the shortcut it awaits): an emit seen now is
        its own, and one seen otherwise comes from another task and needs a hand-off.

        Read from the coroutine itself rather than kept in a flag, so stepping costs no
        store per event.
        """
        target = self._target
        if target is self.coro:
            return self.coro.cr_running
        return target.gi_running  # type: ignore[attr-defined]

    @property
    def cancelled(self) -> bool:
        """A real cancellation is under way (not a steering ``interrupt``): the iterator is
        being closed, or the consumer's task is being cancelled (a timeout that already
        withdrew its cancel does not count)."""
        if self.cancel_seen:
            return True
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0

    @types.coroutine
    def advance(self) -> Generator[Any, Any, Any]:
        """Run the request until its next event; return it, or ``FINISHED``."""
        run = self.context.run
        value: Any = None
        error: BaseException | None = None
        while True:
            if self._foreign and error is None:
                event, delivered = self._foreign.popleft()
                _wake(delivered)
                self._update_held()
                return event
            blocked = self._blocked_on
            if blocked is not None and error is None:
                error = yield from self._wait(blocked)
                if error is None and not blocked.done():
                    continue  # woken by a foreign event: hand it over first
                self._blocked_on = None
            signal = self._signal
            if signal is not _NO_SIGNAL:  # the fast path stopped at this suspension
                self._signal = _NO_SIGNAL
            else:
                target = self._target
                try:
                    signal = run(target.send, value) if error is None else run(target.throw, error)
                except StopIteration:
                    self._finish()
                    return FINISHED
                except BaseException:
                    self._finish()
                    error = None  # the escaping error's traceback holds this frame: no cycle
                    raise
                value = error = None
            if isinstance(signal, AgentEvent):
                self._update_held()
                return signal
            if signal.__class__ is Shortcut:
                self._take_shortcut(signal)
                self._update_held()
                return signal.event
            if signal is REJOIN:
                self._rejoin()
                continue
            if getattr(signal, "_asyncio_future_blocking", False):
                signal._asyncio_future_blocking = False  # what a task does when it takes over
                self._blocked_on = signal
                continue
            try:
                value = yield signal
            except BaseException as exc:
                error = exc

    def _wait(self, blocked: asyncio.Future[Any]) -> Generator[Any, Any, BaseException | None]:
        """Wait for ``blocked`` or a foreign event; return the exception to throw, if any.

        Cancellation behaves as for a task: the awaited future is cancelled and, when that
        was accepted, waited for until it settles, so the runtime reads its outcome (a
        ``CancelledError``, or a result a shielded wait still produced) as usual.
        """
        cancelling = False
        while True:
            try:
                yield from self._until_done(blocked, foreign_wakes=not cancelling)
                return None
            except asyncio.CancelledError as exc:
                if cancelling or not blocked.cancel():
                    self._blocked_on = None
                    return exc
                cancelling = True
            except BaseException as exc:
                self._blocked_on = None
                return exc

    def _until_done(
        self, blocked: asyncio.Future[Any], *, foreign_wakes: bool
    ) -> Generator[Any, Any, None]:
        """Yield to the task until ``blocked`` is done, or a foreign event waits."""
        while not blocked.done():
            if foreign_wakes and self._foreign:
                return
            waker = self._waker = Wait(blocked)
            try:
                yield waker
            finally:
                waker.detach()
                self._waker = None
            if waker.cancelled():
                self.cancel_seen = True
                # Cancelled by whoever waited on our behalf: another driver stepping this
                # one (a sub-run's request driven inside a tool of its parent's) cancels
                # the future it was handed, as a task would; read that as ``await`` would.
                raise asyncio.CancelledError

    @types.coroutine
    def abort(self) -> Generator[Any, Any, None]:
        """Cancel the suspended request and drive its cleanup to completion."""
        if self.finished:
            return
        self.aborting = self.cancel_seen = True
        self._discard_foreign()
        run = self.context.run
        cancel = asyncio.CancelledError()
        error: BaseException | None = cancel
        blocked, self._blocked_on = self._blocked_on, None
        signal, self._signal = self._signal, _NO_SIGNAL
        if blocked is None and getattr(signal, "_asyncio_future_blocking", False):
            signal._asyncio_future_blocking = False
            blocked = signal
        if blocked is not None and blocked.cancel():
            # Let the cancelled wait settle (a gather cancels its children) before
            # throwing in, and read its outcome so nothing is left unretrieved.
            try:
                yield from self._until_done(blocked, foreign_wakes=False)
            except BaseException as exc:  # the consumer itself is cancelled meanwhile
                error = exc
            if blocked.done() and not blocked.cancelled():
                blocked.exception()
        value: Any = None
        try:
            while True:
                target = self._target
                try:
                    signal = run(target.send, value) if error is None else run(target.throw, error)
                except StopIteration:
                    return
                except asyncio.CancelledError as exc:
                    if exc is cancel:
                        return
                    raise
                value = error = None
                if isinstance(signal, AgentEvent):
                    continue
                if signal.__class__ is Shortcut:
                    self._take_shortcut(signal)
                    continue
                if signal is REJOIN:
                    self._rejoin()
                    continue
                try:
                    value = yield signal
                except BaseException as exc:
                    error = exc
        finally:
            # The swallowed CancelledError's traceback holds this frame, whose locals hold
            # the error: drop them so that cycle does not keep the request alive.
            cancel = error = blocked = signal = None
            self._finish()

    def _take_shortcut(self, shortcut: Shortcut) -> None:
        assert shortcut.coro is not None
        self._target = shortcut.coro
        self._send = shortcut.coro.send

    def _rejoin(self) -> None:
        self._target = self.coro
        self._send = self.coro.send

    def _update_held(self) -> None:
        self._held = (
            self.finished
            or bool(self._foreign)
            or self._blocked_on is not None
            or self._signal is not _NO_SIGNAL
        )

    def _finish(self) -> None:
        self.finished = self._held = True
        self._discard_foreign()

    def _discard_foreign(self) -> None:
        while self._foreign:
            _, delivered = self._foreign.popleft()
            _wake(delivered)


async def drive(start: Callable[[], Driver]) -> AsyncIterator[AgentEvent]:
    """The events of the request ``start()`` claims and returns the driver of: what
    ``Agent.stream`` hands out. Nothing is claimed until the first ``__anext__``.

    The fast path sends into the request once and gets the next event straight back;
    whatever else it meets (a wait, a foreign event, the end) goes to ``advance``, and
    ``abort`` runs when the iterator is closed early.
    """
    driver = start()
    run, send, agent_event = driver.context.run, driver._send, AgentEvent
    try:
        while True:
            if driver._held:
                event = await driver.advance()
                send = driver._send  # ``advance`` may have taken or left a shortcut
                if event is FINISHED:
                    return
            else:
                try:
                    event = run(send, None)
                except StopIteration:
                    driver._finish()
                    return
                except BaseException:
                    driver._finish()
                    raise
                if event.__class__ is not agent_event and not isinstance(event, AgentEvent):
                    if event.__class__ is Shortcut:
                        driver._take_shortcut(event)
                        send = driver._send
                        event = event.event
                    elif event is REJOIN:
                        driver._rejoin()
                        send = driver._send
                        continue
                    else:
                        driver._signal = event  # a real suspension: ``advance`` takes it on
                        driver._held = True
                        continue
            yield event
    finally:
        if not driver.finished:  # closed early: cancel the request and run its cleanup
            await driver.abort()
