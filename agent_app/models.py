"""What a chat leaves in the database: sessions, their messages, external replies, notes.

A ``ChatMessage`` row is one runtime message: the columns hold what the admin searches and
filters on, ``extra`` keeps every other field of the serialised message, so a row turns
back into exactly the message that was saved (see ``agent_app.persistence``).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from zett_agent.messages import MessageRole

#: How long a title derived from the first user message may get.
TITLE_LENGTH = 80


class ChatSession(models.Model):
    """One conversation; its id is the agent's session id and the socket's URL part."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="chat_sessions",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: The last ``seq`` sent in an ``agent_event`` frame, so a session that goes live again
    #: (new process, all sockets closed meanwhile) keeps numbering upwards.
    last_event_seq = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"Session {str(self.id)[:8]}"


class ChatMessage(models.Model):
    """One persisted message of a session, at its position in the conversation."""

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    request_id = models.CharField(max_length=64, blank=True, db_index=True)
    role = models.CharField(
        max_length=16, choices=[(role.value, role.name.title()) for role in MessageRole]
    )
    #: A string, or a list of content parts (text and images) as serialised by zett_agent.
    content = models.JSONField(default=str, blank=True)
    reasoning = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=255, blank=True)
    #: The tool's name on a tool result.
    name = models.CharField(max_length=255, blank=True)
    #: Whether a tool result succeeded; null for other roles.
    success = models.BooleanField(null=True, blank=True)
    #: Token usage of the model call that produced an assistant message.
    usage = models.JSONField(null=True, blank=True)
    #: The rest of the serialised message (attributes, provider, model …).
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "position"], name="unique_message_position_per_session"
            )
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.role}"


class ExternalEventRecord(models.Model):
    """Audit trail of every reply a client sent to a session (approvals, answers, steering)."""

    session = models.ForeignKey(
        ChatSession, on_delete=models.CASCADE, related_name="external_events"
    )
    request_id = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=255)
    payload = models.JSONField(default=dict, blank=True)
    #: Names of the extensions that claimed the event; empty means it was rejected.
    accepted_by = models.JSONField(default=list, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at"]

    @property
    def accepted(self) -> bool:
        return bool(self.accepted_by)

    def __str__(self) -> str:
        return f"{self.name} ({'accepted' if self.accepted else 'rejected'})"


class Note(models.Model):
    """A note the demo ``save_note`` tool writes once the user approved it."""

    session = models.ForeignKey(
        ChatSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="notes"
    )
    title = models.CharField(max_length=200)
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title
