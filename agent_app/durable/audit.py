"""The audit trail of client replies: written before a reply can act, verdict after.

A reply (an approval, an ask-user answer, a steer) changes what the agent does, so it is
never acted on unaudited: ``record_reply`` writes the ``ExternalEventRecord`` row (with
``accepted_by`` left ``None``) before the consumer hands the reply to the run, and a reply
whose row cannot be written is not delivered at all. ``record_verdict`` fills in who
accepted it once that is known; a row left at ``None`` means the process died in between.

Every reply that reaches here has passed ``agent_app.protocol.frames.parse_frame``, which refuses
what a JSON column cannot store (NaN, infinities, NUL, unpaired surrogates, deep nesting),
so a write fails only when the database itself does (or the session row is gone).
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async

from agent_app.models import ExternalEventRecord, statements

__all__ = ["record_reply", "record_verdict"]

logger = logging.getLogger(__name__)

#: ``ExternalEventRecord.correlation_id``'s length.
_CORRELATION_LENGTH = 255


async def record_reply(
    session_id: str, request_id: str | None, name: str, payload: dict[str, Any]
) -> ExternalEventRecord | None:
    """Write the audit row of a reply about to be delivered; None if it could not be."""
    correlation = payload.get("tool_call_id")
    correlation_id = correlation[:_CORRELATION_LENGTH] if isinstance(correlation, str) else ""
    record = ExternalEventRecord(
        session_id=session_id,
        request_id=request_id or "",
        name=name[:255],
        correlation_id=correlation_id,
        payload=payload,
        accepted_by=None,
    )
    try:
        # One statement, not ``acreate``: this write is on every reply's path.
        await database_sync_to_async(statements.insert)([record], returning_pk=True)
        return record
    except Exception:
        logger.exception("Could not record the %s reply to session %s", name, session_id)
        return None


async def record_verdict(
    record: ExternalEventRecord, request_id: str | None, accepted_by: list[str]
) -> None:
    """Fill in the verdict of an audited reply (logged, never raised, if it fails)."""
    values = {"accepted_by": accepted_by, "request_id": request_id or record.request_id}
    try:
        await database_sync_to_async(statements.update)(ExternalEventRecord, values, id=record.pk)
    except Exception:
        logger.exception(
            "Could not record the verdict on the %s reply to session %s (accepted by %s)",
            record.name,
            record.session_id,
            accepted_by,
        )
