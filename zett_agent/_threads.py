"""Worker threads for sync tool bodies: one hop there, one hop back.

Why not ``asyncio.to_thread``: it goes through the loop's default ``ThreadPoolExecutor``
(a work item, the executor's locks, a ``concurrent.futures.Future``) and then wraps that
future into an asyncio one, whose completion is copied over with one more scheduled
callback. For a tool that adds two numbers that machinery is most of the cost. Here a call
is one item on a ``queue.SimpleQueue`` and one ``call_soon_threadsafe`` that settles the
awaited asyncio future directly.

Concurrency story:

- ``run_in_thread`` (on the event loop) copies the caller's context (so the body sees
  ``current_tool_call_id()`` and ``current_run_context()``) and puts the item on the shared
  queue. Under one lock it either reserves an idle worker for it (so a second call never
  waits behind a slow first one while a thread sits idle) or, when none is idle and fewer
  than ``MAX_WORKERS`` exist, starts one more; at the limit the item waits its turn;
- a worker blocks on the queue, runs the function in the copied context, counts itself
  idle, and only then hands the outcome back with ``loop.call_soon_threadsafe``; on the
  loop, ``_settle`` sets the future unless it was cancelled meanwhile. Waking the loop is
  the worker's last step before it blocks again (releasing the GIL): the woken loop thread
  rarely finds the GIL still held, which saves a context switch per call (about 4 to 3
  voluntary switches per round trip, measured with ``getrusage``);
- cancelling the awaiting task cancels the future at once; the function itself runs on to
  its end in its thread (a thread cannot be interrupted) and its outcome is dropped, as with
  ``asyncio.to_thread``. A loop closed meanwhile is ignored the same way;
- workers are daemon threads that live for the process, like the default executor's; a
  forked child starts afresh (no worker, an empty queue);
- when all ``MAX_WORKERS`` are busy, an item waits unreserved, and the first worker to
  finish takes it and counts itself busy again, so the idle count never drifts.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_WORKERS", "run_in_thread"]

#: Most worker threads ever started (the default executor's rule).
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_Item = tuple[
    Callable[..., Any],
    dict[str, Any],
    contextvars.Context,
    asyncio.Future[Any],
    asyncio.AbstractEventLoop,
    bool,  # a worker was reserved (or started) for it
]

_queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
_lock = threading.Lock()
_workers = 0
_idle = 0


def run_in_thread(function: Callable[..., Any], /, **kwargs: Any) -> asyncio.Future[Any]:
    """Run ``function(**kwargs)`` in a worker thread; await the returned future."""
    global _workers, _idle
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    with _lock:
        start = False
        reserved = True
        if _idle > 0:  # (briefly negative while a finished worker takes a waiting item)
            _idle -= 1  # that worker is now promised to this item
        elif _workers < MAX_WORKERS:
            _workers += 1
            start = True
        else:
            reserved = False  # every worker is busy: the first one to finish takes it
    _queue.put((function, kwargs, contextvars.copy_context(), future, loop, reserved))
    if start:
        threading.Thread(target=_work, name=f"zett-tool-{_workers}", daemon=True).start()
    return future


def _work() -> None:
    global _idle
    while True:
        function, kwargs, context, future, loop, reserved = _queue.get()
        if not reserved:
            with _lock:
                _idle -= 1  # this worker counted itself idle; it is busy again
        try:
            result, error = context.run(function, **kwargs), None
        except BaseException as exc:  # handed to the awaiting task, like any tool error
            result, error = None, exc
        del function, kwargs, context
        with _lock:
            _idle += 1
        try:  # last: the woken loop thread finds the GIL free, not held by this one
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass
        del future, loop, result, error


def _after_fork_in_child() -> None:
    """Threads do not survive ``fork``: the child starts with no worker and a fresh queue."""
    global _queue, _lock, _workers, _idle
    _queue = queue.SimpleQueue()
    _lock = threading.Lock()
    _workers = _idle = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled while the function ran
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
