"""Transactions that PostgreSQL may end as deadlocked, run again.

Two workers can touch one session's rows at once: one ends its run (the run's row, then
the session's), another settles the session's runs or continues a paused one (the session
first, then a run's). The statements take the rows in one order where they can; where a
deadlock still happens, PostgreSQL aborts one of the transactions whole (SQLSTATE 40P01),
so running it again from the start is safe: it wrote nothing. Only a function that owns
its transaction is run again; inside an outer ``atomic`` block the error goes up to the
block's owner, whose transaction is the one that was aborted.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import OperationalError

from agent_app.process.connection import default_connection

__all__ = ["ATTEMPTS", "is_deadlock", "retried_on_deadlock"]

logger = logging.getLogger(__name__)

#: Runs of one transaction at most (the first and two more).
ATTEMPTS = 3
_DEADLOCK = "40P01"

P = ParamSpec("P")
T = TypeVar("T")


def is_deadlock(error: BaseException) -> bool:
    """Whether ``error`` is PostgreSQL's "deadlock detected"."""
    cause = error.__cause__
    return getattr(cause, "sqlstate", None) == _DEADLOCK


def retried_on_deadlock(function: Callable[P, T]) -> Callable[P, T]:
    """Run ``function`` (which opens its own transaction) again when it deadlocked."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return function(*args, **kwargs)
            except OperationalError as error:
                outer = default_connection().in_atomic_block
                if attempt == ATTEMPTS or outer or not is_deadlock(error):
                    raise
                logger.info("%s deadlocked; running it again", function.__qualname__)
        raise AssertionError("unreachable")

    return run
