"""The default database's connection, looked up once per call in the ORM's thread.

``connections[DEFAULT_DB_ALIAS]`` in a thread with no event loop costs asgiref's check for
one (``asyncio.get_running_loop()`` raising and catching ``RuntimeError``: some 2 µs); a
run's statements and transactions asked for it a dozen times. In that thread the answer
cannot change during one call (Django's connections are per thread there), so
``agent_app.durable.orm_thread`` looks it up once, ``pin``s it for the call and ``unpin``s
it after; ``default_connection()`` returns the pinned one, or looks it up anywhere else.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

__all__ = ["default_connection", "pin", "unpin"]


class _Pinned(threading.local):
    #: None: nothing pinned in this thread (a class default: reading it raises nothing).
    db: Any = None


_pinned = _Pinned()


def default_connection() -> Any:
    """``connections[DEFAULT_DB_ALIAS]``: the one pinned in this thread, if any."""
    db = _pinned.db
    return connections[DEFAULT_DB_ALIAS] if db is None else db


def pin(db: Any) -> None:
    """Make ``default_connection()`` in this thread return ``db`` (this thread's own
    connection) until ``unpin``."""
    _pinned.db = db


def unpin() -> None:
    """``default_connection()`` in this thread looks the connection up again."""
    _pinned.db = None
