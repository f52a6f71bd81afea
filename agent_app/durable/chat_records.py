"""The record of every chat ever stored: what the quota counts, and what stays deleted.

A ``ChatCreation`` row is written in the transaction that stores a chat (by its first
message, ``agent_app.guard.access.ensure_session``, or a run's write-ahead step,
``agent_app.durable.runs.begin_run``), and is kept when the chat is deleted, marked
``deleted_at``. Two rules follow from it:

- **the chats-per-hour quota counts chats created** (``created_since``), not chats that
  still exist: deleting chats gives no quota back;
- **a deleted chat stays deleted**: its id is never stored again (``was_deleted``), so
  another tab's next message cannot bring it back, and its sockets are told and closed.

The ``ChatSession`` ``post_delete`` receiver (``agent_app.guard.access.chat_was_deleted``)
marks the record (``mark_deleted``) and tells the chat's sockets: those of this process at
once; a signed-in owner's sockets in every process through their user group (the channel
layer); an anonymous browser's sockets in another process when they next send a message
(its run finds the chat deleted: ``ChatDeleted``). This module only reads and writes the
records, so everything that stores a chat can import it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from agent_app.models import ChatCreation, ChatSession

__all__ = [
    "CHAT_DELETED_EVENT",
    "ChatDeleted",
    "created_since",
    "creator_key",
    "mark_deleted",
    "record_creation",
    "was_deleted",
    "was_deleted_by",
]

#: The channel layer message that tells a user's sockets one of their chats was deleted.
CHAT_DELETED_EVENT = "zett.chat_deleted"


class ChatDeleted(Exception):
    """The chat was deleted: it is not stored again."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Chat {session_id} was deleted")
        self.session_id = session_id


def creator_key(owner_id: Any, browser_key: str | None) -> str:
    """Who created a chat, named as ``agent_app.guard.access.Person.key`` names people."""
    return f"user:{owner_id}" if owner_id is not None else f"browser:{browser_key or ''}"


def record_creation(session_id: str, creator: str, when: datetime | None = None) -> None:
    """Record that ``creator`` stored the chat (call it in the transaction that stores it)."""
    ChatCreation.objects.get_or_create(
        session_id=session_id,
        defaults={"creator": creator, "created_at": when or timezone.now()},
    )


def created_since(creator: str, since: datetime) -> int:
    """How many chats ``creator`` stored since ``since``, deleted ones included."""
    return ChatCreation.objects.filter(creator=creator, created_at__gte=since).count()


def was_deleted(session_id: str) -> bool:
    return ChatCreation.objects.filter(session_id=session_id, deleted_at__isnull=False).exists()


def was_deleted_by(session_id: str, creator: str) -> bool:
    """Whether ``creator`` stored the chat and it was deleted (only its creator is told:
    to anyone else a deleted chat is as unknown as one that never was)."""
    return ChatCreation.objects.filter(
        session_id=session_id, creator=creator, deleted_at__isnull=False
    ).exists()


def mark_deleted(chat: ChatSession) -> None:
    """Mark ``chat``'s record deleted (call it in the transaction that deletes the chat)."""
    now = timezone.now()
    marked = ChatCreation.objects.filter(session_id=chat.pk).update(deleted_at=now)
    if not marked:  # a chat stored by code that kept no record
        ChatCreation.objects.create(
            session_id=chat.pk,
            creator=creator_key(chat.owner_id, chat.browser_key),
            created_at=chat.created_at or now,
            deleted_at=now,
        )
