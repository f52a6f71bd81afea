"""Delivering the outbox: ``Deliverer``, a loop any number of workers run at once.

Each round claims due deliveries and sends each in a task of its own, at most ``BATCH`` at
once (a receiver that never answers holds one of them until its deadline). A claim is
one conditional update per row — ``attempts`` + 1 and ``next_attempt_at`` moved past the
attempt's deadline, where ``attempts`` still has the value read — so of several workers
exactly one makes each attempt. The attempt's result is written by the worker that made
it: delivered (a 2xx), or the next attempt's time from ``ZETT_WEBHOOK_RETRIES`` (5 s,
30 s, 2 min …), or given up after the last. A worker that dies mid-attempt leaves its
claim to lapse: the row is due again once the attempt's deadline has passed, and the next
attempt carries the same ``webhook-id`` and body (new timestamp, new signature). So a
message is delivered at least once; receivers drop repeats by ``webhook-id``.

Between rounds the loop sleeps until the next row is due (at most ``POLL_SECONDS``), or
until ``emit`` wakes it: a transaction of this process committed new deliveries. Another
process's are found by the poll. A webhook switched off keeps its deliveries pending
until it is switched on again. Once an hour each loop deletes the delivered and given-up
rows older than ``ZETT_WEBHOOK_KEEP_DAYS`` (``prune``).

``start``/``stop`` (or ``run`` awaited in a task of one's own) is the whole seam: the loop
needs nothing but the database and an event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.db.models import Min
from django.utils import timezone

from agent_app import conf
from agent_app.models.webhooks import DeliveryStatus, WebhookDelivery
from agent_app.process.loop_task import LoopTask
from agent_app.webhooks.client import Answer, post
from agent_app.webhooks.events import listen, unlisten
from agent_app.webhooks.signing import headers_for

__all__ = ["BATCH", "POLL_SECONDS", "Claimed", "Deliverer", "claim_due", "prune", "record"]

logger = logging.getLogger(__name__)

#: Deliveries one round claims at most (and sends at once).
BATCH = 20
#: Longest sleep between rounds: how soon another process's deliveries are seen.
POLL_SECONDS = 2.0
#: Seconds between two prunes of the delivery log by one loop (``prune``).
PRUNE_SECONDS = 3600.0
#: Shortest sleep between rounds (a row due now that another worker just took).
MIN_SLEEP = 0.05
#: Attempts kept in a delivery's log.
LOG_ATTEMPTS = 20
#: Seconds a claim outlives its attempt's deadline (then another worker may retry it): the
#: attempt has ended by its deadline, and its result is written a moment later.
CLAIM_MARGIN = 5.0


@dataclass(frozen=True, slots=True)
class Claimed:
    """One attempt this worker won: what to send, and where."""

    pk: int
    attempt: int
    url: str
    secret: str
    message_id: str
    body: str
    log: list[dict[str, Any]]


def claim_due(now: datetime, limit: int = BATCH) -> list[Claimed]:
    """Claim up to ``limit`` deliveries due at ``now``; those this worker won."""
    timeout = float(conf.ZETT_WEBHOOK_TIMEOUT)
    due = list(
        WebhookDelivery.objects.filter(
            status=DeliveryStatus.PENDING, next_attempt_at__lte=now, webhook__active=True
        )
        .order_by("next_attempt_at", "pk")
        .values_list("pk", "attempts")[:limit]
    )
    until = now + timedelta(seconds=timeout + CLAIM_MARGIN)
    won = [
        pk
        for pk, attempts in due
        if WebhookDelivery.objects.filter(
            pk=pk, attempts=attempts, status=DeliveryStatus.PENDING
        ).update(attempts=attempts + 1, next_attempt_at=until)
    ]
    rows = WebhookDelivery.objects.filter(pk__in=won).select_related("webhook").order_by("pk")
    return [
        Claimed(
            row.pk,
            row.attempts,
            row.webhook.url,
            row.webhook.secret,
            row.message_id,
            row.body,
            list(row.log or []),
        )
        for row in rows
    ]


def record(claimed: Claimed, answer: Answer, at: datetime, took: float) -> str:
    """Write how ``claimed``'s attempt went; the delivery's status after it."""
    retries = [float(seconds) for seconds in conf.ZETT_WEBHOOK_RETRIES]
    entry = {
        "attempt": claimed.attempt,
        "at": at.isoformat().replace("+00:00", "Z"),
        "status": answer.status,
        "error": answer.error,
        "ms": round(took * 1000, 1),
    }
    fields: dict[str, Any] = {
        "last_status": answer.status,
        "last_error": answer.error,
        "log": [*claimed.log, entry][-LOG_ATTEMPTS:],
    }
    if answer.ok:
        fields.update(status=DeliveryStatus.DELIVERED, delivered_at=timezone.now())
    elif claimed.attempt > len(retries):
        fields.update(status=DeliveryStatus.FAILED)
    else:
        delay = timedelta(seconds=retries[claimed.attempt - 1])
        fields.update(next_attempt_at=timezone.now() + delay)
    WebhookDelivery.objects.filter(
        pk=claimed.pk, attempts=claimed.attempt, status=DeliveryStatus.PENDING
    ).update(**fields)
    return str(fields.get("status", DeliveryStatus.PENDING))


def prune(now: datetime) -> int:
    """Delete delivered and given-up deliveries older than ``ZETT_WEBHOOK_KEEP_DAYS``;
    how many."""
    days = float(conf.ZETT_WEBHOOK_KEEP_DAYS)
    if days <= 0:
        return 0
    old = WebhookDelivery.objects.filter(
        status__in=[DeliveryStatus.DELIVERED, DeliveryStatus.FAILED],
        created_at__lt=now - timedelta(days=days),
    )
    deleted, _ = old.delete()
    return deleted


def seconds_to_next(now: datetime) -> float:
    """Seconds until the next pending delivery is due (``POLL_SECONDS`` at most)."""
    due = WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING, webhook__active=True
    ).aggregate(first=Min("next_attempt_at"))["first"]
    if due is None:
        return POLL_SECONDS
    return min(POLL_SECONDS, max(MIN_SLEEP, (due - now).total_seconds()))


class Deliverer(LoopTask):
    """The delivery loop of one process (see the module docstring)."""

    task_name = "zett-webhook-deliveries"
    # Stopping it drops an attempt under way: its claim lapses, and it is made again.

    def __init__(self, *, poll: float = POLL_SECONDS) -> None:
        self.poll = poll
        self._claim = database_sync_to_async(claim_due)
        self._record = database_sync_to_async(record)
        self._next = database_sync_to_async(seconds_to_next)
        self._prune = database_sync_to_async(prune)
        #: The event loop's clock at the last prune (None: not yet).
        self._pruned: float | None = None
        #: Attempts this loop made and recorded, and a condition set after each.
        self.attempts = 0
        self._recorded = asyncio.Condition()

    async def run(self) -> None:
        """Deliver what is due, round after round, until cancelled.

        Attempts run in tasks of their own, at most ``BATCH`` at once: a receiver that
        never answers holds one of them until its deadline, not the others. A finished
        attempt wakes the loop (room for the next). Cancelling the loop cancels them.
        """
        wake = asyncio.Event()
        listen(wake)
        flying: set[asyncio.Task[None]] = set()

        def landed(task: asyncio.Task[None]) -> None:
            flying.discard(task)
            wake.set()

        try:
            while True:
                wake.clear()
                delay = self.poll
                try:
                    room = BATCH - len(flying)
                    claimed = await self._claim(timezone.now(), room) if room > 0 else []
                    for item in claimed:
                        task = asyncio.create_task(self._attempt(item))
                        flying.add(task)
                        task.add_done_callback(landed)
                    if room > 0 and len(claimed) < room:
                        delay = min(self.poll, await self._next(timezone.now()))
                    await self._prune_now_and_then()
                except Exception:
                    logger.exception("Webhook deliveries failed this round; trying again")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await wake.wait()
        finally:
            unlisten(wake)
            for task in flying:
                task.cancel()
            if flying:
                await asyncio.wait(flying)

    async def _prune_now_and_then(self) -> None:
        clock = asyncio.get_running_loop().time()
        if self._pruned is None or clock - self._pruned >= PRUNE_SECONDS:
            self._pruned = clock
            await self._prune(timezone.now())

    async def recorded(self, count: int) -> None:
        """Return once this loop has made and recorded ``count`` attempts."""
        async with self._recorded:
            await self._recorded.wait_for(lambda: self.attempts >= count)

    async def deliver_due(self) -> int:
        """One round: claim what is due and send it; how many attempts were made."""
        claimed = await self._claim(timezone.now())
        if claimed:
            await asyncio.gather(*(self._attempt(item) for item in claimed))
        return len(claimed)

    async def _attempt(self, claimed: Claimed) -> None:
        try:
            await self._send(claimed)
        except Exception:  # the record failed (the database): the claim lapses, retried
            logger.exception("Webhook %s: the attempt could not be recorded", claimed.message_id)

    async def _send(self, claimed: Claimed) -> None:
        at = timezone.now()
        body = claimed.body.encode("utf-8")
        headers = headers_for(claimed.secret, claimed.message_id, claimed.body, at)
        clock = asyncio.get_running_loop().time
        started = clock()
        answer = await post(claimed.url, headers, body, seconds=float(conf.ZETT_WEBHOOK_TIMEOUT))
        status = await self._record(claimed, answer, at, clock() - started)
        async with self._recorded:
            self.attempts += 1
            self._recorded.notify_all()
        if not answer.ok:
            logger.info(
                "Webhook %s to %s, attempt %d: %s (%s)",
                claimed.message_id,
                claimed.url,
                claimed.attempt,
                answer.error,
                status,
            )
