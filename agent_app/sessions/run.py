"""How a run ends here: its outcome stored, then its last frame sent to every socket.

``RunEnding`` is a mixin of ``sessions.live.LiveSession``: ``_finish`` is a run's last act,
whether it completed, failed, was cancelled or was interrupted; ``_record_end`` stores the
outcome (``agent_app.durable.runs.end_run``, its usage summed by ``_add_usage``) and broadcasts the
run's last frame (``_outcome_frame``) under the session's lock. Cancellation and the lock
are told once, in ``agent_app.sessions.live``.

The run's final answer is stored here too, in the same transaction as its end: the
persistence extension hands it over (``agent_app.durable.persistence.ANSWER_AT_END``) instead of
writing it, which saves a run one database round trip and one transaction. No frame says
more than the database holds: the answer's ``model_completed`` frame is held back
(``_Run.held``) and sent just before the run's last frame, once both are stored. If the run
goes on instead (a steering message, an internal message), the answer is written and its
frame sent before the next frame (``_release_held``). A crash before the run's end loses
that answer as it would lose one still streaming: its deltas were shown, its
``model_completed`` was not, and the run is settled as interrupted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async

from agent_app.durable import recovery
from agent_app.durable.persistence import settle, write_pending
from agent_app.durable.runs import end_run
from agent_app.models import RunStatus
from agent_app.protocol.frames import RunCancelledFrame, RunFailedFrame
from agent_app.protocol.text import encode_frame, event_frame_text

if TYPE_CHECKING:
    from agent_app.sessions.live import LiveSession, _Run

__all__ = ["RunEnding"]

logger = logging.getLogger(__name__)

#: Built once (every run ends here).
_end_run = database_sync_to_async(end_run)


class RunEnding:
    """Recording how a run ended (a mixin of ``LiveSession``; see the module docstring)."""

    async def _finish(
        self: LiveSession,
        run: _Run,
        status: RunStatus,
        *,
        final: dict[str, Any] | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        """Record the outcome, then send its frame: the run's last act, under the lock.

        Shielded: a ``cancel`` that lands while the run waits here for the lock must not
        leave the session claimed by a run that is over.
        """
        if run.finished:
            return
        run.finished = True
        run.outcome = status
        await settle(self._record_end(run, status, final, error))

    async def _release_held(self: LiveSession, run: _Run) -> None:
        """The run goes on after a final answer: store it now and send its held frame."""
        await write_pending(self.session_id, run.request_id, run.at_end)
        held, run.held = run.held or [], None
        for data in held:
            await self.broadcast_event(run.request_id, data)

    async def _record_end(
        self: LiveSession,
        run: _Run,
        status: RunStatus,
        final: dict[str, Any] | None,
        error: tuple[str, str] | None,
    ) -> None:
        async with self._lock:
            rows = run.at_end[:]  # the final answer, if the run ends right after it
            run.at_end.clear()
            try:
                if status is not RunStatus.COMPLETED and not run.lease_lost:
                    await settle(
                        database_sync_to_async(recovery.close_run_calls)(
                            self.session_id, run.request_id, status
                        )
                    )
                held_seqs = [await self.next_seq() for _ in run.held or ()]
                seq = await self.next_seq()
                await settle(
                    _end_run(
                        self.session_id,
                        run.request_id,
                        status,
                        last_seq=seq,
                        error=error,
                        usage=run.usage,
                        rows=rows,
                    )
                )
            except Exception:
                logger.exception("Could not record the end of request %s", run.request_id)
                try:  # the answer at least, on its own
                    await write_pending(self.session_id, run.request_id, rows)
                except Exception:
                    logger.exception("Could not store the answer of %s", run.request_id)
                held_seqs = [await self.next_seq() for _ in run.held or ()]
                seq = await self.next_seq()
            finally:
                if self._run is run:
                    self._run = None
            held, run.held = run.held or [], None
            for held_seq, data in zip(held_seqs, held, strict=True):
                await self._broadcast(
                    held_seq,
                    event_frame_text(held_seq, run.request_id, data),
                    request_id=run.request_id,
                )
            await self._broadcast(
                seq,
                _outcome_frame(run, status, seq, final, error),
                marker="end",
                request_id=run.request_id,
            )
            self.replay.clear()
        if self.cluster is not None and not run.lease_lost:
            # Every frame of the run goes out before another run may take the session.
            await self.cluster.flushed(self.session_id)
            await self.cluster.release(self.session_id)
        self.registry.drop_if_idle(self)


def _outcome_frame(
    run: _Run,
    status: RunStatus,
    seq: int,
    final: dict[str, Any] | None,
    error: tuple[str, str] | None,
) -> str:
    """The last frame of a run: its ``run_completed`` event, or how it ended otherwise."""
    if status is RunStatus.COMPLETED and final is not None:
        return event_frame_text(seq, run.request_id, final)
    if status is RunStatus.CANCELLED:
        return encode_frame(RunCancelledFrame(seq=seq, request_id=run.request_id).dump())
    if status is RunStatus.INTERRUPTED:
        return encode_frame(
            {
                "type": "run_interrupted",
                "seq": seq,
                "request_id": run.request_id,
                "status": str(status),
                "message": recovery.INTERRUPTED_RUN_MESSAGE,
            }
        )
    error = error or ("Error", "The answer failed.")
    frame = RunFailedFrame(
        seq=seq, request_id=run.request_id, error={"type": error[0], "message": error[1]}
    )
    return encode_frame(frame.dump())


def _add_usage(totals: dict[str, int], response: dict[str, Any] | None) -> None:
    """Add one model call's token usage to the run's totals (stored with its end)."""
    usage = (response or {}).get("usage") or {}
    for key, value in usage.items():
        if isinstance(value, int):
            totals[key] = totals.get(key, 0) + value
