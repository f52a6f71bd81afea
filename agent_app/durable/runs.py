"""``ChatRun`` rows: a request is recorded before the model is called and closed when it ends.

``begin_run`` is the write-ahead step of a request. In one transaction it stores the
session (when this is its first message), the run row (``running``), the user's message,
and a block of ``seq`` numbers for the run's frames — before any agent is built or model
called, so a request that fails at once, a bad model configuration, a ``cancel`` a
millisecond later or a crash all leave the user's message and a run that says what
happened. ``end_run`` records the outcome, and queues its webhook message
(``run.completed`` / ``run.failed``) in the same transaction.

What users read about a failure is ``user_message_for``: the error's own text, except for
database errors, which become a generic sentence (their details go to the log only).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.db import DatabaseError
from django.utils import timezone

from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE
from agent_app.attachments.stored import attachment_refs
from agent_app.durable.branches import NotATurn, start_version
from agent_app.durable.chat_records import ChatDeleted, creator_key, record_creation, was_deleted
from agent_app.durable.deadlocks import retried_on_deadlock
from agent_app.durable.sequence import SEQ_BLOCK
from agent_app.durable.store import (
    Bumped,
    RowMeta,
    bump_version,
    db_session_pk,
    forget,
    insert_rows,
    message_from_row,
    remember,
    restore_history,
    session_end_sql,
    title_from,
)
from agent_app.durable.support import TakenOver
from agent_app.models import ChatMessage, ChatRun, ChatSession, RunKind, RunStatus
from agent_app.models.statements import insert, new, run, update
from agent_app.models.transactions import atomic
from agent_app.process.connection import default_connection
from agent_app.webhooks.run_events import run_ended
from zett_agent.messages import AnyMessage, UserMessage

__all__ = [
    "AlreadyContinued",
    "Begun",
    "Creator",
    "NothingToReplace",
    "StaleRuns",
    "begin_run",
    "end_run",
    "run_item",
    "user_message_for",
]

logger = logging.getLogger(__name__)

#: Longest error text a run keeps and shows.
MAX_ERROR_TEXT = 500


@dataclass(frozen=True, slots=True)
class Creator:
    """Who a session that does not exist yet will belong to."""

    owner_id: int | None = None
    browser_key: str = ""


class NothingToReplace(NotATurn):
    """``regenerate``/``edit`` naming no user message of the shown path (or none yet)."""


class AlreadyContinued(Exception):
    """A continuation of a run that is no longer paused: another one took it over first."""


class StaleRuns(Exception):
    """``begin_run(refuse_stale=True)`` found runs no ending has settled yet."""


@dataclass(frozen=True, slots=True)
class Begun:
    """What ``begin_run`` stored."""

    #: Position of the user's message (None for a continuation, which has none).
    position: int | None
    created_at: datetime
    #: A block of ``seq`` numbers reserved for the run's frames: ``(first, last)``.
    seq_block: tuple[int, int]
    #: The user's message the run answers (None for a continuation).
    message: UserMessage | None = None
    #: Where the superseded turn began (``regenerate``/``edit``), else None.
    superseded_from: int | None = None
    #: The history the run starts from, its user message last (None for a continuation).
    history: list[AnyMessage] | None = None
    #: References of the user message's attachments (``attachment_ref``).
    attachments: list[dict[str, Any]] = field(default_factory=list)
    #: The stored user message's row (None for a continuation).
    row: ChatMessage | None = None
    #: Whether that message is a new version of a turn (``regenerate``/``edit``,
    #: ``agent_app.durable.branches``).
    new_version: bool = False
    #: The chat's title once the message is stored (a new chat's is named after it).
    title: str = ""
    #: The values of the caller's ``also`` expressions, read with the chat's row.
    also: tuple[Any, ...] = ()

    @property
    def message_id(self) -> int | None:
        """The stored user message's id (its history item's ``id``)."""
        return None if self.row is None else self.row.pk

    @property
    def version_row(self) -> ChatMessage | None:
        """The new version's row, for ``regenerate`` and ``edit``."""
        return self.row if self.new_version else None


def _lock_session(
    session_id: str, bump: Callable[[], Bumped], creator: Creator, content: str | None
) -> Bumped:
    """Lock the session row for the rest of the transaction; store a first-time session,
    titled after ``content``."""
    try:
        return bump()
    except ChatSession.DoesNotExist:
        _store_session(session_id, creator, title_from(content) if content else "")
        return bump()


def _store_run(
    session_id: str, request_id: str, kind: str, resumed_from: str, worker: str, now: datetime
) -> None:
    """Insert the run's row; a continuation marks the paused run it takes over ``resumed``
    (``AlreadyContinued`` when it is not paused any more)."""
    run = new(
        ChatRun,
        request_id=request_id,
        session_id=session_id,
        kind=kind,
        resumed_from=resumed_from,
        worker=worker,
    )
    insert([run])
    if resumed_from and not _take_paused_run(resumed_from, now):
        raise AlreadyContinued(resumed_from)  # rolls back: nothing is stored


