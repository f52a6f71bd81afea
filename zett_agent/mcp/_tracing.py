"""Where the ``mcp`` package's own spans of a connection go in a trace.

The ``mcp`` client traces every request it sends (``MCP send <method>``) under the current
span. A tool call's request is sent from the tool call's task, so it is already a child of
its ``execute_tool`` span. The connection's own requests are sent by the connection's owner
task, which is shared by many runs and so starts with no trace: its handshake
(``server/discover`` or ``initialize``) and its ``subscriptions/listen`` stream were traces
of one span each, outside any run. Here:

- the first handshake is a child of the span that opened the connection (the tool call or
  the run listing the tools: a slow connect shows in the run that waited for it);
- a reconnect's handshake and the listen stream (which lasts as long as the connection,
  hours) belong to no run: they are sent under an unsampled parent, so a parent-based
  sampler (OpenTelemetry's default) records neither.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

__all__ = ["current_context", "traced_under", "untraced"]


def current_context() -> Any:
    """The caller's trace context, to parent the connection's first handshake."""
    return otel_context.get_current()


def _unsampled() -> Any:
    span = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=random.getrandbits(128) or 1,
            span_id=random.getrandbits(64) or 1,
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
        )
    )
    return trace.set_span_in_context(span, otel_context.Context())


@contextlib.contextmanager
def traced_under(parent: Any) -> Iterator[None]:
    """Requests sent in here are children of ``parent`` (None: of no run, unrecorded)."""
    token = otel_context.attach(parent if parent is not None else _unsampled())
    try:
        yield
    finally:
        otel_context.detach(token)


def untraced() -> contextlib.AbstractContextManager[None]:
    """Requests sent in here are recorded by no parent-based sampler."""
    return traced_under(None)
