"""A run's start and end on the ORM thread, with less machinery than a general hop.

Every ORM call of a socket goes through Channels' ``database_sync_to_async``, which asgiref
runs in one thread (``SyncToAsync.single_thread_executor``) unless the caller is inside
``async_to_sync`` or a ``ThreadSensitiveContext``. That hop does much more than move the
call: a task around it (``shielded``), a shield of its own, the context copied there and
every variable copied back. A run makes two calls that are its own (``begin_run``,
``end_run``), and the socket benchmark counts each hop's microseconds on both threads.

``orm_call(fn)`` makes a function that submits ``fn`` to the same thread and returns the
future (a ``shielded`` write awaits it with no task of its own). There ``fn`` runs in a
copy of the caller's context (what the caller set is seen, its ``asgiref.local.Local``
values moved to that thread as asgiref moves them; what ``fn`` sets stays there: the calls
made this way set nothing their callers read), between two closings of Django's
stale connections, as Channels does around every call (on PostgreSQL the one after hands
the pooled connection back), and with asgiref's thread-local pointing at the caller's
loop, so ``async_to_sync`` inside still finds it. When asgiref would pick another thread,
the call goes through ``database_sync_to_async`` itself (and so does every call if the
installed asgiref lacks the helper that moves ``Local`` values: requirements.txt pins the
one this follows): the ORM's calls of one socket stay in one thread whichever way they go,
one at a time (the executor has one worker), which is what
``agent_app.durable.store``'s history cache relies on.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import AsyncToSync, SyncToAsync
from channels.db import database_sync_to_async
from django.db import DEFAULT_DB_ALIAS, close_old_connections, connections

from agent_app.process import connection

try:  # asgiref's own way of moving Local values; without it, every call takes its hop
    from asgiref.sync import _restore_context
except ImportError:  # pragma: no cover - another asgiref than requirements.txt pins
    _restore_context = None

__all__ = ["orm_call"]

P = ParamSpec("P")
R = TypeVar("R")


def orm_call(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``fn`` as a function whose call runs it in the ORM thread (see the module docstring)
    and returns what to await for its result."""
    general = database_sync_to_async(fn)
    threadlocal = SyncToAsync.threadlocal
    pid = os.getpid()

    def in_thread(context: contextvars.Context, loop: Any, args: Any, kwargs: Any) -> R:
        threadlocal.main_event_loop = loop
        threadlocal.main_event_loop_pid = pid
        db = _close_stale()
        if db is not None:
            connection.pin(db)
        try:
            return context.run(_in_context, context, fn, args, kwargs)
        finally:
            if db is not None:
                connection.unpin()
            _close_stale(db)  # PostgreSQL's pooled connection goes back to the pool

    def call(*args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        loop = asyncio.get_running_loop()
        if _restore_context is None or _elsewhere(loop):
            return general(*args, **kwargs)
        context = contextvars.copy_context()
        executor = SyncToAsync.single_thread_executor
        return loop.run_in_executor(executor, in_thread, context, loop, args, kwargs)

    return call


def _close_stale(db: Any = None) -> Any:
    """``close_old_connections()``: with one database configured, asked of its connection
    alone (``db``, when the caller has it), without building the list of every initialized
    one (about a third of the call's 32,000 instructions; four calls a run). Returns that
    connection (None with several databases): the call pins it
    (``agent_app.process.connection``)."""
    if len(connections.settings) != 1:
        close_old_connections()
        return None
    if db is None:
        db = connections[DEFAULT_DB_ALIAS]
    if db.connection is None:  # an unconnected one has nothing to close
        return db
    if (
        db.autocommit == db.settings_dict["AUTOCOMMIT"]
        and not db.errors_occurred
        and (db.close_at is None or time.monotonic() < db.close_at)
    ):
        # What ``close_if_unusable_or_obsolete`` does to a connection it keeps, without its
        # ``get_autocommit``'s check for an event loop (a ``RuntimeError`` raised and caught
        # in this thread, which has none); any other state takes Django's own method.
        db.health_check_done = False
    else:
        db.close_if_unusable_or_obsolete()
    return db


def _in_context(context: contextvars.Context, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    """Call ``fn`` with the caller's ``asgiref.local.Local`` values moved to this thread, as
    asgiref does (else a ``Local`` that isolates threads, such as Django's script prefix
    set for the socket, reads as unset here)."""
    _restore_context(context)
    return fn(*args, **kwargs)


def _elsewhere(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether asgiref would run a thread-sensitive call in another thread than its
    ``single_thread_executor`` (the order of its own checks in ``SyncToAsync.__call__``)."""
    return (
        getattr(AsyncToSync.executors, "current", None) is not None
        or SyncToAsync.thread_sensitive_context.get(None) is not None
        or loop in AsyncToSync.loop_thread_executors
        or SyncToAsync.deadlock_context.get(False)
    )
