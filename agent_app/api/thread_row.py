"""The row an AG-UI POST reads of its thread, in one statement built once.

Every POST reads its thread's chat with two facts beside it: whether a question or
approval of it waits for its answer (in time), and whether a run of it is still marked
running or paused (a dead process's, to settle before the next run). As an ORM query
(``annotate`` with two ``Exists``) that is one trip to the database, but building and
compiling it costs far more CPU than running it: it was the largest part of a streamed
run's server CPU outside the run itself. The statement is plain SQL that both databases
read the same way, so it is written here once, with the tables' and columns' names taken
from the models, and only its parameters change between POSTs. Its row becomes the chat
through the ORM's own converters (``statements.instance_from``), not a ``raw()`` query,
which worked out the columns, their converters and the model's fields again on every
POST (0.5 ms of the ORM thread's CPU a POST, more than the rest of the POST's read).
"""

from __future__ import annotations

import uuid
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from agent_app.models import ChatRun, ChatSession, ReplyWait, RunStatus, WaitStatus
from agent_app.models.statements import ONE, instance_from, returned_columns, run

__all__ = ["chat_with_waits"]


@cache
def _statement(vendor: str) -> str:
    """The statement for the default database (its quoting of names), ``vendor`` its
    kind: the chat's columns in ``instance_from``'s order, then the two facts."""
    db = connections[DEFAULT_DB_ALIAS]
    name = db.ops.quote_name

    def column(model: type, field: str) -> str:
        return name(model._meta.get_field(field).column)

    chat_id = column(ChatSession, "id")
    return (
        f"SELECT {returned_columns(ChatSession, vendor).sql}, "
        f"EXISTS(SELECT 1 FROM {name(ReplyWait._meta.db_table)} w "
        f"WHERE w.{column(ReplyWait, 'session')} = c.{chat_id} "
        f"AND w.{column(ReplyWait, 'status')} = %s "
        f"AND (w.{column(ReplyWait, 'expires_at')} IS NULL "
        f"OR w.{column(ReplyWait, 'expires_at')} > %s)) AS waiting, "
        f"EXISTS(SELECT 1 FROM {name(ChatRun._meta.db_table)} r "
        f"WHERE r.{column(ChatRun, 'session')} = c.{chat_id} "
        f"AND r.{column(ChatRun, 'status')} IN (%s, %s)) AS unsettled "
        f"FROM {name(ChatSession._meta.db_table)} c WHERE c.{chat_id} = %s"
    )


def chat_with_waits(thread_id: str) -> ChatSession | None:
    """The stored chat ``thread_id`` (a UUID's text) with ``waiting`` and ``unsettled``
    set (true or false), or None when no chat has that id."""
    db = connections[DEFAULT_DB_ALIAS]
    params = [
        WaitStatus.OPEN.value,
        ReplyWait._meta.get_field("expires_at").get_db_prep_value(timezone.now(), db),
        RunStatus.RUNNING.value,
        RunStatus.PAUSED.value,
        ChatSession._meta.pk.get_db_prep_value(uuid.UUID(thread_id), db),
    ]
    row = run(db, _statement(db.vendor), params, ONE)
    if row is None:
        return None
    chat = instance_from(ChatSession, row[:-2])
    chat.waiting, chat.unsettled = bool(row[-2]), bool(row[-1])
    return chat
