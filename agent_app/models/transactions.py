"""``atomic()``: the outermost transaction of a run's writes, with less machinery on SQLite.

Every run opens two transactions (its start, its end), each in the ORM's thread. Django's
``transaction.atomic()`` around an empty body costs SQLite about 140,000 instructions
(the ``BEGIN`` through a cursor wrapper, ``set_autocommit`` twice with their thread,
connection and health checks, the ``COMMIT`` through its debug and error layers), against
some 17,000 for SQLite's own ``BEGIN`` and ``COMMIT``.

``atomic()`` does what ``Atomic`` does for an outermost block on SQLite in autocommit mode,
keeping the connection's state exactly as it keeps it — ``in_atomic_block``,
``autocommit``, ``needs_rollback``, ``atomic_blocks``, the ``on_commit`` hooks run after
the commit, a rollback on an exception, ``DatabaseError`` on a failed commit — so a block
nested inside it (a savepoint), ``transaction.on_commit`` and ``set_rollback`` behave as
under Django's. The ``BEGIN`` goes through ``statements.run``'s way to the driver (its
mode, ``IMMEDIATE``, as the backend's ``transaction_mode`` says), inside Django's error
wrapper. Anything else — another backend, a block inside another, no connection yet,
queries logged or wrapped — is Django's ``atomic()`` itself.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from django.db import DatabaseError, Error, transaction

from agent_app.models import statements
from agent_app.process.connection import default_connection

__all__ = ["atomic"]


class _Outermost:
    """One outermost block (see the module docstring); it stands in ``atomic_blocks``."""

    __slots__ = ("db", "django")

    #: What Django's nested ``durable`` check reads of the innermost block.
    _from_testcase = False
    durable = False

    def __init__(self) -> None:
        self.db: Any = None
        self.django: Any = None

    def __enter__(self) -> None:
        db = default_connection()
        db.close_if_health_check_failed()  # as ``set_autocommit`` does first
        if not _lean(db):
            self.django = transaction.atomic()
            self.django.__enter__()
            return
        self.db = db
        db.commit_on_exit = True
        db.needs_rollback = False
        mode = getattr(db, "transaction_mode", None)  # Django 5.1+: the OPTIONS mode
        with db.wrap_database_errors:
            statements._send(db.connection, "BEGIN" if mode is None else f"BEGIN {mode}", ())
        db.autocommit = False
        db.in_atomic_block = True
        db.atomic_blocks.append(self)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.django is not None:
            self.django.__exit__(exc_type, exc_value, traceback)
            return
        db = self.db
        db.atomic_blocks.pop()
        db.in_atomic_block = False
        try:
            if db.closed_in_transaction:
                pass  # the database rolls back by itself
            elif exc_type is None and not db.needs_rollback:
                try:
                    with db.wrap_database_errors:
                        db.connection.commit()
                    db.errors_occurred = False
                    db.run_commit_hooks_on_set_autocommit_on = True
                except DatabaseError:
                    _roll_back(db)
                    raise
            else:
                db.needs_rollback = False
                _roll_back(db)
        finally:
            if db.closed_in_transaction:
                db.connection = None
            else:
                db.autocommit = True  # SQLite's own mode never left autocommit
                if db.run_commit_hooks_on_set_autocommit_on:
                    db.run_and_clear_commit_hooks()
                    db.run_commit_hooks_on_set_autocommit_on = False


def atomic() -> Any:
    """A context manager: the outermost transaction of one write (see the module
    docstring); Django's ``transaction.atomic()`` where this one does not apply."""
    return _Outermost()


def _lean(db: Any) -> bool:
    """Whether ``db`` is SQLite, connected, in autocommit with no block open, and
    unwatched (no debug cursor, no ``execute_wrapper``)."""
    return (
        db.vendor == "sqlite"
        and db.connection is not None
        and db.autocommit
        and not db.in_atomic_block
        and not db.closed_in_transaction
        and not db.execute_wrappers
        and not db.queries_logged
        and db.connection.isolation_level is None
    )


def _roll_back(db: Any) -> None:
    """Django's rollback of a failed block: a connection that cannot roll back is closed."""
    try:
        db.rollback()
    except Error:
        db.close()
