"""Stopping a chat's run from a page that is not the chat (the list's Delete).

A run that waits for its person (a question, an approval, a host-page tool) is idle until
someone answers, so deleting its chat should not demand a Stop first that the list has no
button for. ``stop_waiting_run`` cancels such a run wherever it runs (this process, or the
worker that holds it, through the session bus), exactly as Stop does: its open waits are
closed as cancelled and the run is recorded as cancelled. A run that is working (streaming,
running a tool) is left alone: deleting under it would lose what it is doing.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.db.models import Exists, OuterRef, QuerySet

from agent_app.models import ChatRun, ChatSession, ReplyWait, RunStatus, WaitStatus
from agent_app.protocol.refusals import NotRunning

__all__ = ["is_running", "stop_waiting_run", "waits_for_its_person", "with_waiting_flag"]


def is_running(session: ChatSession) -> bool:
    return ChatRun.objects.filter(session=session, status=RunStatus.RUNNING).exists()


def waits_for_its_person(session: ChatSession) -> bool:
    """The chat's run is running and waits for a reply (an open wait)."""
    return is_running(session) and (
        ReplyWait.objects.filter(session=session, status=WaitStatus.OPEN).exists()
    )


def with_waiting_flag(sessions: QuerySet[ChatSession]) -> QuerySet[ChatSession]:
    """``sessions``, each with ``waits_for_reply`` (the list's Delete dialog says so)."""
    running = ChatRun.objects.filter(session=OuterRef("pk"), status=RunStatus.RUNNING)
    open_wait = ReplyWait.objects.filter(session=OuterRef("pk"), status=WaitStatus.OPEN)
    return sessions.annotate(waits_for_reply=Exists(running) & Exists(open_wait))


def stop_waiting_run(session: ChatSession) -> None:
    """Cancel the chat's run (from a sync view); it has ended, one way or another, on return."""
    async_to_sync(_cancel)(str(session.pk))


async def _cancel(session_id: str) -> None:
    from agent_app.sessions.registry import live_sessions

    live = live_sessions().session(session_id)
    try:
        await live.cancel()
    except NotRunning:
        pass  # it ended just before: nothing left to stop
    finally:
        live.check_idle()
