"""A session's messages in the database: writing rows once complete, restoring history.

Rows are written one complete message at a time (write-ahead: the user's message before the
model is called, each answer and tool result as soon as the runtime appends it), never
batched at the end of a request, so a crash loses at most the output still streaming.

Positions: every write runs in one transaction that first bumps the session's
``history_version`` (taking the row's write lock on PostgreSQL, the database's on SQLite),
then reads the highest position and inserts after it. Two writers of one session — which
the run lease already prevents — would queue on that lock instead of colliding on
``(session, position)``.

Restoring: a request's history is the session's stored live branch (not superseded), as
messages a provider accepts (``valid_history``). Reading and checking every row at every
request would make each turn cost O(session length), so the process keeps each session's
restored history in memory (``_CACHE``) with the ``history_version`` it reflects: one
primary-key read tells whether it is current; rows this process writes are appended to it;
any other change (another process, a regenerated answer) bumps the version and the rows are
read again. Only the part written since the last check is validated. A message saved
through the ORM instead (``ChatMessage.objects.create``, ``save()``: an import script, a
test seeding history) bumps the version too (``message_saved_through_the_orm``); the app's
own writes are SQL statements and send no signal. ``QuerySet.update``, ``bulk_create`` and
deletes send none either: code that changes rows that way must bump ``history_version``.

Every function here is synchronous ORM code, run through ``database_sync_to_async``, which
runs them one at a time in one thread: the cache is only touched from there.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import F
from django.utils import timezone

from agent_app.durable.titles import short_title
from agent_app.models import (
    STAFF_ROLE,
    ChatMessage,
    ChatRun,
    ChatSession,
    RunStatus,
)
from agent_app.models.statements import ONE, insert, moment_param, new, run, uuid_param
from agent_app.models.transactions import atomic
from agent_app.process.connection import default_connection
from zett_agent.history import valid_history
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    MessageRole,
    SystemMessage,
    ToolMessage,
)
from zett_agent.serialization import message_from_dict, message_to_dict

__all__ = [
    "Appended",
    "Bumped",
    "RowMeta",
    "append_rows",
    "bump_version",
    "db_session_pk",
    "forget",
    "insert_rows",
    "message_from_row",
    "message_linked",
    "open_calls",
    "read_messages",
    "remember",
    "restore_history",
    "row_fields",
    "staff_words",
    "storable",
    "title_from",
    "update_tool_result",
]

logger = logging.getLogger(__name__)

#: Keys of ``message_to_dict`` output that have columns of their own.
_COLUMNS = ("reasoning", "tool_calls", "tool_call_id", "name", "success")
#: Sessions whose restored history this process keeps.
CACHED_SESSIONS = 512


@dataclass(slots=True)
class RowMeta:
    """What a row says about its message beyond the message itself."""

    steering: bool = False
    partial: bool = False
    stop_reason: str = ""
    usage: dict[str, int] | None = None


@dataclass(slots=True)
class Appended:
    """Rows just written: their positions and time."""

    positions: list[int]
    created_at: datetime


def row_fields(message: AnyMessage) -> dict[str, Any]:
    """The ``ChatMessage`` column values for ``message`` (everything but session/position).

    Text a database refuses (NUL on PostgreSQL, unpaired surrogates anywhere) cannot come
    from a client (frames holding it are refused), but a model or a tool may produce it:
    such characters are stored as U+FFFD, the same on every database.
    """
    data = storable(message_to_dict(message))
    fields: dict[str, Any] = {"role": data.pop("role"), "content": data.pop("content")}
    for column in _COLUMNS:
        if column in data:
            value = data.pop(column)
            fields[column] = "" if value is None and column in ("tool_call_id", "name") else value
    fields["extra"] = data
    return fields


def message_from_row(row: ChatMessage) -> AnyMessage:
    """Rebuild the message a row was saved from (``ValueError`` if the row is corrupt).

    A staff member's message (role ``staff``, ``agent_app.people``) becomes what the model
    reads of it: an ``AgentMessage`` saying what the human agent told the customer.
    """
    if row.role == STAFF_ROLE:
        return staff_words(row)
    data: dict[str, Any] = {**(row.extra or {}), "role": row.role, "content": row.content}
    if row.role == MessageRole.ASSISTANT:
        data["reasoning"] = row.reasoning
        data["tool_calls"] = row.tool_calls or []
    elif row.role == MessageRole.TOOL:
        data["tool_call_id"] = row.tool_call_id
        data["name"] = row.name
        data["success"] = True if row.success is None else row.success
    return message_from_dict(data)


def staff_words(row: ChatMessage) -> AgentMessage:
    """The model's view of a staff member's message: the human agent's own words."""
    staff = (row.extra or {}).get("staff") or {}
    name = staff.get("name") or "a member of staff"
    text = row.content if isinstance(row.content, str) else str(row.content)
    return AgentMessage(
        f"[The human support agent {name} wrote to the customer in this chat:]\n{text}",
        attributes={"staff": {"name": name}},
    )


