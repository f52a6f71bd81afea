"""``OrmPersistenceExtension``: a session's conversation lives in the database.

Every request starts from the stored rows: ``on_state`` restores them as messages and keeps
only what a provider accepts (``valid_history``: no result without its call, no tool batch
with missing results). The request's own messages are collected from
``MessageAppendedEvent``s (system messages never: instructions are rebuilt for every
request) and written in one transaction:

- in ``after_run``, all of them;
- on failure (``on_error``) and cancellation (``RunCancelledEvent``), the settled ones,
  which always include the user's message: what the user typed is never lost, while a
  half-finished tool batch is not kept.

Positions continue from the last stored row, so the rows of a session are its conversation
in order. All ORM work runs in worker threads (``database_sync_to_async``), never on the
event loop. Rows written by a cancelled request are complete before the cancellation
reaches the caller: the runtime awaits this hook before re-raising.

The rows are read once per session, not at every request: the extension keeps them as
messages, appends what each request writes, and at each request checks with one aggregate
query (row count, highest row id) that nobody else changed them. Another process writing
the session, or a message deleted in the admin, makes it read them again. A row is never
edited in place (the admin cannot change a message, and nothing else does), so those two
numbers catch every change that matters; messages are values the runtime never edits, so
the kept ones are handed to each request as they are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db import connection, transaction
from django.utils import timezone

from agent_app.models import TITLE_LENGTH, ChatMessage, ChatSession
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent, RunCancelledEvent
from zett_agent.history import valid_history
from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    MessageRole,
    SystemMessage,
)
from zett_agent.serialization import message_from_dict, message_to_dict, usage_to_dict

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.extensions.events import ExtensionEvent
    from zett_agent.model import ModelResponse

__all__ = ["OrmPersistenceExtension", "load_history", "message_from_row", "row_fields"]

logger = logging.getLogger(__name__)

#: Keys of ``message_to_dict`` output that have columns of their own.
_COLUMNS = ("reasoning", "tool_calls", "tool_call_id", "name", "success")


def row_fields(message: AnyMessage) -> dict[str, Any]:
    """The ``ChatMessage`` column values for ``message`` (everything but session/position)."""
    data = message_to_dict(message)
    fields: dict[str, Any] = {"role": data.pop("role"), "content": data.pop("content")}
    for column in _COLUMNS:
        if column in data:
            value = data.pop(column)
            fields[column] = "" if value is None and column in ("tool_call_id", "name") else value
    fields["extra"] = data
    return fields


def message_from_row(row: ChatMessage) -> AnyMessage:
    """Rebuild the message a row was saved from (``ValueError`` if the row is corrupt)."""
    data: dict[str, Any] = {**(row.extra or {}), "role": row.role, "content": row.content}
    if row.role == MessageRole.ASSISTANT:
        data["reasoning"] = row.reasoning
        data["tool_calls"] = row.tool_calls or []
    elif row.role == MessageRole.TOOL:
        data["tool_call_id"] = row.tool_call_id
        data["name"] = row.name
        data["success"] = True if row.success is None else row.success
    return message_from_dict(data)


@dataclass
class _StoredRows:
    """A session's rows as messages: what this extension last read or wrote."""

    #: ``(position, message)`` of every readable row, in order.
    messages: list[tuple[int, AnyMessage]]
    next_position: int
    #: ``(row count, highest row id)`` of the rows the messages came from.
    fingerprint: tuple[int, int | None]
    #: Whether a write since the rows were read found (or gave) the session a title.
    titled: bool = False


def _read_rows(session_id: str) -> _StoredRows:
    messages = []
    count, highest_id, next_position = 0, None, 0
    for row in ChatMessage.objects.filter(session_id=session_id).order_by("position"):
        count += 1
        highest_id = row.pk if highest_id is None else max(highest_id, row.pk)
        next_position = row.position + 1
        try:
            messages.append((row.position, message_from_row(row)))
        except (ValueError, KeyError, TypeError) as error:
            logger.error(
                "Skipping unreadable message row %s of session %s: %s", row.pk, session_id, error
            )
    return _StoredRows(messages, next_position, (count, highest_id))


def _current_rows(session_id: str, cached: _StoredRows | None) -> _StoredRows:
    """``cached`` if the session's rows are still exactly those, else the rows read anew."""
    if cached is not None and _fingerprint(session_id) == cached.fingerprint:
        return cached
    return _read_rows(session_id)


