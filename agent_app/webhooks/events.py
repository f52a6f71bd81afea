"""The outbox's one way in: ``emit(event_type, data)``.

Call ``emit`` inside the transaction of the change it reports (a run's end, a wait that
opens, a handoff, a piece of feedback). It writes one ``WebhookDelivery`` row for every
active webhook that asked for ``event_type``, in that transaction: the event is sent if
and only if the change commits, and a crash after the commit loses nothing (any worker's
``Deliverer`` sends it). It never calls out. Which webhooks listen for what is read at most
once a second per process (``LISTENERS_SECONDS``; a webhook saved or deleted in this
process is seen at once, one saved in another within that second), so an event nobody
listens for costs nothing, and one somebody listens for costs one insert (and the reads
its ``data`` makes). Once the transaction commits, this process's deliverers are woken to
send at once.

``data`` may be a callable: it is called only when some webhook listens, so reading more
for the message (an answer's text) costs nothing otherwise. The body every receiver gets
is ``{"type", "timestamp", "data"}`` (docs/operations.md, *Webhooks*).

    from agent_app.webhooks.events import emit

    with transaction.atomic():
        rating = save_the_rating(...)  # the change the event reports
        emit("feedback.created", {"chat_id": ..., "message_id": ..., "rating": "down"})
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from agent_app.models.statements import insert
from agent_app.models.webhooks import EVENT_TYPES, Webhook, WebhookDelivery, event_names

__all__ = [
    "EVENT_TYPES",
    "LISTENERS_SECONDS",
    "body_of",
    "emit",
    "forget_listeners",
    "listen",
    "listeners",
    "unlisten",
]

Data = dict[str, Any] | Callable[[], dict[str, Any]]

logger = logging.getLogger(__name__)

#: Seconds the active webhooks are known without reading them again.
LISTENERS_SECONDS = 1.0
#: The clock the listeners' age is read on (tests move it).
clock = time.monotonic
_listening: tuple[float, dict[str, list[int]]] | None = None
_listeners: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
_lock = threading.Lock()


def emit(event_type: str, data: Data) -> int:
    """Queue ``event_type`` with ``data`` for every webhook that wants it, in the
    current transaction; how many deliveries were queued. ``ValueError`` for an event
    type that is not one of ``EVENT_TYPES``."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"Unknown webhook event {event_type!r}; the events are {EVENT_TYPES}")
    hooks = listeners().get(event_type)
    if not hooks:
        return 0
    now = timezone.now()
    try:
        body = body_of(event_type, data() if callable(data) else data, now)
    except DatabaseError:
        raise  # the transaction is broken: the change fails with it
    except Exception:  # a message that cannot be made must not undo the change it reports
        logger.exception("The %s webhook message could not be made; it is not sent", event_type)
        return 0
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


def listeners() -> dict[str, list[int]]:
    """The active webhooks of each event type (read at most once a second)."""
    global _listening
    now = clock()
    cached = _listening
    if cached is not None and now - cached[0] < LISTENERS_SECONDS:
        return cached[1]
    table: dict[str, list[int]] = {}
    for pk, events in Webhook.objects.filter(active=True).values_list("pk", "events"):
        for event in event_names(events):
            table.setdefault(event, []).append(pk)
    _listening = (now, table)
    return table


def forget_listeners(**kwargs: Any) -> None:
    """A webhook was saved or deleted here: read them again at the next event."""
    global _listening
    _listening = None


post_save.connect(forget_listeners, sender=Webhook, dispatch_uid="zett-webhook-listeners")
post_delete.connect(forget_listeners, sender=Webhook, dispatch_uid="zett-webhook-listeners-gone")


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