def storable(value: Any) -> Any:
    """``value`` with NUL and unpaired surrogates in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        if "\x00" in value or (not value.isascii() and not _encodable(value)):
            return _REFUSED_TEXT.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


#: NUL, and surrogate code points (a Python string holds them only unpaired).
_REFUSED_TEXT = re.compile("[\x00\ud800-\udfff]")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def title_from(content: Any) -> str:
    """A session title from the first user message (``agent_app.durable.titles``)."""
    return short_title(content)


# --- writing ---------------------------------------------------------------------------


def append_rows(
    session_id: str, request_id: str, entries: list[tuple[AnyMessage, RowMeta]]
) -> Appended:
    """Store ``entries`` after the session's last message, in one transaction."""
    now = timezone.now()
    with atomic():
        bumped = bump_version(session_id, now)
        rows = insert_rows(
            session_id, request_id, entries, after=bumped.last_position, follows=bumped.last_id
        )
    remember(session_id, bumped.history_version, [message for message, _ in entries])
    return Appended([row.position for row in rows], rows[0].created_at if rows else now)


def update_tool_result(session_id: str, message: ToolMessage) -> None:
    """Rewrite the stored result of ``message``'s call as ``message`` (same row, same place)."""
    ChatMessage.objects.filter(
        session_id=session_id, role="tool", tool_call_id=message.tool_call_id, superseded=False
    ).update(**row_fields(message))
    forget(session_id)


class Bumped(NamedTuple):
    """A session row just locked and bumped (``bump_version``)."""

    history_version: int
    seq_reserved: int
    title: str
    #: The highest position of the session's shown path (None: no message yet).
    last_position: int | None
    #: The primary key of the message there: what the caller's first row follows.
    last_id: int | None
    #: Whether a member of staff has taken the chat over (``agent_app.people``), read
    #: under the row's lock: ``begin_run``'s check at no statement of its own.
    taken_over: bool = False
    #: How many of the session's runs are still ``running`` or ``paused`` (counted only
    #: when ``bump_version`` was asked to, else 0).
    unsettled_runs: int = 0
    #: The values of the caller's own expressions (``bump_version``'s ``also``).
    also: tuple[Any, ...] = ()


