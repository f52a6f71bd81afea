"""``OrmPersistenceExtension``: a session's conversation lives in the database, not in memory.

Every request starts from the database: ``on_state`` loads the session's rows, turns them
back into messages and keeps only what a provider accepts (``valid_history``: no result
without its call, no tool batch with missing results). The request's own messages are
collected from ``MessageAppendedEvent``s (system messages never: instructions are rebuilt
for every request) and written in one transaction:

- in ``after_run``, all of them;
- on failure (``on_error``) and cancellation (``RunCancelledEvent``), the settled ones,
  which always include the user's message: what the user typed is never lost, while a
  half-finished tool batch is not kept.

Positions continue from the last stored row, so the rows of a session are its conversation
in order. All ORM work runs in worker threads (``database_sync_to_async``), never on the
event loop. Rows written by a cancelled request are complete before the cancellation
reaches the caller: the runtime awaits this hook before re-raising.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db import transaction
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


def _stored_messages(session_id: str) -> list[tuple[int, AnyMessage]]:
    messages = []
    for row in ChatMessage.objects.filter(session_id=session_id).order_by("position"):
        try:
            messages.append((row.position, message_from_row(row)))
        except (ValueError, KeyError, TypeError) as error:
            logger.error(
                "Skipping unreadable message row %s of session %s: %s", row.pk, session_id, error
            )
    return messages


@database_sync_to_async
def load_history(session_id: str) -> list[dict[str, Any]]:
    """The persisted non-system messages of a session as JSON dicts, oldest first."""
    return [
        message_to_dict(message)
        for _, message in _stored_messages(session_id)
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

    async def on_state(self, context: AgentRunContext) -> None:
        stored = await database_sync_to_async(_stored_messages)(context.session_id)
        history = valid_history(
            message
            for _, message in stored
            if message.include_in_messages and not isinstance(message, SystemMessage)
        )
        next_position = stored[-1][0] + 1 if stored else 0
        self._requests[context.request_id] = _RequestLog(next_position)
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
        await database_sync_to_async(_save_rows)(context.session_id, rows)


def _save_rows(session_id: str, rows: list[ChatMessage]) -> None:
    with transaction.atomic():
        session, _ = ChatSession.objects.select_for_update().get_or_create(pk=session_id)
        ChatMessage.objects.bulk_create(rows)
        session.updated_at = timezone.now()
        update = ["updated_at"]
        if not session.title:
            first_user = next((r for r in rows if r.role == MessageRole.USER), None)
            if first_user is not None:
                session.title = _title(first_user.content)
                update.append("title")
        session.save(update_fields=update)


def _title(content: Any) -> str:
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    text = " ".join(str(content).split())
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"
