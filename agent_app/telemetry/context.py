"""A run's trace context in the database: how it crosses workers and restarts.

A traced run reads its span's traceparent on its first event (``traceparent_of``, from
memory) and stores it with its row (``ChatRun.trace_context``) in statements it writes
anyway: in the transaction that stores each of its waits (``waits.record_wait``), and
with its end (``runs.end_run``). So tracing adds no database round trip, and a run that
can be continued — one that waits — has it stored before any process could die while it
waits (write-ahead). Whoever continues the run, or records the end of one of its waits,
reads it there, on any worker, hours later. The row rather than Redis: the trace context
must outlive exactly what the run's row outlives. (A run killed before it waited or ended
leaves none: nothing continues it, so nothing links to it.)
"""

from __future__ import annotations

from typing import Any

from agent_app.telemetry import tracing
from zett_agent.extensions.tracing import TRACE_LINKS, TracingExtension

__all__ = ["continuation_metadata", "stored_trace_context", "traceparent_of"]


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


def traceparent_of(agent: Any, session_id: str) -> str:
    """The running request's traceparent ("" when the agent is not traced or not sampled)."""
    for extension in getattr(agent, "extensions", ()):
        if isinstance(extension, TracingExtension):
            return extension.traceparent(session_id) or ""
    return ""
