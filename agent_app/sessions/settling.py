"""Settling the runs a dead process left, and taking a session's run lease.

To *settle* a run is what ``agent_app.durable.recovery`` decides for a run still stored as
``running`` that no process runs (its process died): it becomes ``interrupted`` (its open
tool calls closed) or ``paused`` (it waits for replies that can still be given). The
``Settler`` of a session does it when the session is touched — a socket joins, a message
starts a run, a followed run's lease expires, the process drains — always under the
session's lock with no run active here, and under the session's lease, so two workers
never settle one run twice. It then tells every socket (one frame a run).

A dead run that can go on is *continued* here instead (``agent_app.durable.continuation``):
the settler takes the lease in that run's own name — from that moment every other worker
sees the run live, so exactly one worker continues it however many noticed — the
recovery claims it (one more attempt on its row), and the host runs it on
(``SettlerHost.adopt``) holding that lease. A process that is shutting down continues
nothing.

``take_lease`` is how a run claims the session on the bus before it is stored: ``Busy``
while another run holds the lease, a short retry while a run that has just ended lets go.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async

from agent_app.assistants import Entry, entry_from, entry_returning
from agent_app.bus.base import WORKER_ID, Marker, SessionBus
from agent_app.durable import recovery
from agent_app.durable.orm_thread import orm_call
from agent_app.durable.persistence import shielded
from agent_app.durable.runs import Begun, StaleRuns, begin_run
from agent_app.models import RunStatus
from agent_app.process import shutdown
from agent_app.protocol.frames import encode_frame
from agent_app.protocol.refusals import Busy
from agent_app.sessions.fanout import Feed
from agent_app.telemetry import metrics
from agent_app.telemetry.waits import expired_waits

__all__ = ["LEASE_ATTEMPTS", "Settler", "SettlerHost", "take_lease"]


def _begin_and_enter(session_id: str, request_id: str, **fields: Any) -> tuple[Begun, Any]:
    """``begin_run``, then what the run's top checks (``read_entry``'s ``Entry``, read by
    the statement that locks the chat's row; what it raised instead, raised there), in
    one thread hop."""
    begun = begin_run(session_id, request_id, also=entry_returning(), **fields)
    try:
        return begun, entry_from(begun.also, begun.title)
    except Exception as error:  # the run fails at its top, as if it had read it there
        return begun, error


#: Built once (every run starts here); the lean hop of ``agent_app.durable.orm_thread``.
_begin_run = orm_call(_begin_and_enter)

#: Tries to take a lease that an ending run (or a settling) is about to let go.
LEASE_ATTEMPTS = 40


class SettlerHost(Protocol):
    """What the settler needs of its session (``LiveSession``)."""

    session_id: str
    feed: Feed
    bus: SessionBus

    async def adopt(self, outcome: recovery.Settled) -> None:
        """Run on a dead run claimed for continuation (under the lock, its lease held)."""


class Settler:
    """Settles one session's runs whose process died (see the module docstring)."""

    def __init__(self, host: SettlerHost, is_live: Callable[[str], Awaitable[bool]]) -> None:
        self.host = host
        #: Whether some process runs a request of the session (its lease says so).
        self.is_live = is_live

    async def settle(
        self, *, abandon_paused: bool = False, leased: bool = False, own: str = ""
    ) -> list[str]:
        """Settle runs whose process died (under the lock, no run active here).

        ``abandon_paused``: a new message is starting, so a paused run's questions are
        dropped (the conversation moved on). ``leased``: the caller holds the session's
        lease already. Returns the paused runs whose replies are all known: the caller
        continues them, and those whose continuation was due but never started.
        A process that shuts down settles no dead run but ``own`` (its own waiting run):
        the others are for a worker that stays to continue.
        """
        host = self.host
        session_id, bus = host.session_id, host.bus
        stale = await database_sync_to_async(recovery.stale_runs)(session_id)
        if not stale:
            return []
        dead = [
            request_id
            for request_id, status in stale
            if status == RunStatus.RUNNING and not await self.is_live(request_id)
        ]
        if shutdown.draining():
            dead = [request_id for request_id in dead if request_id == own]
        # The run this settling may continue: at most one runs per session.
        candidate = dead[0] if dead and not leased and not shutdown.draining() else ""
        if not leased and await bus.acquire(session_id, candidate) is None:
            return []  # another worker runs the session, or settles it right now
        adopted = False
        try:
            settled = await database_sync_to_async(recovery.recover_session)(
                session_id,
                dead,
                abandon_paused=abandon_paused,
                continuing=candidate,
                worker=WORKER_ID,
            )
            metrics.lease_takeover(len(dead))
            await expired_waits(session_id, settled)
            await self._announce(settled)
            for outcome in settled:
                if outcome.status == RunStatus.RUNNING:
                    metrics.run_continued()
                    await self.host.adopt(outcome)
                    adopted = True
            ready = [outcome.request_id for outcome in settled if outcome.ready]
            if not abandon_paused:
                due = await database_sync_to_async(recovery.answered_paused_runs)(session_id)
                ready.extend(request_id for request_id in due if request_id not in ready)
        finally:
            if not leased and not adopted:
                await bus.flushed(session_id)
                await bus.release(session_id)
        return ready

    async def _announce(self, settled: list[recovery.Settled]) -> None:
        """One frame a settled run, numbered from the block the settling stored."""
        feed = self.host.feed
        for outcome in settled:
            feed.seq.add_block(*outcome.seq_block)
        for outcome in settled:
            if outcome.status == RunStatus.RUNNING:
                continue  # its run announces it (``adopt``)
            seq = await feed.next_seq()
            await feed.broadcast(seq, encode_frame(outcome.frame(seq)), marker=Marker.UNKEPT)

    async def begin(
        self, request_id: str, *, resumed_from: str, **fields: Any
    ) -> tuple[Begun, Entry | Exception]:
        """Store a run (``begin_run``: under the lock and the lease); settle dead runs first.
        With it, what the run's top checks (``enter_run``'s entry) is read in the same hop.

        A new message (no ``resumed_from``) settles the runs a dead process left before it
        is stored, abandoning paused ones; ``begin_run`` says whether there are any.
        """
        begin = functools.partial(
            _begin_run,
            self.host.session_id,
            request_id,
            worker=WORKER_ID,
            resumed_from=resumed_from,
            **fields,
        )
        try:
            return await shielded(begin(refuse_stale=not resumed_from))
        except StaleRuns:
            ready = await self.settle(abandon_paused=True, leased=True)
            assert not ready  # a new message abandons paused runs; nothing is left to resume
            return await shielded(begin())


async def take_lease(bus: SessionBus, session_id: str, request_id: str) -> None:
    """Take the session's run lease; ``Busy`` while another run holds it.

    A run's last frame goes out just before its worker lets the lease go, so a client
    that answers that frame at once may find the lease still held by a run that has
    ended: then the lease is taken as soon as it is free (within moments).
    """
    for attempt in range(LEASE_ATTEMPTS):
        if await bus.acquire(session_id, request_id) is not None:
            return
        holder = await bus.holder(session_id)
        if holder is None:
            continue  # let go meanwhile
        ending = not holder.request_id or not await database_sync_to_async(recovery.is_running)(
            holder.request_id
        )
        if not ending:
            raise Busy(holder.request_id)
        await asyncio.sleep(0.002 * (attempt + 1))
    raise Busy(None)  # still held by a run that ends: it let go of nothing in time