def _fingerprint(session_id: str) -> tuple[int, int | None]:
    """``(row count, highest row id)`` of a session's messages.

    Plain SQL on purpose: it runs at every request, and the ORM's aggregate path cost about
    fifteen times the query itself (0.4 ms against 0.03 ms on SQLite). Table and column
    names come from the model and are quoted by the backend; the session id is prepared
    by its own field, so the statement means the same on SQLite and PostgreSQL.
    """
    meta = ChatMessage._meta
    session = meta.get_field("session")
    quote = connection.ops.quote_name
    sql = (
        f"SELECT COUNT(*), MAX({quote(meta.pk.column)}) FROM {quote(meta.db_table)} "
        f"WHERE {quote(session.column)} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [session.target_field.get_db_prep_value(session_id, connection)])
        count, highest_id = cursor.fetchone()
    return count, highest_id


@database_sync_to_async
def load_history(session_id: str) -> list[dict[str, Any]]:
    """The persisted non-system messages of a session as JSON dicts, oldest first."""
    return [
        message_to_dict(message)
        for _, message in _read_rows(session_id).messages
        if not isinstance(message, SystemMessage)
    ]


@dataclass
class _RequestLog:
    """What one request has appended so far, waiting to be written."""

    next_position: int
    messages: list[AnyMessage] = field(default_factory=list)
    #: Usage of the model call behind each assistant message, by ``id(message)``.
    usage: dict[int, dict[str, int]] = field(default_factory=dict)


class OrmPersistenceExtension(AgentExtension):
    """Restores a session's history from the ORM and stores each request's messages."""

    #: Restore before other extensions look at the context in their own ``on_state``.
    priority = 10

    def __init__(self) -> None:
        self._requests: dict[str, _RequestLog] = {}
        #: Rows by session (the app gives each session an agent, so this holds one).
        self._rows: dict[str, _StoredRows] = {}

    async def on_state(self, context: AgentRunContext) -> None:
        session_id = context.session_id
        stored = await database_sync_to_async(_current_rows)(session_id, self._rows.get(session_id))
        self._rows[session_id] = stored
        history = valid_history(
            message
            for _, message in stored.messages
            if message.include_in_messages and not isinstance(message, SystemMessage)
        )
        self._requests[context.request_id] = _RequestLog(stored.next_position)
        current = list(context.state.messages)
        system = [m for m in current if isinstance(m, SystemMessage)]
        rest = [m for m in current if not isinstance(m, SystemMessage)]
        context.replace_messages([*system, *history, *rest], emit_new=False)

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        log = self._requests.get(context.request_id)
        if log is None:
            return
        if isinstance(event, MessageAppendedEvent):
            message = event.message
            if message.persist and not isinstance(message, SystemMessage):
                log.messages.append(message)
        elif isinstance(event, RunCancelledEvent):
            await self._write(context, settled_only=True)

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        log = self._requests.get(context.request_id)
        if log is not None:
            log.usage[id(response.message)] = usage_to_dict(response.usage)

    async def after_run(self, context: AgentRunContext, result: AssistantMessage) -> None:
        await self._write(context, settled_only=False)

    async def on_error(self, context: AgentRunContext, error: Exception) -> None:
        await self._write(context, settled_only=True)

    async def _write(self, context: AgentRunContext, *, settled_only: bool) -> None:
        log = self._requests.pop(context.request_id, None)
        if log is None or not log.messages:
            return
        messages = valid_history(log.messages) if settled_only else log.messages
        rows = []
        for offset, message in enumerate(messages):
            usage = log.usage.get(id(message)) if isinstance(message, AssistantMessage) else None
            rows.append(
                ChatMessage(
                    session_id=context.session_id,
                    position=log.next_position + offset,
                    request_id=context.request_id,
                    usage=usage,
                    **row_fields(message),
                )
            )
        session_id = context.session_id
        # Forgotten first: if the write fails, the next request reads the rows anew.
        stored = self._rows.pop(session_id, None)
        titled = stored is not None and stored.titled
        titled = await database_sync_to_async(_save_rows)(session_id, rows, titled)
        if stored is not None and all(row.pk is not None for row in rows):
            stored.titled = titled
            stored.messages.extend(zip((row.position for row in rows), messages, strict=True))
            stored.next_position = rows[-1].position + 1
            # Row ids only grow, so the new rows hold the session's highest id.
            stored.fingerprint = (stored.fingerprint[0] + len(rows), rows[-1].pk)
            self._rows[session_id] = stored


def _save_rows(session_id: str, rows: list[ChatMessage], titled: bool) -> bool:
    """Insert ``rows`` and touch their session (created if missing) in one transaction.

    A session without a title takes it from the first user message written, unless
    ``titled`` says an earlier write already saw to it. Returns whether it has one now.
    """
    first_user = next((row for row in rows if row.role == MessageRole.USER), None)
    title = _title(first_user.content) if first_user is not None and not titled else ""
    with transaction.atomic():
        if not ChatSession.objects.filter(pk=session_id).update(updated_at=timezone.now()):
            ChatSession.objects.get_or_create(pk=session_id, defaults={"title": title})
        elif title:
            ChatSession.objects.filter(pk=session_id, title="").update(title=title)
        ChatMessage.objects.bulk_create(rows)
    return titled or bool(title)


def _title(content: Any) -> str:
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    text = " ".join(str(content).split())
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"
