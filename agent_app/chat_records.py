"""The record of every chat ever stored: what the quota counts, and what stays deleted.

A ``ChatCreation`` row is written in the transaction that stores a chat (by its first
message, ``agent_app.guard.access.ensure_session``, or a run's write-ahead step,
``agent_app.durable.runs.begin_run``), and is kept when the chat is deleted, marked
``deleted_at``. Two rules follow from it:

- **the chats-per-hour quota counts chats created** (``created_since``), not chats that
  still exist: deleting chats gives no quota back;
- **a deleted chat stays deleted**: its id is never stored again (``was_deleted``), so
  another tab's next message cannot bring it back, and its sockets are told and closed.

Telling the sockets (``ChatSession`` ``post_delete``): those of this process at once; a
signed-in owner's sockets in every process through their user group (the channel layer);
an anonymous browser's sockets in another process when they next send a message (its run
finds the chat deleted: ``ChatDeleted``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from agent_app.models import ChatCreation, ChatSession

__all__ = [
    "CHAT_DELETED_EVENT",
    "ChatDeleted",
    "created_since",
    "creator_key",
    "record_creation",
    "was_deleted",
]

logger = logging.getLogger(__name__)

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


@receiver(post_delete, sender=ChatSession, dispatch_uid="zett.chat_deleted")
def chat_was_deleted(sender: Any, instance: ChatSession, **kwargs: Any) -> None:
    """Mark the chat's record deleted; once that is committed, close its sockets."""
    now = timezone.now()
    marked = ChatCreation.objects.filter(session_id=instance.pk).update(deleted_at=now)
    if not marked:  # a chat stored by code that kept no record
        ChatCreation.objects.create(
            session_id=instance.pk,
            creator=creator_key(instance.owner_id, instance.browser_key),
            created_at=instance.created_at or now,
            deleted_at=now,
        )
    session_id, owner_id = str(instance.pk), instance.owner_id
    transaction.on_commit(lambda: _tell_sockets(session_id, owner_id))


def _tell_sockets(session_id: str, owner_id: Any) -> None:
    if owner_id is not None:
        from agent_app.guard.access import user_group

        layer = get_channel_layer()
        if layer is not None:
            try:
                async_to_sync(layer.group_send)(
                    user_group(owner_id), {"type": CHAT_DELETED_EVENT, "session_id": session_id}
                )
            except Exception:
                logger.warning("Could not tell the sockets of chat %s it was deleted", session_id)
    async_to_sync(_close_sockets_here)(session_id)


async def _close_sockets_here(session_id: str) -> None:
    """Close the sockets this process holds on the chat (in the loop that serves them)."""
    from agent_app.sessions.registry import existing_live_sessions

    registry = existing_live_sessions()
    live = registry.get(session_id) if registry is not None else None
    if live is None:
        return
    for socket in list(live.sockets):
        closer = getattr(socket, "chat_deleted", None)
        if closer is not None:
            await closer()