def bump_version(
    session_id: str,
    now: datetime,
    *,
    seq_block: int = 0,
    count_unsettled: bool = False,
    ending: tuple[int, int, int] | None = None,
    also: tuple[str, tuple[Any, ...]] | None = None,
) -> Bumped:
    """Lock the session row for this transaction: bump its ``history_version`` (and reserve
    ``seq_block`` numbers); return the row's new values.

    One ``UPDATE … RETURNING`` (PostgreSQL, and SQLite since 3.35) that also reads the
    highest message position (an index lookup), where the caller's rows go next, whether
    the chat is taken over, and with
    ``count_unsettled`` the runs no ending has settled (``agent_app.durable.runs.begin_run``'s
    check, read under the row's lock at no extra round trip): this runs for every stored
    message, so it is written out rather than built by the ORM each call. ``ending``:
    ``(last_seq, input_tokens, output_tokens)`` of a run's end (``end_run``), written by
    the same statement (``SESSION_END``) instead of a second update of the row.
    ``also``: ``(expressions, their parameters)`` the statement returns as well, read under
    the row's lock (``Bumped.also``): what ``begin_run``'s caller reads of the chat.
    """
    db = default_connection()
    params = [seq_block, _db_time(now, db)]
    if ending is not None:
        last_seq, tokens_in, tokens_out = ending
        params += [last_seq, last_seq, tokens_in, tokens_out]
    params.append(db_session_pk(session_id, db))
    if count_unsettled:  # the RETURNING clause's placeholders come after the WHERE clause's
        params += [RunStatus.RUNNING.value, RunStatus.PAUSED.value]
    expressions = ""
    if also is not None:
        expressions, more = also
        params += more
    sql = _bump_sql(db.vendor, count_unsettled, ending is not None, expressions)
    row = run(db, sql, params, ONE)
    if row is None:
        raise ChatSession.DoesNotExist(f"Session {session_id} is not stored")
    unsettled = row[6] if count_unsettled else 0
    return Bumped(*row[:5], row[5] is not None, unsettled, row[6 + count_unsettled :])


#: A run's end on its session's row: the last ``seq`` sent (a maximum) and the tokens
#: used (two sums); its placeholders ``last_seq, last_seq, input, output``.
SESSION_END = (
    "{seq} = CASE WHEN {seq} < %s THEN %s ELSE {seq} END, "
    "{tokens_in} = {tokens_in} + %s, {tokens_out} = {tokens_out} + %s"
)


def session_end_sql(quote: Callable[[str], str]) -> str:
    """``SESSION_END`` with the columns quoted for one backend."""
    return SESSION_END.format(
        seq=quote("last_event_seq"),
        tokens_in=quote("input_tokens"),
        tokens_out=quote("output_tokens"),
    )


@functools.cache
def _bump_sql(vendor: str, count_unsettled: bool, ending: bool = False, also: str = "") -> str:
    """The statement of ``bump_version`` on one database backend (built once)."""
    quote = default_connection().ops.quote_name
    version, reserved = quote("history_version"), quote("seq_reserved")
    session, message, run = ChatSession._meta, ChatMessage._meta, ChatRun._meta
    table, pk, position = quote(session.db_table), quote(session.pk.column), quote("position")
    # The shown path's last message: an index lookup (``unique_shown_position_per_session``).
    last_shown = (
        f"FROM {quote(message.db_table)} "
        f"WHERE {quote(message.get_field('session').column)} = {table}.{pk} "
        f"AND NOT {quote('superseded')} ORDER BY {position} DESC LIMIT 1"
    )
    returning = (
        f"{version}, {reserved}, {quote('title')}, "
        f"(SELECT {position} {last_shown}), "
        f"(SELECT {quote(message.pk.column)} {last_shown}), "
        # The column itself: SQLite (3.40) answers ``IS NOT NULL`` wrongly in RETURNING.
        f"{quote('taken_over_at')}"
    )
    if count_unsettled:
        returning += (
            f", (SELECT COUNT(*) FROM {quote(run.db_table)} "
            f"WHERE {quote(run.get_field('session').column)} = {table}.{pk} "
            f"AND {quote(run.get_field('status').column)} IN (%s, %s))"
        )
    if also:
        returning += f", {also}"
    end = f", {session_end_sql(quote)}" if ending else ""
    return (
        f"UPDATE {table} SET {version} = {version} + 1, "
        f"{reserved} = {reserved} + %s, {quote('updated_at')} = %s{end} "
        f"WHERE {pk} = %s RETURNING {returning}"
    )


