"""The staff inbox: what waits for a person of the team, newest first.

Three lists: chats that asked for a person (``needs_human``) or that staff answer now
(taken over), answers rated 👎, and approvals or questions that have waited longer than
``WAITING_LONG``. Filters: which list (``show``) and which assistant. The page reads the
same data as JSON every few seconds, so it stays live without a socket per staff member.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from agent_app.durable.support import iso
from agent_app.models import ChatFeedback, ChatSession, ChatTakeover, ReplyWait, WaitStatus

__all__ = ["INBOX_LIMIT", "SHOW", "WAITING_LONG", "inbox"]

#: Most entries of each list.
INBOX_LIMIT = 100
#: An approval or question open longer than this is listed.
WAITING_LONG = timedelta(minutes=5)
#: The lists a ``show`` filter may pick ("" or "all": every one).
SHOW = ("people", "down", "waiting")


def _chat_url(session_id: Any) -> str:
    return reverse("agent_app:inbox_chat", kwargs={"session_id": session_id})


def _people(assistant: str) -> list[dict[str, Any]]:
    chats = ChatSession.objects.filter(Q(needs_human=True) | Q(taken_over_at__isnull=False))
    if assistant:
        chats = chats.filter(assistant=assistant)
    rows = list(chats.order_by("-updated_at")[:INBOX_LIMIT])
    staff = dict(
        ChatTakeover.objects.filter(
            session__in=[row.pk for row in rows], ended_at=None
        ).values_list("session_id", "staff_name")
    )
    return [
        {
            "session_id": str(row.pk),
            "title": str(row),
            "assistant": row.assistant,
            "needs_human": row.needs_human,
            "reason": row.handoff_reason,
            "since": iso(row.needs_human_since or row.taken_over_at),
            "staff": staff.get(row.pk),
            "updated_at": iso(row.updated_at),
            "url": _chat_url(row.pk),
        }
        for row in rows
    ]


def _thumbs_down(assistant: str) -> list[dict[str, Any]]:
    ratings = ChatFeedback.objects.filter(rating="down").select_related("session", "message")
    if assistant:
        ratings = ratings.filter(assistant=assistant)
    return [
        {
            "session_id": str(rating.session_id),
            "title": str(rating.session),
            "assistant": rating.assistant,
            "message_id": rating.message_id,
            "answer": _text(rating.message.content)[:300],
            "comment": rating.comment,
            "updated_at": iso(rating.updated_at),
            "url": _chat_url(rating.session_id),
        }
        for rating in ratings.order_by("-updated_at")[:INBOX_LIMIT]
    ]


def _waiting(assistant: str) -> list[dict[str, Any]]:
    before = timezone.now() - WAITING_LONG
    waits = ReplyWait.objects.filter(status=WaitStatus.OPEN, created_at__lt=before)
    if assistant:
        waits = waits.filter(session__assistant=assistant)
    return [
        {
            "session_id": str(wait.session_id),
            "title": str(wait.session),
            "assistant": wait.session.assistant,
            "kind": wait.kind,
            "tool": wait.tool_name,
            "since": iso(wait.created_at),
            "url": _chat_url(wait.session_id),
        }
        for wait in waits.select_related("session").order_by("created_at")[:INBOX_LIMIT]
    ]


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def inbox(show: str = "", assistant: str = "") -> dict[str, list[dict[str, Any]]]:
    """The inbox's lists (only the one ``show`` names, when it names one)."""
    lists = {"people": _people, "down": _thumbs_down, "waiting": _waiting}
    return {
        name: read(assistant) if show in ("", "all", name) else [] for name, read in lists.items()
    }
