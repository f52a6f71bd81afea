"""Django's ASGI handler with its request threads kept for the next requests.

Django's ``ASGIHandler`` runs each request in an ``asgiref`` ``ThreadSensitiveContext``:
the request's sync work (the ``request_started`` signal, a stack with a sync-only
middleware, a sync view, the response's ``close``) runs in a thread of that request
alone, one call at a time. The context starts that thread (a one-thread executor) at the
request's first sync call, and a second thread at its end to join the first: two threads
started and ended for every request, on every HTTP request of the site (an AG-UI
``POST`` among them, whose run a socket's message starts with neither).

``RequestThreadsHandler`` hands each request's context a one-thread executor taken from
those the earlier requests gave back (a new one when none is idle), and takes it out of
the context before the context ends, so the context neither starts nor joins a thread.
A thread serves one request at a time, as before, and is kept from one request to the
next, as a WSGI server's threads are. An executor is given back once its request ended
normally; after an error or a cancellation it is shut down (its thread ends after its
last call) and never given to another request. At most ``KEEP_IDLE`` wait idle; the
others are shut down as they come back. A task that inherited a request's context and
outlives it gets an executor of its own at its next sync call, as under Django's handler.

A kept thread carries no database connection from one request into the next: at the end
of each request (Django's ``request_finished``, sent from the request's thread) its
connections are closed, as they were when the thread ended with its request. A connection
kept open in a thread that serves requests one after another could otherwise carry a
read snapshot (SQLite's write-ahead log) or a connection's state into a later request;
``CONN_MAX_AGE`` keeps the connections of the runs' own ORM thread.

It also answers Django's own ``CsrfViewMiddleware.process_view`` for a view exempt from
CSRF (``csrf_exempt``: the HTTP API's views) on the event loop: that method returns
None for such a view before it looks at anything else, and Django would call it in the
request's thread (a round trip there and back, about 0.1 ms of CPU under load, for every
AG-UI ``POST``). Any other view, or a subclass that overrides the method, goes through
Django's call as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished
from django.db import connections
from django.middleware.csrf import CsrfViewMiddleware

__all__ = ["KEEP_IDLE", "RequestThreadsHandler"]

#: Idle request threads kept for the next requests (a burst beyond it starts new ones).
KEEP_IDLE = 8


class RequestThreadsHandler(ASGIHandler):
    """Django's ASGI handler whose requests run their sync work in threads kept from one
    request to the next (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        #: Executors whose request ended (one event loop takes and gives them: no lock).
        self._idle: list[ThreadPoolExecutor] = []

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async)
        if is_async:
            self._view_middleware = [_exempt_on_loop(method) for method in self._view_middleware]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # Django's refusal
            return
        context = ThreadSensitiveContext()
        async with context:
            if context.token is None:  # inside another request's context: Django's way
                await self.handle(scope, receive, send)
                return
            await self._handle_in(context, scope, receive, send)

    async def _handle_in(
        self, context: ThreadSensitiveContext, scope: dict[str, Any], receive: Any, send: Any
    ) -> None:
        executors = SyncToAsync.context_to_thread_executor
        executor = self._idle.pop() if self._idle else _new_executor()
        executors[context] = executor
        ended = False
        try:
            await self.handle(scope, receive, send)
            ended = True
        finally:
            if executors.get(context) is executor:
                del executors[context]  # the context's end neither joins nor shuts it down
            if ended and len(self._idle) < KEEP_IDLE:
                self._idle.append(executor)
            else:
                executor.shutdown(wait=False)

    @property
    def idle_threads(self) -> int:
        """How many request threads wait for a request."""
        return len(self._idle)

    def close(self) -> None:
        """End the idle request threads (joined); the next request starts a new one."""
        idle, self._idle = self._idle, []
        for executor in idle:
            executor.shutdown(wait=True)


def _close_connections(**kwargs: Any) -> None:
    """A request of ``RequestThreadsHandler`` ended: its thread's connections close."""
    connections.close_all()


request_finished.connect(
    _close_connections, sender=RequestThreadsHandler, dispatch_uid="zett-request-threads"
)

ViewMiddleware = Callable[..., Awaitable[Any]]


def _exempt_on_loop(method: ViewMiddleware) -> ViewMiddleware:
    """``method`` (a view middleware as Django adapted it), answering on the loop for a
    view exempt from CSRF when it is Django's own CSRF check run in a thread."""
    bound = getattr(method, "func", None)
    owner = getattr(bound, "__self__", None)
    if not (
        isinstance(method, SyncToAsync)
        and isinstance(owner, CsrfViewMiddleware)
        and type(owner).process_view is CsrfViewMiddleware.process_view
    ):
        return method

    async def process_view(request: Any, callback: Any, args: Any, kwargs: Any) -> Any:
        if getattr(callback, "csrf_exempt", False):
            return None  # what Django's method answers, without its thread
        return await method(request, callback, args, kwargs)

    return process_view


def _new_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="zett-request")
