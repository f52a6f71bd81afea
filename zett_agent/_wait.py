"""What the driver yields to the consumer's task while the runtime awaits a future.

The task must wake when the runtime's future (``blocked``) is done, or earlier when another
task emits an event for the request (``Driver.emit_foreign``). A plain wake-up future
completed from a done callback on ``blocked`` would do, but asyncio schedules every done
callback: the callback would run one loop iteration after ``blocked`` settles and schedule
the task's own wake-up for the iteration after that. Each extra iteration polls the
selector once more, on every future the runtime awaits (a sync tool's thread, a model's
network read).

``Wait`` is a future-like object (asyncio's protocol: ``_asyncio_future_blocking``,
``get_loop``, ``add_done_callback``, ``result``, ``cancel``) that holds the callbacks
registered on it and calls them itself from one callback on ``blocked``, in the callbacks'
own contexts: the task then steps in the iteration right after ``blocked`` settles, as it
would had it awaited ``blocked`` itself. A foreign event (``wake``) or a cancel detaches
it from ``blocked`` and schedules the callbacks as a future's own completion would.

Its outcome is None, or a ``CancelledError`` when it was cancelled (the consumer's task was
cancelled, or a driver stepping this one cancelled what it was handed); ``blocked`` itself
is never cancelled or read here: the driver decides what to do about it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import Any

__all__ = ["Wait"]

_Callback = tuple[Callable[[Any], object], contextvars.Context | None]


class Wait:
    """One wait of the driver on ``blocked``, as a future its task can await."""

    __slots__ = (
        "_asyncio_future_blocking",
        "_callbacks",
        "_done",
        "_message",
        "blocked",
    )

    def __init__(self, blocked: asyncio.Future[Any]) -> None:
        self.blocked = blocked
        self._asyncio_future_blocking = True
        self._callbacks: list[_Callback] = []
        self._done = False
        #: The cancel's message (a tuple, so that None can be one) once cancelled.
        self._message: tuple[Any] | None = None
        # A bound method made afresh here and in ``detach`` (they compare equal): stored on
        # the instance it would make a reference cycle of every wait.
        blocked.add_done_callback(self._blocked_done)

    # -- what asyncio (a task, or a driver stepping this one) calls ------------------------

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self.blocked.get_loop()

    def add_done_callback(
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        if self._done:
            self.get_loop().call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        kept = [entry for entry in self._callbacks if entry[0] != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return self._message is not None

    def result(self) -> None:
        if self._message is not None:
            raise self._cancelled_error()
        if not self._done:
            raise asyncio.InvalidStateError("the wait is not over")

    def exception(self) -> BaseException | None:
        if self._message is not None:
            raise self._cancelled_error()
        return None

    def cancel(self, msg: Any | None = None) -> bool:
        if self._done:
            return False
        self._message = (msg,)
        self._finish_scheduled()
        return True

    # -- what the driver calls -----------------------------------------------------------

    def wake(self) -> None:
        """End the wait early (a foreign event): its callbacks are scheduled."""
        if not self._done:
            self._finish_scheduled()

    def detach(self) -> None:
        """Stop listening to ``blocked`` (the wait is over, however it ended)."""
        self.blocked.remove_done_callback(self._blocked_done)

    # -- inside ------------------------------------------------------------------------

    def _blocked_done(self, _: asyncio.Future[Any]) -> None:
        """``blocked`` settled: call the callbacks now, as its own would be called."""
        if self._done:
            return
        self._done = True
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            try:
                if context is None:
                    fn(self)
                else:
                    context.run(fn, self)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as error:  # reported as a callback's own handle would
                self.get_loop().call_exception_handler(
                    {"message": f"Exception in callback {fn!r}", "exception": error}
                )

    def _cancelled_error(self) -> asyncio.CancelledError:
        """A new error each time, as a future makes it: one kept here would hold, through
        its traceback, the frame that raised it and so this wait."""
        assert self._message is not None
        (msg,) = self._message
        return asyncio.CancelledError() if msg is None else asyncio.CancelledError(msg)

    def _finish_scheduled(self) -> None:
        self._done = True
        self.detach()
        callbacks, self._callbacks = self._callbacks, []
        loop = self.get_loop()
        for fn, context in callbacks:
            loop.call_soon(fn, self, context=context)