@retried_on_deadlock
def begin_run(
    session_id: str,
    request_id: str,
    *,
    content: str | None,
    worker: str,
    creator: Creator | None = None,
    kind: str = RunKind.MESSAGE,
    resumed_from: str = "",
    replace_last_turn: bool = False,
    turn_position: int | None = None,
    refuse_stale: bool = False,
    attachments: Sequence[str] = (),
    also: tuple[str, tuple[Any, ...]] | None = None,
) -> Begun:
    """Store the session if new, the run, the user's message and a ``seq`` block.

    ``replace_last_turn`` (``regenerate``, ``edit``): a new version of the turn at
    ``turn_position`` (None: the last; ``agent_app.durable.branches``), ``content`` None
    asking the same again; ``NothingToReplace`` (nothing stored) when no such turn shows.
    A continuation (``content`` None, ``resumed_from`` set) stores no message and marks the
    paused run it takes over ``resumed`` (``AlreadyContinued`` if it is not paused any more:
    exactly one continuation per paused run). ``refuse_stale``: store nothing and raise
    ``StaleRuns`` if a run of the session is still ``running`` or ``paused`` (the caller
    settles those first, ``agent_app.durable.recovery``): counted by the statement that locks the
    session row (``bump_version``), so the check costs no statement of its own; so is
    whether staff took the chat over (``TakenOver``, nothing stored; ``agent_app.people``).
    ``also``: expressions that statement returns too (``bump_version``; in ``Begun.also``).
    """
    now = timezone.now()
    options = {"seq_block": SEQ_BLOCK, "count_unsettled": refuse_stale, "also": also}
    bump = functools.partial(bump_version, session_id, now, **options)
    with atomic():
        bumped = _lock_session(session_id, bump, creator or Creator(), content)
        if bumped.unsettled_runs:
            raise StaleRuns(session_id)  # rolls the bump back: nothing is stored
        if bumped.taken_over:
            raise TakenOver  # a person answers here now (rolls the bump back)
        version, reserved = bumped.history_version, bumped.seq_reserved
        title = _name_new_chat(session_id, bumped.title, content)
        _store_run(session_id, request_id, kind, resumed_from, worker, now)
        if replace_last_turn:
            row = _new_version(session_id, request_id, turn_position, content)
        else:
            row = _store_message(session_id, request_id, bumped, content, attachments)
        message = None if row is None else cast(UserMessage, message_from_row(row))
        position, now = (None, now) if row is None else (row.position, row.created_at)
    if replace_last_turn:
        forget(session_id)
    else:
        remember(session_id, version, [message] if message is not None else [])
    # What the run starts from, read while this thread knows the version it just wrote.
    history = restore_history(session_id, version=version) if message is not None else None
    block = (reserved - SEQ_BLOCK + 1, reserved)
    refs = attachment_refs(session_id, _attachment_ids(message))
    old = position if replace_last_turn else None  # the superseded turn's start
    done = (position, now, block, message, old, history, refs, row, replace_last_turn, title)
    return Begun(*done, bumped.also)


def _name_new_chat(session_id: str, current: str, content: str | None) -> str:
    """Give an untitled chat a title from ``content`` (a person's own title stays); the
    chat's title. Made only for an untitled chat: a titled one (most runs) needs none."""
    if current or not content:
        return current
    title = title_from(content)
    if title:
        ChatSession.objects.filter(pk=session_id, title="").update(title=title)
    return title


def _store_message(
    session_id: str,
    request_id: str,
    bumped: Bumped,
    content: str | None,
    attachments: Sequence[str],
) -> ChatMessage | None:
    """Store the user message a run starts with (None: a continuation, which has none)."""
    if content is None:
        return None
    message = UserMessage(content, attributes=_with_files(attachments))
    (row,) = insert_rows(
        session_id,
        request_id,
        [(message, RowMeta())],
        after=bumped.last_position,
        follows=bumped.last_id,
    )
    return row


def _new_version(
    session_id: str, request_id: str, position: int | None, content: str | None
) -> ChatMessage:
    """Store a new version of the turn at ``position`` (None: the last): its user message
    asked again (``content`` None) or edited, with the replaced message's files."""
    try:
        turn, number = start_version(session_id, position)
    except NothingToReplace:
        raise
    except NotATurn as error:
        raise NothingToReplace(str(error)) from None
    replaced = message_from_row(turn)
    assert isinstance(replaced, UserMessage)
    if content is None:
        message = UserMessage(replaced.content, attributes=dict(replaced.attributes))
    else:
        message = UserMessage(content, attributes=_with_files(_attachment_ids(replaced)))
    (row,) = insert_rows(
        session_id,
        request_id,
        [(message, RowMeta())],
        after=turn.position - 1 if turn.position else None,
        follows=turn.follows,
        version=number,
    )
    return row


def _with_files(ids: Sequence[str]) -> dict[str, Any]:
    """A new message's attributes: the ids of its attachments, if it has any."""
    return {ATTACHMENTS_ATTRIBUTE: list(ids)} if ids else {}


def _attachment_ids(message: UserMessage | None) -> list[str]:
    ids = message.attributes.get(ATTACHMENTS_ATTRIBUTE) if message is not None else None
    return [str(value) for value in ids] if isinstance(ids, list) else []


