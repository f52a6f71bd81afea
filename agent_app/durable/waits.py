"""Durable waits: questions, approvals and host-page tool calls that outlive the process
that asked them.

Life of a wait (one ``ReplyWait`` row per open tool call that needs the user):

- **open** — written when the run emits the ``ask_user`` / ``approval_requested`` event,
  before any client sees it (``record_wait``);
- **answered** — a reply was accepted, exactly once: in memory by the waiting run (then
  recorded with ``mark``), or, when no run is waiting for it (its process died), by the
  conditional update in ``claim`` that only one of several simultaneous replies wins;
- **executing** — an approved tool is about to run (``mark`` from the approval gate, before
  the tool starts). After a crash such a call is never run again: at most once;
- **done** — its tool result is stored; **expired** — nobody answered by ``expires_at``;
  **cancelled** — the run was stopped, or the conversation moved on.

A reply that is known before the wait (re)starts — answered while the run was paused, or
while a continuation had not reached that call yet — is handed to the run as soon as it
registers the wait (``record_wait`` returns it), so the user never answers twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent_app.models import ChatRun, ReplyWait, RunStatus, WaitKind, WaitStatus, statements
from agent_app.protocol.frames import ReplyReason
from agent_app.protocol.text import cut_strings, encode_frame
from agent_app.webhooks.run_events import wait_opened
from zett_agent.extensions import form_answers
from zett_agent.extensions.approval import digest_of

__all__ = [
    "APPROVAL_EVENT",
    "ASK_USER_EVENT",
    "BROWSER_TOOL_EVENT",
    "Claim",
    "claim",
    "digest_of",
    "elicitation_answer",
    "is_mcp_question",
    "mark",
    "pending_items",
    "record_wait",
    "resumption",
    "wait_kind",
]

ASK_USER_EVENT = "ask_user"
APPROVAL_EVENT = "approval_requested"
ASK_USER_RESPONSE = "ask_user_response"
#: The older name of an MCP question's reply, still taken for one (``elicitation_answer``).
ELICITATION_RESPONSE_ALIAS = "mcp_elicitation_response"
#: A host-page tool's call (``agent_app.agents.browser_tools``): the page answers it.
BROWSER_TOOL_EVENT = "browser_tool"
#: The replies a stored wait can take.
RESPONSE_EVENTS = frozenset(
    {ASK_USER_RESPONSE, "approval_response", ELICITATION_RESPONSE_ALIAS, "browser_tool_result"}
)
_KINDS = {
    ASK_USER_EVENT: WaitKind.ASK_USER,
    APPROVAL_EVENT: WaitKind.APPROVAL,
    BROWSER_TOOL_EVENT: WaitKind.BROWSER_TOOL,
}
#: Largest payload a pending wait is listed with, in bytes of JSON: a session's frame
#: stays far under the frame limit however much a question or an approval holds.
PENDING_PAYLOAD_BUDGET = 48 * 1024
#: Waits that still hold a call open.
LIVE_STATUSES = (WaitStatus.OPEN, WaitStatus.ANSWERED, WaitStatus.EXECUTING)


def wait_kind(event_name: str | None, payload: Any) -> WaitKind | None:
    """The kind of wait a ``custom`` event announces, or None for any other event."""
    kind = _KINDS.get(event_name or "")
    if kind is None or not isinstance(payload, dict):
        return None
    if not isinstance(payload.get("tool_call_id"), str):
        return None
    return kind


def record_wait(
    session_id: str,
    request_id: str,
    event_name: str,
    payload: dict[str, Any],
    *,
    trace_context: str = "",
) -> dict[str, Any] | None:
    """Store the wait an event announces; return the reply if one is already known.

    ``trace_context``: the traced run's traceparent, stored with the run in the same
    transaction (whoever continues the run, or ends the wait, finds it there).
    """
    kind = _KINDS[event_name]
    tool_call_id = payload["tool_call_id"]
    expires_at = _deadline(payload.get("expires_at"))
    with transaction.atomic():
        if trace_context:
            statements.update(ChatRun, {"trace_context": trace_context}, request_id=request_id)
        existing = (
            ReplyWait.objects.select_for_update()
            .filter(session_id=session_id, tool_call_id=tool_call_id, status__in=LIVE_STATUSES)
            .first()
        )
        if existing is not None:
            existing.request_id = request_id
            existing.payload = payload
            existing.expires_at = expires_at
            existing.save(update_fields=["request_id", "payload", "expires_at"])
            return existing.reply if existing.status == WaitStatus.ANSWERED else None
        created = ReplyWait.objects.create(
            session_id=session_id,
            request_id=request_id,
            tool_call_id=tool_call_id,
            tool_name=payload.get("tool") or ("ask_user" if kind == WaitKind.ASK_USER else ""),
            kind=kind,
            event_name=event_name,
            response_event=str(payload.get("response_event") or ""),
            payload=payload,
            digest=str(payload.get("digest") or ""),
            expires_at=expires_at,
        )
        wait_opened(created, lambda: pending_item(created))  # ``run.waiting``, in its transaction
    return None


def _deadline(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    return parse_datetime(value)


#: The statuses each status may follow: ``executing`` is never undone by a late
#: ``answered``, so a crash after a tool started never lets it run again.
_FOLLOWS = {
    WaitStatus.ANSWERED: (WaitStatus.OPEN,),
    WaitStatus.EXECUTING: (WaitStatus.OPEN, WaitStatus.ANSWERED),
}


def mark(session_id: str, tool_call_id: str, status: WaitStatus, reply: Any = None) -> None:
    """Move the live wait of a call to ``status`` (``reply`` when it was answered)."""
    fields: dict[str, Any] = {"status": status}
    if status == WaitStatus.ANSWERED:
        fields.update(reply=reply, answered_at=timezone.now())
    # One statement, not a QuerySet: the answer is recorded on the reply's path.
    statements.update(
        ReplyWait,
        fields,
        session=session_id,
        tool_call_id=tool_call_id,
        status__in=_FOLLOWS.get(status, LIVE_STATUSES),
    )


@dataclass(frozen=True, slots=True)
class Claim:
    """The verdict on a reply nobody was waiting for in memory."""

    #: Why it was refused (``stale``, ``expired``, ``mismatch``); None when it was accepted
    #: (``wait`` is the wait it answers) or when no wait is open for that call (``wait``
    #: None too: whether that is ``stale`` depends on whether a run is active).
    reason: ReplyReason | None
    wait: ReplyWait | None = None
    #: Why, in words, when the reason alone does not say it (an ``invalid`` answer).
    detail: str | None = None


def claim(session_id: str, name: str, payload: dict[str, Any]) -> Claim:
    """Accept a reply for an open wait exactly once, or say why it is refused.

    The reasons: ``expired``, ``mismatch`` (an approval for other arguments than those
    shown), ``stale`` (answered already, or not a reply this wait takes); no reason and no
    wait when no wait is open for that call.
    """
    tool_call_id = payload.get("tool_call_id")
    if not isinstance(tool_call_id, str):
        return Claim(None)
    wait = (
        ReplyWait.objects.filter(session_id=session_id, tool_call_id=tool_call_id)
        .order_by("-created_at", "-pk")
        .first()
    )
    if wait is None or wait.status == WaitStatus.CANCELLED:
        return Claim(None)  # nothing waits: its run was stopped, or there never was one
    if wait.status == WaitStatus.EXPIRED or (
        wait.status == WaitStatus.OPEN
        and wait.expires_at is not None
        and wait.expires_at <= timezone.now()
    ):
        return Claim(ReplyReason.EXPIRED)
    mcp = is_mcp_question(wait.payload)
    takes = {ASK_USER_RESPONSE, ELICITATION_RESPONSE_ALIAS} if mcp else {wait.response_event}
    if wait.status != WaitStatus.OPEN or name not in takes:
        return Claim(ReplyReason.STALE)
    if wait.kind == WaitKind.APPROVAL and not _digest_matches(wait, payload):
        return Claim(ReplyReason.MISMATCH)
    if mcp and (problem := _question_refuses(wait, payload)) is not None:
        return Claim(ReplyReason.INVALID, detail=problem)
    won = ReplyWait.objects.filter(pk=wait.pk, status=WaitStatus.OPEN).update(
        status=WaitStatus.ANSWERED, reply=payload, answered_at=timezone.now()
    )
    if not won:
        return Claim(ReplyReason.STALE)
    wait.status, wait.reply = WaitStatus.ANSWERED, payload
    return Claim(None, wait)


def resumption(session_id: str) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, datetime]]:
    """What a continuation needs: ``(name, payload)`` of the known replies to the open
    calls, and the deadlines of the open calls still waiting."""
    from agent_app.durable.store import open_calls

    _, open_ids = open_calls(session_id)
    replies: list[tuple[str, dict[str, Any]]] = []
    deadlines: dict[str, datetime] = {}
    for wait in ReplyWait.objects.filter(
        session_id=session_id, tool_call_id__in=open_ids, status__in=LIVE_STATUSES
    ):
        if wait.status == WaitStatus.ANSWERED and isinstance(wait.reply, dict):
            replies.append((wait.response_event, wait.reply))
        elif wait.status == WaitStatus.OPEN and wait.expires_at is not None:
            deadlines[wait.tool_call_id] = wait.expires_at
    return replies, deadlines


#: How an MCP question may be answered.
ELICITATION_ACTIONS = form_answers.ACTIONS
#: The ``source`` of an ``ask_user`` event that stands for an MCP server's question.
MCP_SOURCE = "mcp"
#: An ``ask_user_response`` read as an MCP question's ``{action, content}`` (or ValueError).
elicitation_answer = form_answers.read_answer
single_field = form_answers.single_field


def is_mcp_question(payload: Any) -> bool:
    """Whether an ``ask_user`` payload (or a stored wait's) is an MCP server's question."""
    return isinstance(payload, dict) and payload.get("source") == MCP_SOURCE


def valid_elicitation_reply(payload: dict[str, Any], schema: Any) -> bool:
    """Whether ``payload`` answers an MCP question asked with ``schema``."""
    try:
        elicitation_answer(payload, schema)
    except ValueError:
        return False
    return True


def _question_refuses(wait: ReplyWait, payload: dict[str, Any]) -> str | None:
    """Why ``payload`` does not answer an MCP question (None when it does)."""
    try:
        elicitation_answer(payload, (wait.payload or {}).get("requested_schema"))
    except ValueError as error:
        return str(error)
    return None


def _digest_matches(wait: ReplyWait, payload: dict[str, Any]) -> bool:
    given = payload.get("digest")
    return given is None or given == wait.digest


def pending_items(session_id: str) -> list[dict[str, Any]]:
    """Open waits of the session's paused run, as the ``session`` frame lists them."""
    paused = ChatRun.objects.filter(session_id=session_id, status=RunStatus.PAUSED).values_list(
        "request_id", flat=True
    )
    waits = ReplyWait.objects.filter(
        session_id=session_id, status=WaitStatus.OPEN, request_id__in=list(paused)
    ).order_by("created_at")
    return [pending_item(wait) for wait in waits]


def pending_item(wait: ReplyWait) -> dict[str, Any]:
    """A wait as ``session`` and ``run_paused`` frames list it, its payload cut to fit."""
    item = {
        "request_id": wait.request_id,
        "tool_call_id": wait.tool_call_id,
        "kind": wait.kind,
        "name": wait.event_name,
        "payload": wait.payload,
        "response_event": wait.response_event,
        "expires_at": None
        if wait.expires_at is None
        else wait.expires_at.isoformat().replace("+00:00", "Z"),
    }
    payload = wait.payload
    if isinstance(payload, dict) and payload.get("parent_tool_call_id"):
        # A sub-run's wait (``agent_app.agents.subruns``): who asks, under which call.
        item["agent"] = payload.get("agent")
        item["parent_tool_call_id"] = payload["parent_tool_call_id"]
    if len(encode_frame(payload).encode("utf-8")) > PENDING_PAYLOAD_BUDGET:
        # A huge question or arguments: shown cut like an event's (the row stays whole).
        cut = cut_strings(payload, PENDING_PAYLOAD_BUDGET) if isinstance(payload, dict) else None
        item["payload"] = cut or {"tool_call_id": wait.tool_call_id}
        item["content_truncated"] = True
    return item
