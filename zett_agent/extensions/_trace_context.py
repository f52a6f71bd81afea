"""Trace context across process boundaries, for ``zett_agent.extensions.tracing``.

A run's span may have its parent in another process (the socket or HTTP request that
started it) and may be continued elsewhere (a human wait answered on another worker, a
run taken over after a restart). What crosses is a W3C ``traceparent`` string: read here
from a request's metadata (``TRACE_PARENT``, ``TRACE_LINKS``), written out of a span
(``traceparent_of``, ``current_traceparent``), and used to record a human wait's span
after the fact, in whichever process learnt its outcome (``record_wait_span``).

The OpenTelemetry API is imported on first use (``otel()``), never when this module is
imported, so that importing the tracing names costs nothing when tracing is off.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, TracerProvider

__all__ = [
    "TRACE_LINKS",
    "TRACE_PARENT",
    "WAIT_OUTCOMES",
    "current_traceparent",
    "record_wait_span",
]

#: Request metadata key: the W3C traceparent (str) of the span a run's span should be a
#: child of, e.g. the socket or HTTP request that started it.
TRACE_PARENT = "zett.trace.parent"
#: Request metadata key: traceparents (strs) the run's span links to, e.g. the run it
#: continues after a restart.
TRACE_LINKS = "zett.trace.links"
#: How a human wait can end (``record_wait_span``).
WAIT_OUTCOMES = frozenset({"answered", "approved", "denied", "expired", "cancelled"})

#: The instrumentation scope every zett span is recorded under.
INSTRUMENTATION = "zett_agent"


class OpenTelemetry:
    """The OpenTelemetry API, imported once, on first use."""

    __slots__ = ("Status", "StatusCode", "context", "propagator", "trace", "version")

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from zett_agent import __version__

        self.trace = trace
        self.context = context
        self.Status = Status
        self.StatusCode = StatusCode
        self.propagator = TraceContextTextMapPropagator()
        self.version = __version__


_api: OpenTelemetry | None = None


def otel() -> OpenTelemetry:
    """The OpenTelemetry API (imported by the first call)."""
    global _api
    if _api is None:
        _api = OpenTelemetry()
    return _api


def parent_context(value: object) -> Context | None:
    """The OpenTelemetry context a traceparent names (None for None)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"metadata[{TRACE_PARENT!r}] must be a traceparent str, got {value!r}")
    return otel().propagator.extract({"traceparent": value})


def span_links(values: object) -> list[Any] | None:
    """Span links to the valid ones of a traceparent or traceparents (None for none)."""
    if not values:
        return None
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable):
        raise TypeError(f"metadata[{TRACE_LINKS!r}] must be traceparent strs, got {values!r}")
    trace = otel().trace
    links = []
    for value in values:
        span_context = trace.get_current_span(parent_context(value)).get_span_context()
        if span_context.is_valid:
            links.append(trace.Link(span_context))
    return links or None


def traceparent_of(span: Span) -> str | None:
    """``span`` as a W3C traceparent, or None when its context is not valid."""
    if not span.get_span_context().is_valid:
        return None
    api = otel()
    carrier: dict[str, str] = {}
    api.propagator.inject(carrier, context=api.trace.set_span_in_context(span))
    return carrier.get("traceparent")


def current_traceparent() -> str | None:
    """The W3C traceparent of the caller's current span (inside a traced request: the run's,
    a model call's or a tool call's), or None when there is no valid one."""
    return traceparent_of(otel().trace.get_current_span())


def record_wait_span(
    *,
    kind: str,
    outcome: str,
    requested_at: datetime,
    ended_at: datetime | None = None,
    conversation_id: str | None = None,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    answered_by: str | None = None,
    expires_at: datetime | None = None,
    parent: str | None = None,
    links: Iterable[str] = (),
    tracer_provider: TracerProvider | None = None,
) -> None:
    """Record one human wait as a span ``wait <kind>`` from ``requested_at`` to ``ended_at``
    (default now).

    Called once the wait's outcome is known (one of ``WAIT_OUTCOMES``), in whichever
    process learnt it: the wait may have outlived the one that asked. ``parent`` is the
    traceparent of the run or tool call that waited (``TracingExtension.traceparent``);
    ``answered_by`` identifies who answered. None of these is content: a question's text
    and the answer are never recorded here. A wait that ends is never an error.
    """
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(f"kind must be a non-empty str, got {kind!r}")
    if outcome not in WAIT_OUTCOMES:
        raise ValueError(f"outcome must be one of {sorted(WAIT_OUTCOMES)}, got {outcome!r}")
    start_ns = _epoch_ns(requested_at, "requested_at")
    end_ns = _epoch_ns(ended_at or datetime.now(UTC), "ended_at")
    api = otel()
    tracer = api.trace.get_tracer(INSTRUMENTATION, api.version, tracer_provider=tracer_provider)
    attributes: dict[str, Any] = {"zett.wait.kind": kind, "zett.wait.outcome": outcome}
    for key, value in (
        ("gen_ai.conversation.id", conversation_id),
        ("gen_ai.tool.name", tool_name),
        ("gen_ai.tool.call.id", tool_call_id),
        ("zett.wait.answered_by", answered_by),
    ):
        if value is not None:
            attributes[key] = str(value)
    if expires_at is not None:
        attributes["zett.wait.expires_at"] = expires_at.astimezone(UTC).isoformat()
    span = tracer.start_span(
        f"wait {kind}",
        context=parent_context(parent),
        kind=api.trace.SpanKind.INTERNAL,
        attributes=attributes,
        links=span_links(list(links)),
        start_time=start_ns,
    )
    span.end(end_time=max(end_ns, start_ns))


def _epoch_ns(moment: datetime, name: str) -> int:
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ValueError(f"{name} must be an aware datetime, got {moment!r}")
    return int(moment.timestamp() * 1_000_000_000)
