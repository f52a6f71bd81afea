"""Settling runs whose process died, and closing what a run leaves open when it ends.

A run row says ``running`` while a process runs it. When that process dies (a crash, a
kill, a lost lease), nobody will end the run, so the next process to touch the session
settles it (``recover_session``), reading only the database:

- if the run was waiting for replies that can still be given — an open question or
  approval that has not passed its deadline, or a reply already recorded that its tool
  never used — it becomes ``paused``: its open tool calls stay open, waits for calls that
  never got to ask are stored now, and the session lists them as ``pending`` until someone
  answers (a continuation run then takes over) or they expire;
- a call whose MCP server was waiting for the person's answer to its question
  (``agent_app.agents.elicitation``) counts as such a wait while the question is open and
  in time: the question stays answerable, and the continuation ends the call with an
  honest error (its connection died with the process; it is never sent again); once the
  question has expired the call is closed as expired;
- otherwise, when the caller continues it (``continuing``) and it may be continued
  (``agent_app.durable.continuation.continuable``: attempts left, work left), it stays
  ``running``, counts one more attempt, and the caller runs it on from its checkpoint
  with the same ``request_id`` (the sockets get ``run_continued``);
- otherwise it becomes ``interrupted``, and each of its open tool calls gets an
  unsuccessful result saying what happened: a call that had started (its run's
  ``started_call``) "may or may not have completed" and is never run again; a call that
  had not started "was not run". An approved call (its wait ``executing``) that had not
  started, or whose tool is ``atomic`` (so it committed nothing), keeps its approval: the
  run is paused with every reply known, and goes on at once;
- an ``ask_<id>`` call whose sub-run (``agent_app.durable.subruns``) waits for a reply
  counts as waiting the same way: its sub-runs' waits are the chat's, listed as pending;
  the continuation runs the call again, which resumes the sub-run where it stopped. A
  call whose sub-run was working, not waiting (streaming, running a tool), is left open
  when the run is continued (the call runs again and its sub-run goes on from its stored
  conversation); when the run is not continued it "may or may not have completed".

A ``paused`` run whose waits all passed their deadline becomes ``expired`` the same way.
A ``paused`` run whose waits are all answered is continued (``answered_paused_runs``):
claiming a reply and starting the continuation it calls for are two steps, and a process
may die between them; whoever touches the session next takes the second one, exactly
once (``begin_run`` refuses a second continuation of one paused run).
Each settled run is announced to the session's sockets with numbers from a fresh ``seq``
block, so they come after everything the dead process sent.

``close_run_calls`` is the same closing for a run that ends here by failing or being
cancelled: the history never keeps a tool call without a result, except a paused run's.

What wait a never-started call would have opened, and with what payload, only the chat's
agent knows; the agent factory sits above this layer, so the app hands its
``describe_wait`` in when it is ready (``describe_waits_with``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from agent_app import conf
from agent_app.durable import continuation, subruns
from agent_app.durable.deadlocks import retried_on_deadlock
from agent_app.durable.sequence import reserve_block
from agent_app.durable.store import RowMeta, bump_version, insert_rows, open_calls
from agent_app.durable.waits import (
    BROWSER_TOOL_EVENT,
    LIVE_STATUSES,
    is_mcp_question,
    pending_item,
    record_wait,
)
from agent_app.models import ChatRun, ChatSession, ReplyWait, RunStatus, WaitKind, WaitStatus
from agent_app.webhooks.run_events import run_ended
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage

__all__ = [
    "EXPIRED_TOOL_CONTENT",
    "INTERRUPTED_RUN_MESSAGE",
    "Settled",
    "answered_paused_runs",
    "close_run_calls",
    "describe_waits_with",
    "is_running",
    "recover_session",
    "stale_runs",
]

INTERRUPTED_RUN_MESSAGE = "The server stopped while this answer was being written."
EXPIRED_RUN_MESSAGE = "Nobody answered in time, so this answer was not finished."
STARTED_TOOL_CONTENT = continuation.STARTED_TOOL_CONTENT
NOT_RUN_TOOL_CONTENT = "Not run: the server stopped before this tool ran."
EXPIRED_TOOL_CONTENT = "Nobody answered in time; the call did not run."
EXPIRED_QUESTION_CONTENT = (
    "Interrupted: the server stopped while the MCP server waited for the answer to its "
    "question, and nobody answered in time; the call was not run again."
)
ABANDONED_TOOL_CONTENT = "Not answered: the user sent a new message instead."
ENDED_TOOL_CONTENT = {
    RunStatus.FAILED: "Not run: the request failed first.",
    RunStatus.CANCELLED: "Not run: the request was stopped.",
}


@dataclass
class Settled:
    """A run recovery settled, and the frame that tells the sockets."""

    request_id: str
    status: RunStatus
    seq_block: tuple[int, int]
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: A paused run whose every reply is known already: it can go on at once.
    ready: bool = False
    #: A run claimed for continuation (``status`` stays ``running``): its attempt, its
    #: kind, and where its continuation's first message will be stored.
    attempt: int = 0
    kind: str = ""
    position: int = 0

    @property
    def error(self) -> tuple[str, str] | None:
        """The error an interrupted or expired run is stored with."""
        if self.status == RunStatus.INTERRUPTED:
            return ("Interrupted", INTERRUPTED_RUN_MESSAGE)
        if self.status == RunStatus.EXPIRED:
            return ("Expired", EXPIRED_RUN_MESSAGE)
        return None

    def frame(self, seq: int) -> dict[str, Any]:
        if self.status == RunStatus.RUNNING:
            return {
                "type": "run_continued",
                "seq": seq,
                "request_id": self.request_id,
                "attempt": self.attempt,
                "position": self.position,
            }
        if self.status == RunStatus.CANCELLED:
            return {"type": "run_cancelled", "seq": seq, "request_id": self.request_id}
        if self.status == RunStatus.PAUSED:
            return {
                "type": "run_paused",
                "seq": seq,
                "request_id": self.request_id,
                "pending": self.pending,
            }
        message = (
            EXPIRED_RUN_MESSAGE if self.status == RunStatus.EXPIRED else INTERRUPTED_RUN_MESSAGE
        )
        return {
            "type": "run_interrupted",
            "seq": seq,
            "request_id": self.request_id,
            "status": str(self.status),
            "message": message,
        }


def is_running(request_id: str) -> bool:
    """Whether the run's row still says ``running`` (no ending was recorded yet)."""
    return ChatRun.objects.filter(request_id=request_id, status=RunStatus.RUNNING).exists()


