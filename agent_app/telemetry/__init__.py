"""What an operator sees of the app: OpenTelemetry spans and Prometheus metrics.

Two independent halves, each costing nothing when it is off:

- ``tracing`` (``ZETT_OTEL``): the runtime's ``TracingExtension`` on every chat's agent,
  plus what only the app knows — a span per human wait, the trace context of each run
  stored with its row so a continuation on any worker links to the run it continues. With
  the setting off nothing here imports ``opentelemetry``.
- ``metrics`` (prometheus-client installed): counters and histograms behind one-line
  calls, read at ``GET /metrics`` (``agent_app.telemetry.view``). Without the package every
  call is a no-op.

``extensions_for`` is the factory's one call: the extensions telemetry adds to an agent.

Beside them: ``health`` (``/healthz``, for load balancers) and ``access_log`` (daphne's
access log without query strings).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_app.telemetry import metrics, tracing

if TYPE_CHECKING:
    from zett_agent.extensions.base import AgentExtension

__all__ = ["extensions_for", "metrics", "tracing"]


def extensions_for(assistant: str) -> list[AgentExtension]:
    """The telemetry extensions of an agent of the assistant with that id (one instance
    each, shared by its chats)."""
    extensions: list[AgentExtension] = []
    if metrics.ENABLED:
        extensions.append(metrics.extension_for(assistant))
    extension = tracing.extension_for(assistant)
    if extension is not None:
        extensions.append(extension)
    return extensions
