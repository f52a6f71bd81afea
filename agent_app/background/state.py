"""Where a run stands, read from the database alone (any worker answers the same).

A run that was paused (its process died while it waited) and then answered is continued
by another run (``resumed_from``); the state of the first is the state of the last run of
that chain: the request id a program was given keeps answering until the work is done.

``status`` is the run's (``running``, ``completed``, ``failed``, ``cancelled``,
``interrupted``, ``expired``, ``budget_exceeded``), except that a run waiting for a
person — a question or approval open and in time, or a paused run — is ``waiting``, with
those waits in ``pending`` (as the chat socket lists them). ``answer`` is the text of the
last answer it wrote (a stopped answer's partial text too), ``usage`` the tokens of the
whole chain, ``error`` how it failed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.utils import timezone

from agent_app.durable.waits import pending_item
from agent_app.models import ChatRun, ReplyWait, RunStatus, WaitStatus
from agent_app.webhooks.run_events import answer_of

__all__ = ["WAITING", "run_state"]

#: The ``status`` of a run that waits for a person's answer.
WAITING = "waiting"
#: Longest chain of continuations followed.
MAX_CHAIN = 50


def _chain(session_id: str, request_id: str) -> list[ChatRun]:
    run = ChatRun.objects.filter(session_id=session_id, request_id=request_id).first()
    if run is None:
        return []
    chain = [run]
    while run.status == RunStatus.RESUMED and len(chain) < MAX_CHAIN:
        later = (
            ChatRun.objects.filter(session_id=session_id, resumed_from=run.request_id)
            .order_by("started_at")
            .first()
        )
        if later is None:
            break
        chain.append(later)
        run = later
    return chain


def run_state(session_id: str, request_id: str) -> dict[str, Any] | None:
    """The state of the run ``request_id`` of ``session_id`` (None: no such run)."""
    chain = _chain(session_id, request_id)
    if not chain:
        return None
    last = chain[-1]
    status = str(last.status)
    pending: list[dict[str, Any]] = []
    if last.status in (RunStatus.RUNNING, RunStatus.PAUSED):
        waits = (
            ReplyWait.objects.filter(
                session_id=session_id,
                request_id__in=[run.request_id for run in chain],
                status=WaitStatus.OPEN,
            )
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
            .order_by("created_at")
        )
        pending = [pending_item(wait) for wait in waits]
        if pending or last.status == RunStatus.PAUSED:
            status = WAITING
    answer = None
    for run in reversed(chain):
        answer = answer_of(run.request_id)
        if answer is not None:
            break
    usage: dict[str, int] = {}
    for run in chain:
        for key, value in (run.usage or {}).items():
            if isinstance(value, int):
                usage[key] = usage.get(key, 0) + value
    error = None
    if last.error_type or last.error_message:
        error = {"type": last.error_type, "message": last.error_message}
    return {
        "request_id": request_id,
        "chat_id": str(session_id),
        "status": status,
        "answer": answer,
        "pending": pending,
        "usage": usage,
        "error": error,
        "current_request_id": last.request_id,
        "started_at": _iso(chain[0].started_at),
        "ended_at": _iso(last.ended_at),
    }


def _iso(moment: Any) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")
