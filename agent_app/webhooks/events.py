"""The outbox's one way in: ``emit(event_type, data)``.

Call ``emit`` inside the transaction of the change it reports (a run's end, a wait that
opens, a handoff, a piece of feedback). It writes one ``WebhookDelivery`` row for every
active webhook that asked for ``event_type``, in that transaction: the event is sent if
and only if the change commits, and a crash after the commit loses nothing (any worker's
``Deliverer`` sends it). It never calls out, so it costs the caller one query (which
webhooks want it) when nobody listens, and one insert more when somebody does. Once the
transaction commits, this process's deliverers are woken to send at once.

``data`` may be a callable: it is called only when some webhook listens, so reading more
for the message (an answer's text) costs nothing otherwise. The body every receiver gets
is ``{"type", "timestamp", "data"}`` (docs/operations.md, *Webhooks*).

    from agent_app.webhooks.events import emit

    with transaction.atomic():
        feedback = ChatFeedback.objects.create(...)
        emit("feedback.created", {"chat_id": ..., "message_id": ..., "rating": "down"})
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

from agent_app.durable.statements import insert
from agent_app.webhooks.models import EVENT_TYPES, Webhook, WebhookDelivery

__all__ = ["EVENT_TYPES", "body_of", "emit", "listen", "unlisten"]

Data = dict[str, Any] | Callable[[], dict[str, Any]]

_listeners: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
_lock = threading.Lock()


def emit(event_type: str, data: Data) -> int:
    """Queue ``event_type`` with ``data`` for every webhook that wants it, in the
    current transaction; how many deliveries were queued. ``ValueError`` for an event
    type that is not one of ``EVENT_TYPES``."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"Unknown webhook event {event_type!r}; the events are {EVENT_TYPES}")
    hooks = [
        pk
        for pk, events in Webhook.objects.filter(
            active=True, events__contains=event_type
        ).values_list("pk", "events")
        if event_type in events.split(",")
    ]
    if not hooks:
        return 0
    now = timezone.now()
    body = body_of(event_type, data() if callable(data) else data, now)
    message_id = f"msg_{uuid.uuid4().hex}"
    insert(
        [
            WebhookDelivery(
                webhook_id=pk,
                message_id=message_id,
                event_type=event_type,
                body=body,
                created_at=now,
                next_attempt_at=now,
            )
            for pk in hooks
        ]
    )
    transaction.on_commit(_wake)
    return len(hooks)


def body_of(event_type: str, data: dict[str, Any], at: datetime) -> str:
    """The JSON text of one event (what is signed and sent)."""
    return json.dumps(
        {"type": event_type, "timestamp": _iso(at), "data": data},
        cls=DjangoJSONEncoder,
        separators=(",", ":"),
    )


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def listen(event: asyncio.Event) -> None:
    """Set ``event`` (on the running loop) whenever new deliveries are committed here."""
    with _lock:
        _listeners.add((asyncio.get_running_loop(), event))


def unlisten(event: asyncio.Event) -> None:
    with _lock:
        for item in [item for item in _listeners if item[1] is event]:
            _listeners.discard(item)


def _wake() -> None:
    with _lock:
        listeners = list(_listeners)
    for loop, event in listeners:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # its loop is closed: it stopped listening without saying
            unlisten(event)
