"""``Webhook`` and ``WebhookDelivery`` rows (registered by ``agent_app.models``).

A ``WebhookDelivery`` is the outbox: written in the transaction of its event
(``agent_app.webhooks.events.emit``), so an event that happened is never lost and one
that was rolled back is never sent. Its ``body`` is the exact text signed and sent on
every attempt, and ``message_id`` the ``webhook-id`` every attempt carries: a receiver
drops a message it has seen by that id. ``next_attempt_at`` is both the schedule and the
claim: a worker takes a due row by moving it forward (``agent_app.webhooks.delivery``).
"""

from __future__ import annotations

import base64
import secrets

from django.core.exceptions import ValidationError
from django.db import models

#: Every event a webhook may ask for (``agent_app.webhooks.events`` sends them).
EVENT_TYPES = (
    "run.completed",
    "run.failed",
    "run.waiting",
    "chat.handoff_requested",
    "feedback.created",
)
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def check_secret(secret: str) -> None:
    """``ValidationError`` unless ``secret`` is ``whsec_<base64 of 24 to 64 bytes>``."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValidationError(f"A webhook secret starts with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except ValueError:
        raise ValidationError("A webhook secret is whsec_ and base64 text") from None
    if not 24 <= len(key) <= 64:
        raise ValidationError(f"A webhook secret holds 24 to 64 bytes, this one {len(key)}")


def event_names(value: object) -> list[str]:
    """The names in a webhook's ``events`` as stored: a list, or a comma-separated text."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        return []
    return [item.strip() for item in items if isinstance(item, str) and item.strip()]


def parse_events(value: object) -> list[str]:
    """The event list of ``value`` (a list, or a comma-separated text), checked."""
    events = event_names(value)
    unknown = [event for event in events if event not in EVENT_TYPES]
    if unknown:
        raise ValidationError(
            f"Unknown webhook event {unknown[0]!r}; the events are {', '.join(EVENT_TYPES)}"
        )
    if not events:
        raise ValidationError(f"Name at least one event of {', '.join(EVENT_TYPES)}")
    return sorted(set(events), key=EVENT_TYPES.index)


class Webhook(models.Model):
    """A URL told of the events it asks for, each message signed with its secret."""

    url = models.URLField(max_length=2000)
    #: The events it receives: a list of ``EVENT_TYPES``.
    events = models.JSONField(default=list)
    secret = models.CharField(max_length=200, default=new_secret)
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    @property
    def event_list(self) -> list[str]:
        return event_names(self.events)

    def clean(self) -> None:
        from agent_app.models.addresses import UnsafeURL, check_url

        errors: dict[str, list[str]] = {}
        try:
            check_url(self.url)
        except UnsafeURL as unsafe:
            errors["url"] = [str(unsafe)]
        try:
            self.events = parse_events(self.events)
        except ValidationError as bad:
            errors["events"] = bad.messages
        try:
            check_secret(self.secret)
        except ValidationError as bad:
            errors["secret"] = bad.messages
        if errors:
            raise ValidationError(errors)

    def __str__(self) -> str:
        return f"{self.url} ({', '.join(self.event_list)})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    #: Every attempt failed: given up (the log says why).
    FAILED = "failed", "failed"


class WebhookDelivery(models.Model):
    """One event for one webhook: what is sent, and how each attempt went."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    #: The ``webhook-id`` header, the same on every attempt (one per event).
    message_id = models.CharField(max_length=64, db_index=True)
    event_type = models.CharField(max_length=64)
    #: The JSON body, exactly as signed and sent.
    body = models.TextField()
    created_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    #: When the next attempt is due; moved forward by the worker that claims it.
    next_attempt_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    #: The HTTP status of the last attempt (None: no answer).
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    #: Each attempt: ``{"at", "status", "error", "ms"}`` (the last ``LOG_ATTEMPTS``).
    log = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="webhook_delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.message_id} → {self.webhook_id} ({self.status})"