def stale_runs(session_id: str) -> list[tuple[str, str]]:
    """``(request_id, status)`` of the session's runs that no ending has settled yet."""
    return list(
        ChatRun.objects.filter(
            session_id=session_id, status__in=[RunStatus.RUNNING, RunStatus.PAUSED]
        ).values_list("request_id", "status")
    )


def answered_paused_runs(session_id: str) -> list[str]:
    """Paused runs of the session whose every wait has its answer, oldest first.

    Such a run was due to go on: a reply claimed its last open wait, and the continuation
    that claim starts never began (the process died in between, or starting it failed).
    The caller continues it; ``begin_run`` lets only one continuation take a paused run.
    """
    paused = list(
        ChatRun.objects.filter(session_id=session_id, status=RunStatus.PAUSED)
        .order_by("started_at")
        .values_list("request_id", flat=True)
    )
    if not paused:
        return []
    statuses: dict[str, set[str]] = {request_id: set() for request_id in paused}
    for request_id, status in ReplyWait.objects.filter(
        session_id=session_id, request_id__in=paused, status__in=LIVE_STATUSES
    ).values_list("request_id", "status"):
        statuses[request_id].add(status)
    return [
        request_id
        for request_id in paused
        if WaitStatus.ANSWERED in statuses[request_id]
        and WaitStatus.OPEN not in statuses[request_id]
    ]


@retried_on_deadlock
def recover_session(
    session_id: str,
    dead: Iterable[str],
    *,
    abandon_paused: bool = False,
    continuing: str = "",
    worker: str = "",
) -> list[Settled]:
    """Settle the session's ``dead`` running runs and its expired paused ones.

    ``abandon_paused`` also ends a paused run that could still go on: the user sent a new
    message instead of answering, so its questions are dropped and its open calls closed.
    ``continuing``: the dead run the caller will continue if it can (it holds the
    session's lease in that run's name); claimed for ``worker``.
    """
    dead = set(dead)
    settled: list[Settled] = []
    now = timezone.now()
    with transaction.atomic():
        runs = list(
            ChatRun.objects.select_for_update().filter(
                session_id=session_id, status__in=[RunStatus.RUNNING, RunStatus.PAUSED]
            )
        )
        for run in runs:
            if run.status == RunStatus.RUNNING and run.request_id not in dead:
                continue
            if run.status == RunStatus.PAUSED and abandon_paused:
                outcome = _abandon(session_id, run, now)
            else:
                outcome = _settle(
                    session_id, run, now, worker if run.request_id == continuing else ""
                )
            if outcome is not None:
                settled.append(outcome)
        if not settled:
            return []
        for outcome in settled:  # their webhook messages, in the transaction that ends them
            run_ended(session_id, outcome.request_id, outcome.status, error=outcome.error)
        block = reserve_block(session_id)
        ChatSession.objects.filter(pk=session_id).update(last_event_seq=block[0] + len(settled) - 1)
    for outcome in settled:
        outcome.seq_block = block
    return settled


