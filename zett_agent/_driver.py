"""Back-pressure: how ``Agent.stream`` runs a request inside its consumer's task.

A request is one coroutine, ``_Request.execute``. It is not wrapped in a task and no queue
sits between it and the consumer. Instead ``advance`` steps the coroutine by hand, in the
consumer's task: when the runtime emits an event it awaits an ``Emission``, which yields
the event object up through every frame of the coroutine. ``advance`` recognises it, stops
stepping and returns the event to the consumer. Every other object the coroutine yields is
a real asyncio suspension (a future); ``advance`` passes it up to the task unchanged and
sends the result, or throws the exception, back down. So:

- the runtime does no work between two events until the consumer asks for the next one
  (it runs zero events ahead), and emitting costs a few generator frames, not a task
  switch;
- cancelling the consumer's task while the runtime waits (model, tool, external reply)
  throws ``CancelledError`` straight into the runtime's await, so work stops at once;
- closing the iterator between events calls ``abort``, which throws ``CancelledError`` in
  at the suspended emission and drives the runtime's cancellation handling to its end
  (it may await hooks), discarding anything it still emits. The runtime then re-raises that
  same ``CancelledError`` object, which ``abort`` swallows; any other exception escapes.

Each step runs in a ``contextvars.Context`` of the request's own, like a task would, so
context variables set by the runtime never leak into the consumer.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any

from zett_agent.events import AgentEvent

__all__ = ["FINISHED", "Driver", "Emission"]


class Emission:
    """Awaited by the runtime to hand one event to the consumer."""

    __slots__ = ("event",)

    def __init__(self, event: AgentEvent) -> None:
        self.event = event

    def __await__(self) -> Generator[Any, None, None]:
        yield self


#: Returned by ``Driver.advance`` once the request coroutine has returned.
FINISHED: Any = object()


class Driver:
    """Steps one request coroutine on behalf of whichever task consumes its events."""

    __slots__ = ("context", "coro", "finished", "task")

    def __init__(self, coro: Coroutine[Any, Any, None]) -> None:
        self.coro = coro
        self.context = contextvars.copy_context()
        self.finished = False
        #: The task currently stepping the coroutine; emissions must come from it.
        self.task: asyncio.Task[Any] | None = None

    @types.coroutine
    def advance(self) -> Generator[Any, Any, Any]:
        """Run the request until its next event; return it, or ``FINISHED``."""
        coro, run = self.coro, self.context.run
        self.task = asyncio.current_task()
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                signal = run(coro.send, value) if error is None else run(coro.throw, error)
            except StopIteration:
                self.finished = True
                return FINISHED
            except BaseException:
                self.finished = True
                raise
            if type(signal) is Emission:
                return signal.event
            value = error = None
            try:
                value = yield signal
            except BaseException as exc:
                error = exc

    @types.coroutine
    def abort(self) -> Generator[Any, Any, None]:
        """Cancel the suspended request and drive its cleanup to completion."""
        if self.finished:
            return
        coro, run = self.coro, self.context.run
        self.task = asyncio.current_task()
        cancel = asyncio.CancelledError()
        value: Any = None
        error: BaseException | None = cancel
        try:
            while True:
                try:
                    signal = run(coro.send, value) if error is None else run(coro.throw, error)
                except StopIteration:
                    return
                except asyncio.CancelledError as exc:
                    if exc is cancel:
                        return
                    raise
                value = error = None
                if type(signal) is Emission:
                    continue
                try:
                    value = yield signal
                except BaseException as exc:
                    error = exc
        finally:
            self.finished = True
