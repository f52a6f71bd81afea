"""A transaction PostgreSQL ended as deadlocked is run again, once it owns its transaction
(``agent_app.durable.deadlocks``); any other database error, or one inside an outer
``atomic`` block, goes up at once."""

from __future__ import annotations

import psycopg.errors
import pytest
from django.db import OperationalError, transaction

from agent_app.durable.deadlocks import ATTEMPTS, retried_on_deadlock


def failing(cause: Exception, times: int):
    """A transaction that fails ``times`` times as Django raises it (``cause`` underneath)."""
    calls = []

    @retried_on_deadlock
    def write() -> str:
        calls.append(transaction.get_connection().in_atomic_block)
        with transaction.atomic():
            if len(calls) <= times:
                raise OperationalError(str(cause)) from cause
            return "written"

    return write, calls


def deadlock() -> Exception:
    return psycopg.errors.DeadlockDetected("deadlock detected")


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_transaction_runs_again_until_it_goes_through():
    write, calls = failing(deadlock(), ATTEMPTS - 1)
    assert write() == "written"
    assert calls == [False] * ATTEMPTS


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_after_the_last_attempt():
    write, calls = failing(deadlock(), ATTEMPTS)
    with pytest.raises(OperationalError, match="deadlock"):
        write()
    assert len(calls) == ATTEMPTS


@pytest.mark.django_db(transaction=True)
def test_another_database_error_is_not_run_again():
    write, calls = failing(psycopg.errors.QueryCanceled("canceling statement"), 1)
    with pytest.raises(OperationalError, match="canceling"):
        write()
    assert len(calls) == 1


@pytest.mark.django_db(transaction=True)
def test_inside_an_outer_transaction_the_deadlock_goes_to_its_owner():
    write, calls = failing(deadlock(), 1)
    with pytest.raises(OperationalError), transaction.atomic():
        write()
    assert calls == [True]
