"""How a question or approval ended, for operators: its span and its metrics.

A wait may end in a process that never saw it asked (the asking worker died, the reply
came the next morning to another one), so everything is read from its stored row: when it
was asked, what kind, which run asked (whose stored traceparent is the span's parent).
Called once per wait end from the reply desk, the run (expiry) and recovery; with neither
tracing nor metrics on it returns before touching the database.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from agent_app.telemetry import metrics, tracing
from agent_app.telemetry.context import stored_trace_context

__all__ = [
    "expired_waits",
    "outcome_of_reply",
    "person_label",
    "replier",
    "wait_ended",
    "wait_ended_sync",
]

#: Who is replying, as the socket that took the reply set it (``person_label``): the
#: wait span's ``zett.wait.answered_by``. A span attribute only, never a metric label.
replier: ContextVar[str | None] = ContextVar("zett_replier", default=None)


def person_label(user: Any) -> str:
    """``user:<pk>`` for a signed-in user, ``anonymous`` otherwise."""
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.pk}"
    return "anonymous"


def outcome_of_reply(kind: str, payload: Any) -> str:
    """``approved`` / ``denied`` for an approval's reply, ``answered`` for a question's."""
    if kind == "approval":
        approved = isinstance(payload, dict) and payload.get("approved") is True
        return "approved" if approved else "denied"
    return "answered"


def wait_ended_sync(
    session_id: str,
    tool_call_id: str,
    outcome: str | None,
    *,
    reply: Any = None,
    answered_by: str | None = None,
    only_open: bool = False,
) -> None:
    """Record the end of a call's latest wait (``outcome`` None: from ``reply``);
    ``only_open``: unless it was answered already (its end is recorded then)."""
    traced = tracing.active()
    if not traced and not metrics.ENABLED:
        return
    from agent_app.models import ReplyWait

    wait = (
        ReplyWait.objects.filter(session_id=session_id, tool_call_id=tool_call_id)
        .order_by("-created_at", "-pk")
        .first()
    )
    if wait is None or (only_open and wait.status != "open"):
        return
    kind = str(wait.kind)
    if outcome is None:
        outcome = outcome_of_reply(kind, reply)
    ended_at = timezone.now()
    metrics.wait_ended(kind, outcome, (ended_at - wait.created_at).total_seconds())
    if not traced:
        return
    from zett_agent.extensions.tracing import record_wait_span

    record_wait_span(
        kind=kind,
        outcome=outcome,
        requested_at=wait.created_at,
        ended_at=ended_at,
        conversation_id=session_id,
        tool_name=wait.tool_name or None,
        tool_call_id=tool_call_id,
        answered_by=answered_by,
        expires_at=wait.expires_at,
        parent=stored_trace_context(wait.request_id),
    )


_wait_ended = database_sync_to_async(wait_ended_sync)


async def wait_ended(
    session_id: str,
    tool_call_id: str,
    outcome: str | None,
    *,
    reply: Any = None,
    answered_by: str | None = None,
) -> None:
    """``wait_ended_sync`` from async code (nothing at all when both halves are off)."""
    if not tracing.active() and not metrics.ENABLED:
        return
    await _wait_ended(session_id, tool_call_id, outcome, reply=reply, answered_by=answered_by)


def _cancelled(session_id: str, tool_call_ids: list[str]) -> None:
    for tool_call_id in tool_call_ids:
        wait_ended_sync(session_id, tool_call_id, "cancelled", only_open=True)


_cancelled_async = database_sync_to_async(_cancelled)


async def cancelled_waits(session_id: str, tool_call_ids: list[str]) -> None:
    """A run that stops (or fails) leaves these waits unanswered: they end ``cancelled``.

    Called before the run's end closes them, so a wait already answered is not counted
    twice."""
    if tool_call_ids and (tracing.active() or metrics.ENABLED):
        await _cancelled_async(session_id, tool_call_ids)


def _expired_by_recovery(session_id: str, request_ids: list[str]) -> None:
    from agent_app.models import ReplyWait, WaitStatus

    calls = ReplyWait.objects.filter(
        session_id=session_id, request_id__in=request_ids, status=WaitStatus.EXPIRED
    ).values_list("tool_call_id", flat=True)
    for tool_call_id in list(calls):
        wait_ended_sync(session_id, tool_call_id, "expired")


_expired = database_sync_to_async(_expired_by_recovery)


async def expired_waits(session_id: str, settled: list[Any]) -> None:
    """The waits of paused runs recovery settled as ``expired`` (``recovery.Settled``)."""
    if not tracing.active() and not metrics.ENABLED:
        return
    request_ids = [outcome.request_id for outcome in settled if outcome.status == "expired"]
    if request_ids:
        await _expired(session_id, request_ids)