def db_session_pk(session_id: str, db: Any = None) -> Any:
    """``session_id`` as the database stores a session's primary key (for raw SQL)."""
    return uuid_param(session_id, db or default_connection())


def _db_time(moment: datetime, db: Any) -> Any:
    if type(moment) is datetime and moment.utcoffset() is not None:
        return moment_param(moment, db)  # what the field's ``get_db_prep_value`` sends
    return ChatSession._meta.get_field("updated_at").get_db_prep_value(moment, db)


#: ``insert_rows``'s default ``follows``: the shown message at ``after``, read first.
LOOK_UP: Any = object()


def insert_rows(
    session_id: str,
    request_id: str,
    entries: list[tuple[AnyMessage, RowMeta]],
    *,
    after: int | None,
    follows: int | None = LOOK_UP,
    version: int = 1,
) -> list[ChatMessage]:
    """Insert rows after position ``after`` (``bump_version``'s ``last_position``, None
    for an empty session); the caller holds the session's lock from that bump.

    ``follows``: the primary key of the message the first row comes after (``last_id``
    of the same bump); read when not given. ``version``: the first row is that version
    of its turn, of as many (``agent_app.durable.branches``). Each row follows the one
    before it, so a batch of several rows is written a row at a time (the ids are the
    database's).
    """
    start = 0 if after is None else after + 1
    if follows is LOOK_UP:
        follows = _shown_id(session_id, after)
    rows = [
        new(
            ChatMessage,
            session_id=session_id,
            position=start + offset,
            request_id=request_id,
            usage=meta.usage,
            steering=meta.steering,
            partial=meta.partial,
            stop_reason=meta.stop_reason,
            **row_fields(message),
        )
        for offset, (message, meta) in enumerate(entries)
    ]
    if rows:
        rows[0].version = rows[0].versions = version
    if len(rows) == 1:
        rows[0].follows = follows
        insert(rows, returning_pk=True)
        return rows
    for row in rows:
        row.follows = follows
        insert([row], returning_pk=True)
        follows = row.pk
    return rows


def _shown_id(session_id: str, position: int | None) -> int | None:
    """The primary key of the shown message at ``position`` (None: none, or no position)."""
    if position is None:
        return None
    return (
        ChatMessage.objects.filter(session_id=session_id, superseded=False, position=position)
        .values_list("pk", flat=True)
        .first()
    )


def open_calls(session_id: str) -> tuple[AssistantMessage | None, list[str]]:
    """The last tool-calling answer of the session and its calls that have no result.

    Only the newest tool batch can be open: every run closes its own calls when it ends,
    and recovery closes those of a run whose process died.
    """
    last = (
        ChatMessage.objects.filter(session_id=session_id, superseded=False, role="assistant")
        .exclude(tool_calls=[])
        .order_by("-position")
        .first()
    )
    if last is None:
        return None, []
    message = message_from_row(last)
    assert isinstance(message, AssistantMessage)
    answered = set(
        ChatMessage.objects.filter(
            session_id=session_id, superseded=False, role="tool", position__gt=last.position
        ).values_list("tool_call_id", flat=True)
    )
    return message, [call.id for call in message.tool_calls if call.id not in answered]


# --- restoring -------------------------------------------------------------------------


@dataclass(slots=True)
class _Restored:
    """One session's restored history as this process last saw it."""

    version: int
    #: Model-facing messages of the live branch; ``messages[:clean]`` already validated
    #: and ending at a closed point (no tool batch open across it).
    messages: list[AnyMessage] = field(default_factory=list)
    clean: int = 0


_CACHE: OrderedDict[str, _Restored] = OrderedDict()


