"""``agent_app.models.transactions.atomic``: a run's outermost transaction on SQLite behaves
as Django's ``transaction.atomic()`` does (commit, rollback, hooks, savepoints inside)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from agent_app.models import ChatSession, statements
from agent_app.models.transactions import atomic

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the lean block is SQLite's"),
]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements sent straight to the driver (the lean block's ``BEGIN`` among them)."""
    seen: list[str] = []
    send = statements._send

    def recorded(raw: Any, sql: str, params: Any) -> Any:
        seen.append(sql.split()[0])
        return send(raw, sql, params)

    monkeypatch.setattr(statements, "_send", recorded)
    connection.ensure_connection()
    return seen


def _state() -> tuple[bool, bool, bool, list[Any]]:
    return (
        connection.autocommit,
        connection.in_atomic_block,
        connection.needs_rollback,
        connection.atomic_blocks,
    )


def test_a_block_commits_then_runs_its_hooks_and_leaves_autocommit_on(sent):
    ran: list[int] = []
    with atomic():
        assert connection.in_atomic_block and not connection.autocommit
        ChatSession.objects.create(title="kept")
        transaction.on_commit(lambda: ran.append(ChatSession.objects.count()))
        assert ran == []
    assert ran == [1]
    assert sent[0] == "BEGIN"
    assert _state() == (True, False, False, [])


def test_an_error_rolls_the_block_back_and_drops_its_hooks(sent):
    ran: list[str] = []
    with pytest.raises(ValueError), atomic():
        ChatSession.objects.create(title="gone")
        transaction.on_commit(lambda: ran.append("hook"))
        raise ValueError("boom")
    assert not ChatSession.objects.exists() and ran == []
    assert sent[0] == "BEGIN"
    assert _state() == (True, False, False, [])


def test_a_savepoint_inside_rolls_back_alone_and_set_rollback_undoes_all(sent):
    with atomic():
        kept = ChatSession.objects.create(title="kept")
        with pytest.raises(IntegrityError), transaction.atomic():
            ChatSession.objects.create(pk=kept.pk)
    assert list(ChatSession.objects.values_list("title", flat=True)) == ["kept"]
    with atomic():
        ChatSession.objects.create(title="undone")
        transaction.set_rollback(True)
    assert ChatSession.objects.count() == 1
    assert sent.count("BEGIN") == 2
    assert _state() == (True, False, False, [])


def test_inside_another_block_it_is_djangos_savepoint(sent):
    with transaction.atomic():
        ChatSession.objects.create(title="outer")
        with pytest.raises(ValueError), atomic():
            ChatSession.objects.create(title="inner")
            raise ValueError("inner only")
    assert list(ChatSession.objects.values_list("title", flat=True)) == ["outer"]
    assert "BEGIN" not in sent  # Django's own block began the transaction
