"""What people in the loop write to the database: ratings, handoffs, takeovers, messages.

Synchronous ORM code (run through ``database_sync_to_async``). Every state change of a
chat is one transaction on the chat's row; the ones that add a message lock it the way
every message write does (``agent_app.durable.store.bump_version``), so positions and the
history cache stay right. The signals of ``agent_app.signals`` are sent inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from agent_app.attachments.extension import ATTACHMENTS_ATTRIBUTE
from agent_app.attachments.stored import attachment_refs
from agent_app.durable.history import history_item
from agent_app.durable.store import bump_version, message_from_row, remember, title_from
from agent_app.durable.support import iso
from agent_app.models import (
    STAFF_ROLE,
    ChatFeedback,
    ChatMessage,
    ChatSession,
    ChatTakeover,
    FeedbackRating,
)
from agent_app.models.statements import insert
from agent_app.people.state import staff_name
from agent_app.signals import feedback_saved, handoff_requested

__all__ = [
    "MAX_COMMENT_CHARS",
    "MAX_REASON_CHARS",
    "NotYours",
    "hand_back",
    "mark_needs_human",
    "rate",
    "store_customer_message",
    "store_staff_message",
    "take_over",
]

#: Longest comment a rating keeps, and longest reason for asking for a person.
MAX_COMMENT_CHARS = 4000
MAX_REASON_CHARS = 500


class NotYours(LookupError):
    """No answer with this id in the person's chats (another person's is not found either)."""


# --- feedback ----------------------------------------------------------------------------


def rate(
    chats: Any,
    person: str,
    user_id: int | None,
    message_id: int | None,
    rating: str,
    comment: str,
    *,
    request_id: str | None = None,
) -> tuple[ChatFeedback, bool]:
    """Give or change ``person``'s rating of the answer ``message_id`` (or of the last
    answer of the run ``request_id``).

    ``chats`` are the person's chats (``agent_app.guard.access.visible_sessions``): an
    answer in anyone else's chat, or no answer at all, is ``NotYours``.
    """
    if rating not in FeedbackRating.values:
        raise ValueError(f"rating must be 'up' or 'down', not {rating!r}")
    answers = ChatMessage.objects.filter(role="assistant", session__in=chats.values("pk"))
    if message_id is not None:
        answers = answers.filter(pk=message_id)
    else:
        answers = answers.filter(request_id=request_id, superseded=False).order_by("-position")
    message = answers.select_related("session").first()
    if message is None:
        raise NotYours(message_id or request_id)
    with transaction.atomic():
        feedback, created = ChatFeedback.objects.select_for_update().get_or_create(
            message=message,
            person=person,
            defaults={
                "session_id": message.session_id,
                "user_id": user_id,
                "assistant": message.session.assistant,
                "rating": rating,
                "comment": comment[:MAX_COMMENT_CHARS],
            },
        )
        if not created:
            feedback.rating = rating
            feedback.comment = comment[:MAX_COMMENT_CHARS]
            feedback.save(update_fields=["rating", "comment", "updated_at"])
        feedback_saved.send(sender=ChatFeedback, feedback=feedback, created=created)
    return feedback, created


def feedback_item(feedback: ChatFeedback) -> dict[str, Any]:
    """A rating as the socket and the API answer it."""
    return {
        "message_id": feedback.message_id,
        "rating": feedback.rating,
        "comment": feedback.comment,
        "updated_at": iso(feedback.updated_at),
    }


# --- asking for a person -----------------------------------------------------------------


def mark_needs_human(session_id: str, reason: str, source: str) -> bool:
    """Mark a stored chat as needing a person (False: no such chat)."""
    now = timezone.now()
    with transaction.atomic():
        session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return False
        session.needs_human = True
        session.needs_human_since = session.needs_human_since or now
        session.handoff_reason = reason[:MAX_REASON_CHARS]
        session.save(update_fields=["needs_human", "needs_human_since", "handoff_reason"])
        handoff_requested.send(
            sender=ChatSession, session=session, reason=session.handoff_reason, source=source
        )
    return True


# --- takeover ----------------------------------------------------------------------------


def take_over(session_id: str, staff: Any) -> str | None:
    """``staff`` takes the chat over (from anyone who had it); their name, or None when
    the chat is not stored. From here on no run of the chat starts."""
    now = timezone.now()
    name = staff_name(staff)
    with transaction.atomic():
        session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            return None
        ChatTakeover.objects.filter(session_id=session_id, ended_at=None).update(ended_at=now)
        ChatTakeover.objects.create(
            session_id=session_id, staff=staff, staff_name=name, started_at=now
        )
        ChatSession.objects.filter(pk=session_id).update(
            taken_over_by=staff, taken_over_at=now, needs_human=False, needs_human_since=None
        )
    return name


def hand_back(session_id: str) -> bool:
    """The assistant answers again; False if the chat was not taken over."""
    now = timezone.now()
    with transaction.atomic():
        session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None or session.taken_over_at is None:
            return False
        ChatTakeover.objects.filter(session_id=session_id, ended_at=None).update(ended_at=now)
        ChatSession.objects.filter(pk=session_id).update(taken_over_by=None, taken_over_at=None)
    return True


def _taken_over(session_id: str) -> bool:
    return ChatSession.objects.filter(pk=session_id, taken_over_at__isnull=False).exists()


def _append(session_id: str, row: ChatMessage) -> dict[str, Any] | None:
    """Insert ``row`` after the chat's last message if the chat is taken over (in one
    transaction, under the row lock); its history item, or None when it is not."""
    now = timezone.now()
    with transaction.atomic():
        bumped = bump_version(session_id, now)
        if not _taken_over(session_id):
            transaction.set_rollback(True)
            return None
        row.session_id = session_id
        row.position = 0 if bumped.last_position is None else bumped.last_position + 1
        row.follows = bumped.last_id  # the shown path's last message (durable.branches)
        insert([row], returning_pk=True)
        if row.role == "user" and not bumped.title:
            title = title_from(row.content)
            ChatSession.objects.filter(pk=session_id, title="").update(title=title)
    remember(session_id, bumped.history_version, [message_from_row(row)])
    return history_item(row)


def store_staff_message(session_id: str, staff: Any, content: str) -> dict[str, Any] | None:
    """Store what ``staff`` wrote (role ``staff``); None if the chat is not taken over."""
    extra = {"attributes": {}, "staff": {"id": staff.pk, "name": staff_name(staff)}}
    row = ChatMessage(role=STAFF_ROLE, content=content, extra=extra, created_at=timezone.now())
    return _append(session_id, row)


def store_customer_message(
    session_id: str, content: str, attachments: Sequence[str] = ()
) -> dict[str, Any] | None:
    """Store a customer's message (with its files) while the chat is taken over: no run
    answers it. None if it is not taken over (any more): then a run answers it."""
    files = {ATTACHMENTS_ATTRIBUTE: list(attachments)} if attachments else {}
    row = ChatMessage(role="user", content=content, extra={"attributes": files})
    row.created_at = timezone.now()
    item = _append(session_id, row)
    if item is not None and attachments:
        item["attachments"] = attachment_refs(session_id, attachments)
    return item