def restore_history(
    session_id: str, *, keep_open_tail: bool = False, version: int | None = None
) -> list[AnyMessage]:
    """The session's history as a provider accepts it (a new list the caller may keep).

    ``keep_open_tail`` keeps a last tool batch whose results are incomplete, for resuming
    a run that stopped while it waited. ``version``: the session's ``history_version`` if
    the caller has just written it (in this thread), which saves reading it.
    """
    if version is None:
        version = (
            ChatSession.objects.filter(pk=session_id)
            .values_list("history_version", flat=True)
            .first()
        )
    if version is None:
        _CACHE.pop(session_id, None)
        return []
    restored = _CACHE.get(session_id)
    if restored is None or restored.version != version:
        restored = _Restored(version, read_messages(session_id))
        _CACHE[session_id] = restored
    _CACHE.move_to_end(session_id)
    while len(_CACHE) > CACHED_SESSIONS:
        _CACHE.popitem(last=False)
    _validate(restored)
    if not keep_open_tail:
        return restored.messages[: restored.clean] + valid_history(
            restored.messages[restored.clean :]
        )
    return list(restored.messages)


def message_saved_through_the_orm(
    sender: type[ChatMessage], instance: ChatMessage, raw: bool = False, **kwargs: Any
) -> None:
    """``post_save`` receiver: a row written past ``agent_app.durable.store`` makes caches stale."""
    if raw:  # loaddata: the fixture carries its sessions' versions
        return
    ChatSession.objects.filter(pk=instance.session_id).update(
        history_version=F("history_version") + 1
    )


def message_linked(
    sender: type[ChatMessage], instance: ChatMessage, raw: bool = False, **kwargs: Any
) -> None:
    """``pre_save`` receiver: a new row saved through the ORM without ``follows`` follows
    the shown message before its position (as the app's own writes do)."""
    if raw or instance.pk is not None or instance.follows is not None or not instance.position:
        return
    instance.follows = (
        ChatMessage.objects.filter(
            session_id=instance.session_id, superseded=False, position__lt=instance.position
        )
        .order_by("-position")
        .values_list("pk", flat=True)
        .first()
    )


def read_messages(session_id: str) -> list[AnyMessage]:
    """Every current message of the session, in order (what a first restore reads)."""
    messages = []
    for row in ChatMessage.objects.filter(session_id=session_id, superseded=False).order_by(
        "position"
    ):
        try:
            message = message_from_row(row)
        except (ValueError, KeyError, TypeError) as error:
            logger.error(
                "Skipping unreadable message row %s of session %s: %s", row.pk, session_id, error
            )
            continue
        if message.include_in_messages and not isinstance(message, SystemMessage):
            messages.append(message)
    return messages


def _validate(restored: _Restored) -> None:
    """Validate what was added since the last check, up to its last closed point.

    A trailing tool batch that is still open stays unvalidated (it may be resumed, or
    closed by the next write); everything before it becomes the clean prefix.
    """
    tail = restored.messages[restored.clean :]
    if not tail:
        return
    settled = _closed_length(tail)
    if settled == 0:
        return
    checked = valid_history(tail[:settled])
    restored.messages[restored.clean :] = checked + tail[settled:]
    restored.clean += len(checked)


def _closed_length(messages: list[AnyMessage]) -> int:
    """How many leading ``messages`` end at a point where no tool batch is open."""
    settled = 0
    open_ids: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            open_ids = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            open_ids.discard(message.tool_call_id)
        elif open_ids:
            open_ids = set()  # a batch that stays incomplete: valid_history drops it
        if not open_ids:
            settled = index + 1
    return settled


def remember(session_id: str, version: int, messages: list[AnyMessage]) -> None:
    """Append rows this process just wrote to its restored history, if it is current."""
    restored = _CACHE.get(session_id)
    if restored is None:
        return
    if restored.version != version - 1:
        del _CACHE[session_id]
        return
    restored.version = version
    restored.messages.extend(
        message
        for message in messages
        if message.include_in_messages and not isinstance(message, SystemMessage)
    )


def forget(session_id: str) -> None:
    """Drop the session's restored history (its rows changed in a way rows cannot tell)."""
    _CACHE.pop(session_id, None)
