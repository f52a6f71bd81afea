"""A run's trace context in the database: how it crosses workers and restarts.

The run's task writes its span's traceparent to its row (``ChatRun.trace_context``) as soon
as the span exists, on its first event — before its first model call or tool, so a process
killed later leaves it behind (write-ahead). Whoever continues the run, or records the end
of one of its waits, reads it from there, on any worker, hours later. The row rather than
Redis: the trace context must outlive exactly what the run's row outlives.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from agent_app.telemetry import tracing
from zett_agent.extensions.tracing import TRACE_LINKS, TracingExtension

__all__ = ["continuation_metadata", "store_trace_context", "stored_trace_context"]


def stored_trace_context(request_id: str) -> str | None:
    """The traceparent stored with a run, if it was traced."""
    from agent_app.models import ChatRun

    value = (
        ChatRun.objects.filter(request_id=request_id)
        .values_list("trace_context", flat=True)
        .first()
    )
    return value or None


def continuation_metadata(resumed_from: str | None) -> dict[str, Any] | None:
    """Request metadata of a continuation: a link to the run it continues (a query)."""
    if not tracing.active() or not resumed_from:
        return None
    traceparent = stored_trace_context(resumed_from)
    return {TRACE_LINKS: [traceparent]} if traceparent else None


def _store(request_id: str, traceparent: str) -> None:
    from agent_app.models import ChatRun

    ChatRun.objects.filter(request_id=request_id).update(trace_context=traceparent)


_store_async = database_sync_to_async(_store)


async def store_trace_context(agent: Any, session_id: str, request_id: str) -> None:
    """Write the running request's traceparent to its row (nothing if it is not traced)."""
    for extension in getattr(agent, "extensions", ()):
        if isinstance(extension, TracingExtension):
            traceparent = extension.traceparent(session_id)
            if traceparent is not None:
                await _store_async(request_id, traceparent)
            return
