"""Continuing a run whose worker died: its checkpoint, its claim, the call that may have run.

A run's *checkpoint* is its last ended step, and the database holds it already: every
answer of the model is stored as soon as it is known, every tool result as soon as it is
appended (``agent_app.durable.persistence``), the run row says which request it is and
how many workers ran it (``ChatRun.attempts``). Nothing else is written for a checkpoint,
so a run pays nothing for being continuable.

When a run's worker dies (its lease lapses) or hands it over (SIGTERM past the grace
period, ``agent_app.process.shutdown``), whoever settles the session
(``agent_app.durable.recovery``, under the session's lease, which the settler takes in the
run's own name so no other worker takes the run for dead meanwhile) asks ``continuable``:

- a run waiting for a reply is left to the paused path (recovery decides that first);
- a run that had ``ZETT_RUN_ATTEMPTS`` workers already ends ``interrupted`` (no crash loop);
- a run whose stored history ends with a final answer has nothing left to do (it is
  settled as before);
- otherwise it is *claimed*: one more attempt is counted on its row, in the transaction
  that holds the row's lock, and the claimer continues it with the same ``request_id``.

The continuation rebuilds the agent from the stored history (``Agent.resume_stream``): the
unfinished model call is made again (its partial text was never stored), and the open
calls of the last tool batch run. Tools run one at a time in model order, so at most one
open call had started: a call of a tool that must not run twice says so on the run's row
before it starts (``ChatRun.started_call``, ``agent_app.durable.atomic``), and recovery
gives exactly that call the "may or may not have completed" result. The others run: an
``idempotent`` tool's call again (harmless), an ``atomic`` one's because a call without a
stored result committed nothing, the rest because they never started.
"""

from __future__ import annotations

from django.db.models import Max

from agent_app import conf
from agent_app.models import ChatMessage, ChatRun, RunStatus

__all__ = [
    "STARTED_TOOL_CONTENT",
    "claim",
    "continuable",
    "next_position",
    "record_trace_context",
]

STARTED_TOOL_CONTENT = (
    "Interrupted: the server stopped while this tool was running; it may or may not have completed."
)


def continuable(session_id: str, run: ChatRun) -> bool:
    """Whether a dead ``running`` run may be continued (its attempts left, work left)."""
    if run.attempts >= int(conf.ZETT_RUN_ATTEMPTS):
        return False
    last = (
        ChatMessage.objects.filter(session_id=session_id, superseded=False)
        .exclude(role="system")
        .order_by("-position")
        .values_list("role", "tool_calls", "partial")
        .first()
    )
    if last is None:
        return False
    role, tool_calls, partial = last
    # A final answer (or a partial one a cancellation stored): the run has nothing to redo.
    return not (role == "assistant" and (not tool_calls or partial))


def claim(run: ChatRun, worker: str) -> int:
    """Count one more worker on ``run`` (its row is locked by the caller); the attempt."""
    run.attempts += 1
    run.worker = worker[:100]
    run.save(update_fields=["attempts", "worker"])
    return run.attempts


def next_position(session_id: str) -> int:
    """Where the continuation's first message will be stored (``run_continued.position``)."""
    last = ChatMessage.objects.filter(session_id=session_id).aggregate(last=Max("position"))
    return 0 if last["last"] is None else last["last"] + 1


def record_trace_context(request_id: str, traceparent: str) -> None:
    """Store a running run's span as soon as it exists: a continuation links to it."""
    if traceparent:
        ChatRun.objects.filter(request_id=request_id, status=RunStatus.RUNNING).update(
            trace_context=traceparent
        )