def _store_session(session_id: str, creator: Creator, title: str) -> None:
    """Store a session at its first run, with its record; ``ChatDeleted`` if it was deleted.

    A socket that stored the chat earlier (``agent_app.guard.access.ensure_session``) lands here
    when the chat was deleted meanwhile, by another tab or process: it stays deleted.
    """
    if was_deleted(session_id):
        raise ChatDeleted(session_id)
    row, created = ChatSession.objects.get_or_create(
        pk=session_id,
        defaults={
            "owner_id": creator.owner_id,
            "browser_key": "" if creator.owner_id else creator.browser_key,
            "title": title,
        },
    )
    if created:
        record_creation(
            session_id, creator_key(creator.owner_id, creator.browser_key), row.created_at
        )


def _take_paused_run(request_id: str, now: datetime) -> bool:
    """Mark a paused run ``resumed``; False if it is not paused (any more).

    One conditional update, in the transaction that stores its continuation: of two
    processes (or two sockets) continuing one paused run, only one stores a continuation.
    """
    return bool(
        ChatRun.objects.filter(request_id=request_id, status=RunStatus.PAUSED).update(
            status=RunStatus.RESUMED, ended_at=now
        )
    )


@retried_on_deadlock
def end_run(
    session_id: str,
    request_id: str,
    status: RunStatus,
    *,
    last_seq: int,
    error: tuple[str, str] | None = None,
    usage: dict[str, int] | None = None,
    rows: list[tuple[AnyMessage, RowMeta]] | None = None,
    trace_context: str = "",
) -> None:
    """Record how a run ended, and the last ``seq`` its session sent.

    ``rows``: messages stored in the same transaction, after the session's last one (the
    run's final answer, ``RunSeams.at_end``): one write instead of two.
    Every run ends here, so its writes are single statements written out once per
    backend: the run's through ``statements.update``; the session's (a maximum and two
    sums) in the statement that bumps its version for ``rows`` (``bump_version``'s
    ``ending``), or alone when there are none (``_end_session_sql``).
    """
    now = timezone.now()
    fields: dict[str, Any] = {"status": status, "ended_at": now}
    if error is not None:
        fields["error_type"], fields["error_message"] = error
    if usage:
        fields["usage"] = usage
    if trace_context:  # a traced run's traceparent (``agent_app.telemetry.context``)
        fields["trace_context"] = trace_context
    db = default_connection()
    bumped = None
    with atomic():
        # The run's row is locked before the session's, the order recovery takes them in
        # (``recover_session``): the other order deadlocked with a worker settling the
        # session's runs at the same moment.
        ended = update(ChatRun, fields, request_id=request_id, status=RunStatus.RUNNING)
        counted = usage if ended and usage else {}
        ending = (
            last_seq,
            int(counted.get("input_tokens", 0)),
            int(counted.get("output_tokens", 0)),
        )
        if rows:  # one statement bumps the session's version and records the end
            bumped = bump_version(session_id, now, ending=ending)
            insert_rows(
                session_id, request_id, rows, after=bumped.last_position, follows=bumped.last_id
            )
        else:
            params = [ending[0], *ending, db_session_pk(session_id, db)]
            run(db, _end_session_sql(db.vendor), params)
        if ended:  # the run's webhook message, in the transaction of its end
            written = [message for message, _ in rows or ()]
            run_ended(session_id, request_id, status, error=error, usage=usage, written=written)
    if bumped is not None:
        remember(session_id, bumped.history_version, [message for message, _ in rows or ()])


@functools.cache
def _end_session_sql(vendor: str) -> str:
    """``end_run``'s session statement when it stores no message (built once)."""
    quote = default_connection().ops.quote_name
    return (
        f"UPDATE {quote(ChatSession._meta.db_table)} SET {session_end_sql(quote)} "
        f"WHERE {quote(ChatSession._meta.pk.column)} = %s"
    )


def user_message_for(error: BaseException) -> tuple[str, str]:
    """``(type, message)`` of a failure, fit to show a user.

    The exception's own text, as the runtime's JSON codec reports errors — except for
    database errors, whose text describes the server's tables and data: those become a
    generic sentence and stay in the log.
    """
    if isinstance(error, DatabaseError) or type(error).__module__.startswith(
        ("psycopg", "sqlite3")
    ):
        return (
            type(error).__name__,
            "The server could not store this conversation. Try again in a moment.",
        )
    text = str(error).strip() or type(error).__name__
    if len(text) > MAX_ERROR_TEXT:
        text = text[: MAX_ERROR_TEXT - 1] + "…"
    return type(error).__name__, text


def run_item(run: ChatRun) -> dict[str, Any]:
    """A run as the ``session`` and ``history_page`` frames list it."""
    error = None
    if run.error_type or run.error_message:
        error = {"type": run.error_type, "message": run.error_message}
    return {
        "request_id": run.request_id,
        "status": run.status,
        "kind": run.kind,
        "resumed_from": run.resumed_from or None,
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "error": error,
        "usage": run.usage,
        "attempts": run.attempts,
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")
