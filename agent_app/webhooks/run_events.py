"""The run events of the outbox: ``run.completed``, ``run.failed``, ``run.waiting``.

Called where the change is written, inside its transaction: a run's end
(``agent_app.durable.runs.end_run``), a run settled by recovery (interrupted or expired),
a question or approval stored (``agent_app.durable.waits.record_wait``). Every run end
other than ``completed`` is ``run.failed``, with its ``status`` (``failed``,
``cancelled``, ``interrupted``, ``expired``, ``budget_exceeded``) and ``error``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from agent_app.assistants import registry
from agent_app.models import ChatMessage, ChatRun, ChatSession, ReplyWait, RunStatus, WaitKind
from agent_app.webhooks.events import emit
from zett_agent.messages import AssistantMessage, content_text

__all__ = ["MAX_ANSWER_CHARS", "TERMINAL", "answer_of", "run_ended", "wait_opened"]

#: Longest answer a ``run.completed`` message carries (the chat holds all of it).
MAX_ANSWER_CHARS = 32_000
#: The statuses a run ends in (``paused`` and ``resumed`` are no end).
TERMINAL = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.INTERRUPTED,
        RunStatus.EXPIRED,
        RunStatus.BUDGET_EXCEEDED,
    }
)


def run_ended(
    session_id: str,
    request_id: str,
    status: str,
    *,
    error: tuple[str, str] | None = None,
    usage: dict[str, int] | None = None,
    written: Sequence[Any] = (),
) -> None:
    """Queue ``run.completed`` or ``run.failed`` for a run that ended with ``status``;
    ``written``: the messages stored with its end (its answer, when it has one)."""
    if status not in TERMINAL:
        return
    event = "run.completed" if status == RunStatus.COMPLETED else "run.failed"

    def data() -> dict[str, Any]:
        item = _run_data(session_id, request_id)
        item["status"] = str(status)
        texts = [
            content_text(message.content)
            for message in written
            if isinstance(message, AssistantMessage)
        ]
        answer = next((text for text in reversed(texts) if text), None) or answer_of(request_id)
        item["answer"] = _cut(answer)
        item["usage"] = usage or {}
        item["error"] = None if error is None else {"type": error[0], "message": error[1]}
        return item

    emit(event, data)


def wait_opened(wait: ReplyWait, item: Callable[[], dict[str, Any]]) -> None:
    """Queue ``run.waiting`` for a question or approval that just opened; ``item``
    gives the wait as the chat socket lists it (``durable.waits.pending_item``)."""
    if wait.kind not in (WaitKind.ASK_USER, WaitKind.APPROVAL):
        return  # a host-page tool's call waits for a page's script, not a person

    def data() -> dict[str, Any]:
        fields = _run_data(str(wait.session_id), wait.request_id)
        fields["status"] = "waiting"
        fields["pending"] = [item()]
        return fields

    emit("run.waiting", data)


def _run_data(session_id: str, request_id: str) -> dict[str, Any]:
    """The fields every run event has: one statement, written out once (a run's end pays
    for it when a webhook listens, so not an ORM query built each time)."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(_run_sql(db.vendor), [request_id])
        row = cursor.fetchone() or ("", "", None)
    resumed_from, assistant, owner_id = row
    return {
        "chat_id": str(session_id),
        "request_id": request_id,
        "resumed_from": resumed_from or None,
        "assistant": assistant or registry.default_id() or "",
        "user_id": owner_id,
    }


@functools.cache
def _run_sql(vendor: str) -> str:
    """``_run_data``'s statement on one database backend (built once)."""
    quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
    runs, chats = ChatRun._meta, ChatSession._meta
    run_table, chat_table = quote(runs.db_table), quote(chats.db_table)
    return (
        f"SELECT {run_table}.{quote(runs.get_field('resumed_from').column)}, "
        f"{chat_table}.{quote(chats.get_field('assistant').column)}, "
        f"{chat_table}.{quote(chats.get_field('owner').column)} "
        f"FROM {run_table} INNER JOIN {chat_table} ON {chat_table}.{quote(chats.pk.column)} "
        f"= {run_table}.{quote(runs.get_field('session').column)} "
        f"WHERE {run_table}.{quote(runs.get_field('request_id').column)} = %s"
    )


def answer_of(request_id: str) -> str | None:
    """The text of the run's last answer that has text (None when it wrote none)."""
    rows = (
        ChatMessage.objects.filter(request_id=request_id, role="assistant")
        .order_by("-position")
        .values_list("content", flat=True)
    )
    for content in rows[:20]:
        text = _text(content)
        if text:
            return text
    return None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and "text" in part
        )
    return "" if content is None else str(content)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_ANSWER_CHARS:
        return text
    return text[: MAX_ANSWER_CHARS - 1] + "…"
