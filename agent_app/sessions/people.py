"""People in the loop on a live session: takeover, staff messages, hand back, handoff.

Each action first records its change (``agent_app.people.records``), then tells every
socket with one numbered frame (``announce``). A frame outside a run is sent under the
session's lease — the one a run holds — so it cannot interleave with a run's frames on
any worker, and its ``seq`` is reserved in the database above every number ever handed
out. A run holding the lease is cancelled first (its partial answer is kept): a takeover
stops the assistant, and so does a customer asking for a person. When that run ran on
another worker, the frame waits until the run's last frame has reached this worker's
sockets (``Follower.ended``), so no socket sees a run's text after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from channels.db import database_sync_to_async
from django.db import transaction
from django.db.models import F

from agent_app import conf
from agent_app.bus.base import Marker
from agent_app.durable import recovery
from agent_app.models import ChatSession
from agent_app.people import hub, records
from agent_app.people.hours import support_hours_text
from agent_app.protocol.frames import encode_frame
from agent_app.protocol.people import (
    CustomerMessageFrame,
    HandedBackFrame,
    HandoffRequestedFrame,
    StaffMessageOutFrame,
    TakenOverFrame,
)
from agent_app.protocol.refusals import Busy, NotRunning
from agent_app.sessions.live import LiveSession
from agent_app.sessions.registry import live_sessions

__all__ = [
    "announce",
    "customer_message",
    "hand_back",
    "request_human",
    "staff_message",
    "take_over",
]

#: Tries to take the session's lease from a run that is ending (as ``take_lease``).
LEASE_ATTEMPTS = 60


def _reserve_seq(session_id: str) -> int:
    """One ``seq`` above every number reserved so far; the chat's last one from now on."""
    with transaction.atomic():
        rows = ChatSession.objects.filter(pk=session_id)
        rows.update(seq_reserved=F("seq_reserved") + 1)
        seq = rows.values_list("seq_reserved", flat=True).get()
        rows.update(last_event_seq=seq)
    return seq


async def _stop_holder(live: LiveSession) -> bool:
    """The lease is held: cancel the run holding it (True), or say it is ending (False)."""
    bus = live.bus
    holder = await bus.holder(live.session_id)
    if holder is None or not holder.request_id:
        return False
    # Watched before the run's row is read: its end is stored before its last frame goes
    # out, so a run still ``running`` there has its last frame still to come here.
    ended = live.follower.ended(holder.request_id) if holder.worker != bus.worker else None
    try:
        if not await database_sync_to_async(recovery.is_running)(holder.request_id):
            return False
        with contextlib.suppress(NotRunning):
            await live.cancel()
        if ended is not None:
            # Its last frames are on their way to this worker's sockets: they go first.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(ended), float(conf.ZETT_LEASE_SECONDS))
    finally:
        if ended is not None:
            ended.cancel()
    return True


async def _hold_lease(live: LiveSession) -> None:
    """Take the session's lease for a frame outside a run, cancelling a run that holds it."""
    for attempt in range(LEASE_ATTEMPTS):
        if await live.bus.acquire(live.session_id, "") is not None:
            return
        if not await _stop_holder(live):
            await asyncio.sleep(0.002 * (attempt + 1))
    raise Busy(None)


async def announce(live: LiveSession, build: hub.FrameBuilder) -> int:
    """Send ``build(seq)`` to every socket of the session, outside of any run; its ``seq``.

    A run that holds the session is cancelled first (see the module docstring).
    """
    await _hold_lease(live)
    try:
        async with live.feed.lock:
            seq = await database_sync_to_async(_reserve_seq)(live.session_id)
            await live.feed.broadcast(seq, encode_frame(build(seq)), marker=Marker.UNKEPT)
    finally:
        await live.bus.flushed(live.session_id)
        await live.bus.release(live.session_id)
    return seq


async def _announce_in_run(session_id: str, build: hub.FrameBuilder) -> None:
    """``hub.announce_in_run``: a frame of the run this process runs for the session."""
    live = live_sessions().session(session_id)
    run = live.run
    if run is None:  # not inside a run here after all: as any frame outside one
        await announce(live, build)
        return
    async with live.feed.lock:
        seq = await live.feed.next_seq()
        await live.feed.broadcast(seq, encode_frame(build(seq)), request_id=run.request_id)


hub.install(_announce_in_run)


def handoff_frame(seq: int, reason: str, source: str) -> dict[str, Any]:
    return HandoffRequestedFrame(
        seq=seq, reason=reason or None, source=source, hours=support_hours_text()
    ).dump()


async def request_human(live: LiveSession, reason: str) -> bool:
    """The customer asks for a person: mark the chat, stop the assistant, tell every
    socket. False when the chat is not stored yet (nothing to hand over)."""
    marked = await database_sync_to_async(records.mark_needs_human)(
        live.session_id, reason, "customer"
    )
    if marked:
        await announce(live, lambda seq: handoff_frame(seq, reason, "customer"))
    return marked


async def take_over(live: LiveSession, staff: Any) -> bool:
    """``staff`` takes the chat over; False when it is not stored (nothing to take)."""
    name = await database_sync_to_async(records.take_over)(live.session_id, staff)
    if name is None:
        return False
    await announce(live, lambda seq: TakenOverFrame(seq=seq, staff={"name": name}).dump())
    return True


async def hand_back(live: LiveSession) -> bool:
    """The assistant answers again; False when the chat was not taken over."""
    if not await database_sync_to_async(records.hand_back)(live.session_id):
        return False
    await announce(live, lambda seq: HandedBackFrame(seq=seq).dump())
    return True


async def staff_message(live: LiveSession, staff: Any, content: str) -> bool:
    """Store and show what ``staff`` wrote; False when the chat is not taken over."""
    item = await database_sync_to_async(records.store_staff_message)(
        live.session_id, staff, content
    )
    if item is None:
        return False

    def build(seq: int) -> dict[str, Any]:
        return StaffMessageOutFrame(
            seq=seq,
            content=item["content"],
            staff=item["staff"],
            position=item["position"],
            id=item["id"],
            created_at=item["created_at"],
        ).dump()

    await announce(live, build)
    return True


async def customer_message(
    live: LiveSession, content: str, attachments: Sequence[str] = ()
) -> bool:
    """Store the customer's message of a taken-over chat and show it (no run answers);
    False when the chat is not taken over (any more): a run answers it then."""
    item = await database_sync_to_async(records.store_customer_message)(
        live.session_id, content, attachments
    )
    if item is None:
        return False

    def build(seq: int) -> dict[str, Any]:
        return CustomerMessageFrame(
            seq=seq,
            content=item["content"],
            position=item["position"],
            id=item["id"],
            created_at=item["created_at"],
            attachments=item.get("attachments", []),
        ).dump()

    await announce(live, build)
    return True