def _settle(session_id: str, run: ChatRun, now: Any, continuer: str = "") -> Settled | None:
    """Decide what became of one run and close what it left open; a ``continuer`` (a
    worker) claims a run that can go on instead of interrupting it."""
    message, open_ids = open_calls(session_id)
    calls = _calls(message, open_ids)
    waits = {
        wait.tool_call_id: wait
        for wait in ReplyWait.objects.select_for_update().filter(
            session_id=session_id, tool_call_id__in=open_ids, status__in=LIVE_STATUSES
        )
    }
    questions = _questions(session_id, open_ids)
    delegated = subruns.live_waits_under(session_id, [call.id for call in calls])
    closes: list[tuple[ToolCall, str, dict[str, Any]]] = []
    working: list[ToolCall] = []  # ``ask_<id>`` calls whose sub-run was working
    resumable = False
    expired_wait = False
    for call in calls:
        if call.id in delegated or subruns.has_sub_run(session_id, call.id):
            outcome = _settle_delegated(call, delegated.get(call.id, []), now, closes)
            if outcome == "working":
                working.append(call)
        else:
            outcome = _settle_call(
                session_id, run, call, waits.get(call.id), questions.get(call.id), now, closes
            )
        resumable = resumable or outcome == "resumable"
        expired_wait = expired_wait or outcome == "expired"
    if resumable:
        _insert_results(session_id, run.request_id, closes)
        if run.status == RunStatus.PAUSED and not closes:
            return None  # still paused, nothing new to say
        run.status = RunStatus.PAUSED
        run.save(update_fields=["status"])
        pending = [
            pending_item(wait)
            for wait in ReplyWait.objects.filter(
                session_id=session_id, request_id=run.request_id, status=WaitStatus.OPEN
            ).order_by("created_at")
        ]
        return Settled(run.request_id, RunStatus.PAUSED, (0, 0), pending, ready=not pending)
    if continuer and not expired_wait:
        continued = _continue(session_id, run, closes, continuer)
        if continued is not None:
            return continued  # a working sub-run's call stays open: it runs again
    _close_working(working, delegated, closes)
    return _end(session_id, run, calls, closes, now, expired_wait)


def _end(
    session_id: str,
    run: ChatRun,
    calls: list[ToolCall],
    closes: list[tuple[ToolCall, str, dict[str, Any]]],
    now: Any,
    expired_wait: bool,
) -> Settled:
    """End a run that cannot go on: ``expired`` or ``interrupted``, every open call closed."""
    closed = {call.id for call, _, _ in closes}
    # Nobody answered in time: the run was waiting, not working, when it stopped.
    expiring = run.status == RunStatus.PAUSED or expired_wait
    rest = EXPIRED_TOOL_CONTENT if expiring else NOT_RUN_TOOL_CONTENT
    closes.extend((call, rest, {}) for call in calls if call.id not in closed)
    _insert_results(session_id, run.request_id, closes)
    run.status = RunStatus.EXPIRED if expiring else RunStatus.INTERRUPTED
    run.ended_at = now
    if not expiring:
        run.error_type = "Interrupted"
        run.error_message = INTERRUPTED_RUN_MESSAGE
    else:
        run.error_type = "Expired"
        run.error_message = EXPIRED_RUN_MESSAGE
    run.save(update_fields=["status", "ended_at", "error_type", "error_message"])
    return Settled(run.request_id, run.status, (0, 0))


