"""A run's trace context in the database: how it crosses workers and restarts.

A traced run records, at its first event, a short span of its own attempt (``attempt
<n>``, a child of its ``invoke_agent`` span, ended at once and handed to the exporter at
once: ``attempt_span``) and stores *that* span's traceparent with its row
(``ChatRun.trace_context``), at once and again in statements it writes anyway (with each
of its waits, ``waits.record_wait``, and with its end, ``runs.end_run``). Whoever
continues the run, or records the end of one of its waits, reads it there, on any worker,
hours later: a continuation links to it, a wait span is its child.

Why the attempt's span and not the run's own: a run span is exported when it ends, and a
worker killed mid-run never ends it. The attempt's span was exported when the attempt
began, so a link or a parent that names it resolves in the tracing backend even after a
SIGKILL: it opens the killed attempt's trace, with whatever of it was exported (its model
and tool calls that had ended). The row rather than Redis: the trace context must outlive
exactly what the run's row outlives.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from agent_app.telemetry import tracing
from zett_agent.extensions.tracing import TRACE_LINKS, TracingExtension

__all__ = ["attempt_span", "continuation_metadata", "stored_trace_context", "traceparent_of"]

logger = logging.getLogger(__name__)

#: The name of the span that stands for one attempt of a run (see the module docstring).
ATTEMPT_SPAN = "attempt"


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


def attempt_span(run_traceparent: str, *, session_id: str, request_id: str, attempt: int) -> str:
    """Record the span of this attempt of a run (a child of the run's span
    ``run_traceparent``, ended at once) and ask the exporter to send it now; its
    traceparent ("" when the run is not traced or not sampled)."""
    if not run_traceparent:
        return ""
    from zett_agent.extensions._trace_context import (
        INSTRUMENTATION,
        otel,
        parent_context,
        traceparent_of,
    )

    api = otel()
    provider = api.trace.get_tracer_provider()
    span = _tracer_of(provider, INSTRUMENTATION).start_span(
        f"{ATTEMPT_SPAN} {attempt}",
        context=parent_context(run_traceparent),
        attributes={
            "gen_ai.conversation.id": session_id,
            "zett.request.id": request_id,
            "zett.run.attempt": attempt,
        },
    )
    span.end()
    _flush_soon(provider)
    return traceparent_of(span) or ""


#: The attempts' tracer and the provider it came from (the global provider is set once: the
#: SDK's ``get_tracer`` builds a scope and resets the warning filters on every call).
_tracer: tuple[Any, Any] | None = None


def _tracer_of(provider: Any, scope: str) -> Any:
    global _tracer
    known = _tracer
    if known is None or known[0] is not provider:
        known = _tracer = (provider, provider.get_tracer(scope))
    return known[1]


class _Flusher:
    """Sends ended spans to the exporter now, from one background thread: attempts that
    begin while a flush runs are sent by the next one (a batching processor is asked once
    per round trip, however many runs begin), and a run only sets an event."""

    def __init__(self) -> None:
        self.wanted = threading.Event()
        self.thread: threading.Thread | None = None
        self.flush: Any = None
        os.register_at_fork(after_in_child=self._forget_thread)

    def request(self, flush: Any) -> None:
        self.flush = flush
        self.wanted.set()
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="zett-span-flush", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while True:
            self.wanted.wait()
            self.wanted.clear()
            try:
                self.flush(5_000)
            except Exception:  # an exporter's failure must not end the flusher
                logger.warning("Could not flush the spans of a run's attempt", exc_info=True)

    def _forget_thread(self) -> None:
        """A forked child has no such thread: the next request starts its own."""
        self.thread = None
        self.wanted = threading.Event()


_FLUSHER = _Flusher()


def _flush_soon(provider: Any) -> None:
    flush = getattr(provider, "force_flush", None)
    if callable(flush):  # the SDK's provider (the API's default one has nothing to send)
        _FLUSHER.request(flush)
