"""Prometheus metrics: one-line calls for the places that count, read at ``/metrics``.

Each call site is one line (``metrics.run_ended(...)``) and costs a dictionary lookup and
a lock when prometheus-client is installed, nothing when it is not (``ENABLED`` False:
every function returns at once). The package comes with the ``otel`` extra and the dev
requirements; a site that does not install it has no ``/metrics`` (it answers 404).

Several worker processes: prometheus-client's multi-process mode. With
``PROMETHEUS_MULTIPROC_DIR`` set (to a directory the workers share, emptied before they
start) each process writes its samples to files there and ``/metrics``, served by any
worker, sums them: counters and histograms add up, the gauges of open sockets and streams
add the live processes' values (``livesum``). Without it each process reports its own.

Labels are bounded: assistants, models and tools are what the site configures, outcomes
and kinds are fixed sets. No user, chat or request id is ever a label. A tool name is a
label only when the run has that tool: a call of a tool the model invented (a
hallucination, a prompt injection) counts under ``tool="other"``, so a model cannot add
series by naming tools.

``zett_waits_open`` is not counted here: it is read from the database at each scrape
(``agent_app.telemetry.view``), so it stays exact whichever worker asked, answered or died.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.tracing import tool_outcome

if TYPE_CHECKING:
    from zett_agent.agent import AgentRunContext
    from zett_agent.messages import ToolCall
    from zett_agent.model import ModelResponse
    from zett_agent.tools.base import ToolResult

try:
    import prometheus_client as _prometheus
except ImportError:  # pragma: no cover - the dev requirements install it
    _prometheus = None

__all__ = [
    "ENABLED",
    "OTHER_TOOL",
    "MetricsExtension",
    "assistant_of",
    "extension_for",
    "lease_takeover",
    "rate_limited",
    "replayed",
    "run_ended",
    "socket_closed",
    "socket_opened",
    "sse_stream",
    "sse_stream_closed",
    "sse_stream_opened",
    "time_to_first_token",
    "wait_ended",
]

#: Whether prometheus-client is installed (and so whether anything is counted).
ENABLED = _prometheus is not None

#: The ``tool`` label of a call of a tool the run does not have.
OTHER_TOOL = "other"

#: Buckets in seconds: first tokens and runs (a run may wait an hour for a person), waits.
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600)
_WAIT_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600)

if _prometheus is not None:
    _Counter, _Histogram, _Gauge = _prometheus.Counter, _prometheus.Histogram, _prometheus.Gauge
    TOKENS = _Counter("zett_tokens", "Tokens of model calls", ["assistant", "model", "kind"])
    RUNS = _Counter("zett_runs", "Runs by how they ended", ["assistant", "outcome"])
    RUN_SECONDS = _Histogram(
        "zett_run_duration_seconds",
        "Seconds from a run's start to its end",
        ["assistant", "outcome"],
        buckets=_LATENCY_BUCKETS,
    )
    FIRST_TOKEN_SECONDS = _Histogram(
        "zett_time_to_first_token_seconds",
        "Seconds from a run's start to its first streamed text",
        ["assistant"],
        buckets=_LATENCY_BUCKETS,
    )
    TOOL_CALLS = _Counter(
        "zett_tool_calls", "Tool calls by tool and outcome", ["assistant", "tool", "outcome"]
    )
    WAITS = _Counter("zett_waits", "Questions and approvals by how they ended", ["kind", "outcome"])
    WAIT_SECONDS = _Histogram(
        "zett_wait_duration_seconds",
        "Seconds a question or approval waited for its outcome",
        ["kind", "outcome"],
        buckets=_WAIT_BUCKETS,
    )
    SOCKETS = _Gauge("zett_sockets_open", "Chat sockets open", multiprocess_mode="livesum")
    SSE_STREAMS = _Gauge(
        "zett_sse_streams_open", "Server-sent event streams open", multiprocess_mode="livesum"
    )
    REPLAYED = _Counter(
        "zett_replay_frames", "Frames replayed from a run's buffer to sockets that (re)joined"
    )
    TAKEOVERS = _Counter(
        "zett_lease_takeovers", "Runs of a process that died, settled by another one"
    )
    CONTINUED = _Counter(
        "zett_runs_continued", "Runs continued on another worker after theirs died or stopped"
    )
    RATE_LIMITED = _Counter(
        "zett_rate_limit_refusals", "Frames and sockets refused by a limit", ["limit"]
    )


def run_ended(assistant: str, outcome: str, seconds: float) -> None:
    """A run ended with ``outcome`` (a ``RunStatus``) after ``seconds``."""
    if ENABLED:
        RUNS.labels(assistant, outcome).inc()
        RUN_SECONDS.labels(assistant, outcome).observe(seconds)


def time_to_first_token(assistant: str, seconds: float) -> None:
    if ENABLED:
        FIRST_TOKEN_SECONDS.labels(assistant).observe(seconds)


def wait_ended(kind: str, outcome: str, seconds: float) -> None:
    """A question or approval ended (answered, approved, denied, expired, cancelled)."""
    if ENABLED:
        WAITS.labels(kind, outcome).inc()
        WAIT_SECONDS.labels(kind, outcome).observe(max(seconds, 0.0))


def socket_opened() -> None:
    if ENABLED:
        SOCKETS.inc()


def socket_closed() -> None:
    if ENABLED:
        SOCKETS.dec()


def sse_stream_opened() -> None:
    """An HTTP response began streaming server-sent events (pair with the next one)."""
    if ENABLED:
        SSE_STREAMS.inc()


def sse_stream_closed() -> None:
    if ENABLED:
        SSE_STREAMS.dec()


@contextmanager
def sse_stream() -> Iterator[None]:
    """``with metrics.sse_stream():`` around the body of a streaming SSE response."""
    sse_stream_opened()
    try:
        yield
    finally:
        sse_stream_closed()


def replayed(frames: int) -> None:
    if ENABLED and frames:
        REPLAYED.inc(frames)


def lease_takeover(runs: int = 1) -> None:
    if ENABLED and runs:
        TAKEOVERS.inc(runs)


def run_continued() -> None:
    """A run whose worker died (or handed it over) was continued here."""
    if ENABLED:
        CONTINUED.inc()


def rate_limited(limit: str) -> None:
    """A limit refused something: ``frames``, ``sockets_per_person``, ``sockets_per_session``,
    ``chats_per_hour``."""
    if ENABLED:
        RATE_LIMITED.labels(limit).inc()


class MetricsExtension(AgentExtension):
    """Counts an assistant's tokens (by model) and tool calls (by tool and outcome)."""

    #: After the reply extensions' ``after_tool``: they say whether a call was declined.
    priority = 1001

    def __init__(self, assistant: str) -> None:
        self.assistant = assistant

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        usage = response.usage
        model = _model_name(context.model, response)
        if usage.input_tokens:
            TOKENS.labels(self.assistant, model, "input").inc(usage.input_tokens)
        if usage.output_tokens:
            TOKENS.labels(self.assistant, model, "output").inc(usage.output_tokens)

    async def after_tool(
        self,
        context: AgentRunContext,
        call: ToolCall,
        result: ToolResult,
        error: Exception | None,
    ) -> None:
        tool = call.name if call.name in context.tools else OTHER_TOOL
        TOOL_CALLS.labels(self.assistant, tool, tool_outcome(result, error)).inc()


_EXTENSIONS: dict[str, MetricsExtension] = {}


def extension_for(assistant: str) -> MetricsExtension:
    """The one ``MetricsExtension`` of an assistant (shared by its chats' agents)."""
    extension = _EXTENSIONS.get(assistant)
    if extension is None:
        extension = _EXTENSIONS[assistant] = MetricsExtension(assistant)
    return extension


def assistant_of(agent: Any) -> str:
    """The assistant an agent built by the factory serves (its ``MetricsExtension``'s)."""
    for extension in getattr(agent, "extensions", ()):
        if type(extension) is MetricsExtension:
            return extension.assistant
    return ""


def _model_name(model: Any, response: ModelResponse) -> str:
    """The configured model's name (bounded), else the class of the model object."""
    name = getattr(model, "model", None)
    if isinstance(name, str) and name:
        return name
    return type(model).__name__