def _continue(
    session_id: str,
    run: ChatRun,
    closes: list[tuple[ToolCall, str, dict[str, Any]]],
    continuer: str,
) -> Settled | None:
    """Claim a dead running run for ``continuer`` if it can go on (else None)."""
    if run.status != RunStatus.RUNNING or not continuation.continuable(session_id, run):
        return None
    _insert_results(session_id, run.request_id, closes)
    return Settled(
        run.request_id,
        RunStatus.RUNNING,
        (0, 0),
        attempt=continuation.claim(run, continuer),
        kind=run.kind,
        position=continuation.next_position(session_id),
    )


def _settle_call(
    session_id: str,
    run: ChatRun,
    call: ToolCall,
    wait: ReplyWait | None,
    question: ReplyWait | None,
    now: Any,
    closes: list[tuple[ToolCall, str, dict[str, Any]]],
) -> str:
    """What one open call of a dead run becomes: ``resumable``, ``expired`` (its result
    is added to ``closes``), ``closed`` (likewise), or ``""`` (closed with the rest)."""
    if call.id == run.started_call and wait is None and question is None:
        closes.append((call, STARTED_TOOL_CONTENT, {}))  # it had started: never again
        return "closed"
    if question is not None and question.status == WaitStatus.OPEN and _expired(question, now):
        closes.append((call, EXPIRED_QUESTION_CONTENT, _expired_reply(question)))
        question.status = WaitStatus.EXPIRED
        question.save(update_fields=["status"])
        if wait is not None:
            wait.status = WaitStatus.DONE
            wait.save(update_fields=["status"])
        return "expired"
    if question is not None:
        return "resumable"  # answerable (or answered): the continuation ends the call
    if wait is not None and wait.status == WaitStatus.EXECUTING and call.id != run.started_call:
        # Approved, but its body never began (a tool that must not run twice says so before
        # it begins), or it is ``atomic`` and committed nothing: the approval stands and
        # the call runs when the run goes on, not asked again.
        wait.status = WaitStatus.ANSWERED
        wait.save(update_fields=["status"])
        return "resumable"
    if wait is not None and wait.status == WaitStatus.EXECUTING:
        closes.append((call, STARTED_TOOL_CONTENT, {}))
        wait.status = WaitStatus.DONE
        wait.save(update_fields=["status"])
        return "closed"
    if wait is not None and wait.status == WaitStatus.OPEN and _expired(wait, now):
        closes.append((call, EXPIRED_TOOL_CONTENT, _expired_reply(wait)))
        wait.status = WaitStatus.EXPIRED
        wait.save(update_fields=["status"])
        return "expired"
    if wait is not None:
        return "resumable"  # open and in time, or answered: a continuation can go on
    if run.status == RunStatus.RUNNING and _start_wait(session_id, run, call, now):
        return "resumable"
    return ""


def _settle_delegated(
    call: ToolCall,
    waits: list[ReplyWait],
    now: Any,
    closes: list[tuple[ToolCall, str, dict[str, Any]]],
) -> str:
    """What an open ``ask_<id>`` call of a dead run becomes, from its sub-runs' waits
    (``agent_app.durable.subruns``): ``resumable`` while one is open and in time, or
    answered (the continuation resumes the sub-run); ``expired`` when the open ones passed
    their deadline; else ``working``: the sub-run was working when the process died (a
    continuation goes on with it; otherwise ``_close_working`` closes the call)."""
    if any(
        wait.status == WaitStatus.ANSWERED
        or (wait.status == WaitStatus.OPEN and not _expired(wait, now))
        for wait in waits
    ):
        return "resumable"
    expired = [wait for wait in waits if wait.status == WaitStatus.OPEN]
    if not expired:
        return "working"
    for wait in waits:
        wait.status = WaitStatus.EXPIRED if wait in expired else WaitStatus.DONE
        wait.save(update_fields=["status"])
    closes.append((call, EXPIRED_TOOL_CONTENT, _expired_reply(expired[0])))
    return "expired"


def _close_working(
    working: list[ToolCall],
    delegated: dict[str, list[ReplyWait]],
    closes: list[tuple[ToolCall, str, dict[str, Any]]],
) -> None:
    """Close the ``ask_<id>`` calls of a run that is not continued whose sub-runs were
    working: they "may or may not have completed" (their approved calls are done with)."""
    for call in working:
        for wait in delegated.get(call.id, []):
            wait.status = WaitStatus.DONE
            wait.save(update_fields=["status"])
        closes.append((call, STARTED_TOOL_CONTENT, {}))


