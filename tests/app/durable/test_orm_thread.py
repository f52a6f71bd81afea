"""``orm_call``: a run's start and end go to the thread Channels' hop would use."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest
from asgiref.local import Local
from asgiref.sync import SyncToAsync, ThreadSensitiveContext, async_to_sync, sync_to_async
from channels.db import database_sync_to_async

from agent_app.api.stream import on_orm_thread
from agent_app.durable.orm_thread import orm_call

#: The hop closes the ORM thread's stale connections around each call, as Channels' does.
pytestmark = pytest.mark.django_db(transaction=True)

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("test_orm_thread_seen", default="")


def _where() -> tuple[int, str]:
    return threading.get_ident(), _seen.get()


async def test_a_call_runs_in_the_thread_of_database_sync_to_async_and_sees_the_context():
    token = _seen.set("the caller's")
    try:
        fast = await orm_call(_where)()
        plain = await database_sync_to_async(_where)()
    finally:
        _seen.reset(token)
    assert fast == plain
    assert fast[0] != threading.get_ident()
    assert fast[1] == "the caller's"


async def test_what_the_function_raises_reaches_the_caller():
    def fails() -> None:
        raise LookupError("nothing here")

    with pytest.raises(LookupError, match="nothing here"):
        await orm_call(fails)()


async def test_inside_a_thread_sensitive_context_the_call_goes_where_asgiref_sends_it():
    async with ThreadSensitiveContext():
        fast = await orm_call(_where)()
        plain = await database_sync_to_async(_where)()
    assert fast == plain
    main = SyncToAsync.single_thread_executor.submit(threading.get_ident).result()
    assert fast[0] != main  # that context's own thread, not the shared one


def test_inside_async_to_sync_the_call_goes_where_asgiref_sends_it():
    """From a sync thread's ``async_to_sync``, the call runs where asgiref runs a
    thread-sensitive call: in that sync thread, not the shared one."""

    async def both() -> tuple[tuple[int, str], tuple[int, str]]:
        return await orm_call(_where)(), await database_sync_to_async(_where)()

    fast, plain = async_to_sync(both)()
    assert fast == plain
    assert fast[0] == threading.get_ident()


async def test_the_call_reads_its_threads_own_connection_pinned_only_during_the_call():
    from django.db import connections

    from agent_app.process.connection import _pinned, default_connection

    def inside() -> bool:
        return _pinned.db is not None and default_connection() is connections["default"]

    assert await orm_call(inside)()
    executor = SyncToAsync.single_thread_executor
    assert await asyncio.get_running_loop().run_in_executor(executor, lambda: _pinned.db) is None


async def test_a_local_the_caller_set_is_read_there_as_through_database_sync_to_async():
    """An ``asgiref.local.Local`` (Django's script prefix is one) set by the caller reads
    the same in the ORM's thread, as it does through Channels' hop."""
    local = Local()
    local.prefix = "/shop/"

    def read() -> str:
        return getattr(local, "prefix", "unset")

    assert await orm_call(read)() == await database_sync_to_async(read)() == "/shop/"


async def test_on_orm_thread_takes_the_shared_thread_from_inside_a_request_context():
    """A view's read (``agent_app.api.stream.on_orm_thread``) goes to the thread the runs'
    ORM work runs in, not to the request's own thread, and what it raises comes back."""
    main = SyncToAsync.single_thread_executor.submit(threading.get_ident).result()
    token = _seen.set("the request's")
    try:
        async with ThreadSensitiveContext():
            request_thread = await sync_to_async(threading.get_ident)()
            where = await on_orm_thread(orm_call(_where))
            with pytest.raises(LookupError, match="nothing here"):
                await on_orm_thread(orm_call(_fails))
    finally:
        _seen.reset(token)
    assert where == (main, "")  # and none of the request's context
    assert request_thread != main


def _fails() -> None:
    raise LookupError("nothing here")


async def test_the_hop_closes_an_obsolete_connection_before_and_after_the_call():
    """As Channels' hop: a connection past its age is closed before the call (it opens a
    new one) and after it (PostgreSQL's goes back to its pool)."""
    from django.db import connection

    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        await _checked_before_and_after()  # Django never closes an in-memory database
        return

    def obsolete() -> object:
        connection.ensure_connection()
        connection.close_at = time.monotonic() - 1
        return connection.connection

    def opened() -> object:
        connection.ensure_connection()
        return connection.connection

    loop = asyncio.get_running_loop()
    executor = SyncToAsync.single_thread_executor
    old = await loop.run_in_executor(executor, obsolete)  # no hop: nothing closes it
    assert await orm_call(opened)() is not old  # closed before the call, a new one opened
    await orm_call(obsolete)()
    assert await loop.run_in_executor(executor, lambda: connection.connection) is None


async def _checked_before_and_after() -> None:
    """Where nothing can be closed: the hop checks the ORM thread's connection before and
    after the call, as ``close_old_connections`` would: a kept connection is marked for a
    health check before its next use, and one that saw an error is asked whether it works."""
    from django.db import connection

    def leave(errors: bool) -> None:
        connection.ensure_connection()
        connection.health_check_done = True
        connection.errors_occurred = errors

    def seen() -> tuple[bool, bool]:
        return connection.health_check_done, connection.errors_occurred

    def left(errors: bool) -> tuple[bool, bool]:
        found = seen()
        leave(errors)
        return found

    executor = SyncToAsync.single_thread_executor
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(executor, leave, False)
    assert await orm_call(left)(False) == (False, False)  # checked before the call
    assert await loop.run_in_executor(executor, seen) == (False, False)  # and after it
    await loop.run_in_executor(executor, leave, True)
    # An error since the last commit: the connection is asked whether it works (it does).
    assert await orm_call(left)(True) == (True, False)
    assert await loop.run_in_executor(executor, seen) == (True, False)
