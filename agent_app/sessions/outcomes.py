"""The last frame of a run in this process: how it ended, as every socket is told.

A completed run ends with its ``run_completed`` event; otherwise ``run_cancelled``,
``run_interrupted`` (with the sentence recovery tells about a server that stopped), or
``run_failed`` (with what a person may read of the error; a budget refusal says when the
budget resets).
"""

from __future__ import annotations

from typing import Any

from agent_app.budgets.ledger import BudgetExceeded
from agent_app.durable import recovery
from agent_app.models import RunStatus
from agent_app.protocol.frames import RunCancelledFrame, RunFailedFrame
from agent_app.protocol.text import encode_frame, event_frame_text

__all__ = ["outcome_frame"]


def outcome_frame(
    request_id: str,
    status: RunStatus,
    seq: int,
    final: dict[str, Any] | None,
    error: tuple[str, str] | None,
    refusal: BudgetExceeded | None = None,
) -> str:
    """The last frame of a run: its ``run_completed`` event, or how it ended otherwise."""
    if status is RunStatus.COMPLETED and final is not None:
        return event_frame_text(seq, request_id, final)
    if status is RunStatus.CANCELLED:
        return encode_frame(RunCancelledFrame(seq=seq, request_id=request_id).dump())
    if status is RunStatus.INTERRUPTED:
        return encode_frame(
            {
                "type": "run_interrupted",
                "seq": seq,
                "request_id": request_id,
                "status": str(status),
                "message": recovery.INTERRUPTED_RUN_MESSAGE,
            }
        )
    if status is RunStatus.BUDGET_EXCEEDED and refusal is not None:
        return encode_frame(
            {
                "type": "run_failed",
                "seq": seq,
                "request_id": request_id,
                "status": str(status),
                "error": {"type": str(refusal.code), "message": refusal.message},
                "resets_at": refusal.frame().resets_at,
            }
        )
    error = error or ("Error", "The answer failed.")
    frame = RunFailedFrame(
        seq=seq, request_id=request_id, error={"type": error[0], "message": error[1]}
    )
    return encode_frame(frame.dump())