def _abandon(session_id: str, run: ChatRun, now: Any) -> Settled:
    """End a paused run nobody answered because the user moved on."""
    message, open_ids = open_calls(session_id)
    closes = [(call, ABANDONED_TOOL_CONTENT, {}) for call in _calls(message, open_ids)]
    _insert_results(session_id, run.request_id, closes)
    ReplyWait.objects.filter(session_id=session_id, status__in=LIVE_STATUSES).update(
        status=WaitStatus.CANCELLED
    )
    run.status = RunStatus.CANCELLED
    run.ended_at = now
    run.save(update_fields=["status", "ended_at"])
    return Settled(run.request_id, RunStatus.CANCELLED, (0, 0))


def _questions(session_id: str, open_ids: list[str]) -> dict[str, ReplyWait]:
    """The live MCP question of each open call that has one (by the call's id)."""
    if not open_ids:
        return {}
    found: dict[str, ReplyWait] = {}
    wanted = set(open_ids)
    for wait in ReplyWait.objects.select_for_update().filter(
        session_id=session_id, kind=WaitKind.ASK_USER, status__in=LIVE_STATUSES
    ):
        call_id = (wait.payload or {}).get("call_id")
        if is_mcp_question(wait.payload) and call_id in wanted:
            found[call_id] = wait
    return found


def _calls(message: AssistantMessage | None, open_ids: list[str]) -> list[ToolCall]:
    if message is None:
        return []
    wanted = set(open_ids)
    return [call for call in message.tool_calls if call.id in wanted]


def _expired(wait: ReplyWait, now: Any) -> bool:
    return wait.expires_at is not None and wait.expires_at <= now


def _expired_reply(wait: ReplyWait) -> dict[str, Any]:
    reply: dict[str, Any] = {"kind": str(wait.kind), "expired": True}
    if is_mcp_question(wait.payload):
        reply.update(source="mcp", question=wait.payload.get("question"))
    return {"reply": reply}


#: ``(event name, payload)`` of the wait a call of chat ``session_id`` would start, or None
#: (``agent_app.agents.factory.describe_wait``).
WaitDescriber = Callable[[str, ToolCall], tuple[str, dict[str, Any]] | None]
_describer: list[WaitDescriber] = []


def describe_waits_with(describe: WaitDescriber) -> None:
    """Tell the waits of never-started calls with ``describe`` (the app does, when ready)."""
    _describer[:] = [describe]


def _start_wait(session_id: str, run: ChatRun, call: ToolCall, now: Any) -> bool:
    """Store the wait a never-started call will need, so the user can answer it now."""
    if not _describer:
        raise ImproperlyConfigured("recovery needs describe_waits_with() (the app's ready)")
    described = _describer[0](session_id, call)
    if described is None:
        return False
    event_name, payload = described
    # A host-page tool waits for a page as long as it would have live.
    browser = event_name == BROWSER_TOOL_EVENT
    timeout = float((conf.ZETT_BROWSER_TOOL_TIMEOUT if browser else conf.ZETT_REPLY_TIMEOUT) or 0)
    if timeout > 0:
        expires_at = now + timedelta(seconds=timeout)
        payload["expires_at"] = expires_at.isoformat(timespec="milliseconds")
    record_wait(session_id, run.request_id, event_name, payload)
    return True


def _insert_results(
    session_id: str, request_id: str, closes: list[tuple[ToolCall, str, dict[str, Any]]]
) -> None:
    if not closes:
        return
    entries = [
        (ToolMessage(call.id, call.name, text, success=False, attributes=attributes), RowMeta())
        for call, text, attributes in closes
    ]
    bumped = bump_version(session_id, timezone.now())  # locks the session row
    insert_rows(session_id, request_id, entries, after=bumped.last_position, follows=bumped.last_id)


def close_run_calls(session_id: str, request_id: str, status: RunStatus) -> None:
    """Close the calls and waits a failed or cancelled run leaves open."""
    text = ENDED_TOOL_CONTENT.get(status, NOT_RUN_TOOL_CONTENT)
    with transaction.atomic():
        message, open_ids = open_calls(session_id)
        calls = _calls(message, open_ids)
        _insert_results(session_id, request_id, [(call, text, {}) for call in calls])
        ReplyWait.objects.filter(session_id=session_id, status__in=LIVE_STATUSES).update(
            status=WaitStatus.CANCELLED
        )
