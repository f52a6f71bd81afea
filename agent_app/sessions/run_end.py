"""How a run ends: its outcome stored (with its final answer) and its last frames sent,
or, on a shutdown's handover, no ending at all (mixed into ``agent_app.sessions.run.Run``).

The final answer is stored with the run's end, in one transaction, and its held
``model_completed`` frame goes out just before the run's last frame; a run that goes on
after its answer stores it and sends that frame first (``_release_held``). A handed-over
run stays ``running`` at its checkpoint and lets its lease go, so another worker
continues it at once (``_leave_running``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app.budgets.ledger import BudgetExceeded
from agent_app.bus.base import Marker
from agent_app.durable import recovery
from agent_app.durable.orm_thread import orm_call
from agent_app.durable.persistence import shielded, write_pending
from agent_app.durable.runs import end_run
from agent_app.models import RunStatus
from agent_app.protocol.text import event_frame_text
from agent_app.sessions.outcomes import outcome_frame
from agent_app.sessions.run_state import RunOwner, RunState, StopReason
from agent_app.telemetry import metrics
from agent_app.telemetry.waits import cancelled_waits
from zett_agent.agent import Agent

__all__ = ["RunEnding", "write_end"]

logger = logging.getLogger(__name__)

#: Built once (every run ends here; the lean hop of ``agent_app.durable.orm_thread``); also
#: the seam a test observes the writes through.
write_end = orm_call(end_run)


class RunEnding:
    """Mixed into ``Run``: recording its end and sending its last frames."""

    owner: RunOwner
    request_id: str
    stop: StopReason | None
    outcome: RunStatus | None
    usage: dict[str, int]
    waits: set[str]
    at_end: list[Any]
    held: list[dict[str, Any]] | None
    agent: Agent | None
    started: float
    trace_context: str
    refusal: BudgetExceeded | None

    if TYPE_CHECKING:

        @property
        def finished(self) -> bool: ...
        def to(self, state: RunState) -> None: ...

    async def finish(
        self,
        status: RunStatus,
        *,
        final: dict[str, Any] | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        """Record the outcome, then send its frame: the run's last act, under the lock.

        Shielded: a ``cancel`` that lands while the run waits here for the lock must not
        leave the session claimed by a run that is over.
        """
        if self.finished:
            return
        self.to(RunState.ENDING)
        self.outcome = status
        if metrics.ENABLED:
            seconds = asyncio.get_running_loop().time() - self.started if self.started else 0.0
            metrics.run_ended(metrics.assistant_of(self.agent), str(status), seconds)
        await shielded(self._record_end(status, final, error))

    async def _release_held(self) -> None:
        """The run goes on after a final answer: store it now and send its held frame."""
        await write_pending(self.owner.session_id, self.request_id, self.at_end)
        held, self.held = self.held or [], None
        for data in held:
            await self.owner.feed.broadcast_event(self.request_id, data)

    async def _record_end(
        self, status: RunStatus, final: dict[str, Any] | None, error: tuple[str, str] | None
    ) -> None:
        owner = self.owner
        feed = owner.feed
        async with feed.lock:
            try:
                held_seqs, seq = await self._store_end(status, error)
            finally:
                owner.run_ended(self)
            held, self.held = self.held or [], None
            for held_seq, data in zip(held_seqs, held, strict=True):
                text = event_frame_text(held_seq, self.request_id, data)
                await feed.broadcast(held_seq, text, request_id=self.request_id)
            await feed.broadcast(
                seq,
                outcome_frame(self.request_id, status, seq, final, error, self.refusal),
                marker=Marker.END,
                request_id=self.request_id,
            )
            feed.replay.clear()
        self.to(RunState.ENDED)
        if self.stop is not StopReason.LEASE_LOST:
            # Every frame of the run goes out before another run may take the session.
            await owner.bus.flushed(owner.session_id)
            await owner.bus.release(owner.session_id)
        owner.check_idle()

    async def _store_end(
        self, status: RunStatus, error: tuple[str, str] | None
    ) -> tuple[list[int], int]:
        """Store the run's end (and its final answer); the ``seq`` of its last frames."""
        session_id, feed = self.owner.session_id, self.owner.feed
        rows = self.at_end[:]  # the final answer, if the run ends right after it
        self.at_end.clear()
        try:
            if status is not RunStatus.COMPLETED and self.stop is not StopReason.LEASE_LOST:
                await cancelled_waits(session_id, sorted(self.waits))
                await shielded(
                    database_sync_to_async(recovery.close_run_calls)(
                        session_id, self.request_id, status
                    )
                )
            held_seqs = [await feed.next_seq() for _ in self.held or ()]
            seq = await feed.next_seq()
            await shielded(
                write_end(
                    session_id,
                    self.request_id,
                    status,
                    last_seq=seq,
                    error=error,
                    usage=self.usage,
                    rows=rows,
                    trace_context=self.trace_context,
                )
            )
        except Exception:
            logger.exception("Could not record the end of request %s", self.request_id)
            try:  # the answer at least, on its own
                await write_pending(session_id, self.request_id, rows)
            except Exception:
                logger.exception("Could not store the answer of %s", self.request_id)
            held_seqs = [await feed.next_seq() for _ in self.held or ()]
            seq = await feed.next_seq()
        return held_seqs, seq

    async def _leave_running(self) -> None:
        """End here without an ending: the run stays ``running`` at its checkpoint, and its
        lease is let go once its frames went out, so another worker continues it at once."""
        owner = self.owner
        self.to(RunState.ENDING)
        feed = owner.feed
        async with feed.lock:
            owner.run_ended(self)
            handover = [feed.last_seq, feed.last_seq, "", Marker.HANDOVER, self.request_id]
            waiting = owner.bus.publish(owner.session_id, handover)
            if waiting is not None:
                await waiting
        self.to(RunState.ENDED)
        await owner.bus.flushed(owner.session_id)
        await owner.bus.release(owner.session_id)
        owner.check_idle()
