"""Whether a run is recorded, decided before anything is built for it.

``TracingExtension`` asks once per run, when the request is claimed (``unset`` while no
global provider is set, then ``decide``; ``begin`` starts the span where the answer needs
one). What the answer costs depends on what is behind the OpenTelemetry API:

- nothing (no SDK configured: the global provider never set, or a ``NoOpTracerProvider``):
  no run is ever recorded. While the global provider is not set, a run asks whether it is
  set yet (``_unset_question``: one read of the API module's provider slot, the one the
  API's stand-in ``ProxyTracerProvider`` reads itself before handing out a proxy tracer;
  no span, no tracer, no context);
- the OpenTelemetry SDK's ``TracerProvider``: its sampler is asked directly, with the trace
  id the run's span would get (the parent's, else a new one from the provider's id
  generator). A run it drops costs that one call: no span object, no context. A run it
  records gets its span from the SDK as any span (``start_decided``, when the run starts),
  started with that trace id and that answer (stand-ins for the tracer's sampler and id
  generator hand them over), so the sampler is asked once per run and a ratio sampler
  keeps its ratio. A sampler whose answer about a root span is known without asking (the
  SDK's ``ALWAYS_OFF``, a ``TraceIdRatioBased`` of rate 0, or a ``ParentBased`` whose root
  is one of those: ``_drops_roots``) is not asked about a run with no parent, and no trace
  id is drawn for it: such a run costs a look at the current span;
- anything else: a span is started and asked ``is_recording()``.

The global provider may be set after the extension is built (it is set once, then never
replaced): until it is, each run looks again (``get_tracer_provider`` itself is not asked
per run: with the provider unset it looks up ``OTEL_PYTHON_TRACER_PROVIDER`` in
``os.environ`` and pays a ``KeyError`` each time), then the provider is read once.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer, TracerProvider

    from zett_agent.extensions._trace_context import OpenTelemetry

__all__ = ["Decision", "RunSampler"]

#: The SDK sampler's answer about a run's span: its name, parent context, links and kind,
#: the ``SamplingResult``, the trace id for a root span (None with a parent), and where the
#: tracer's stand-ins find the answer when the span is started.
Decision = tuple[str, Any, Any, Any, Any, int | None, Any]


class RunSampler:
    """Starts a run's span when the run is to be recorded; says None, cheaply, when not.

    ``tracer`` is the tracer every span of a recorded run comes from (the provider's own,
    once the provider is known)."""

    __slots__ = ("_api", "_given", "_scope", "begin", "decide", "tracer", "unset")

    def __init__(
        self, api: OpenTelemetry, scope: str, tracer_provider: TracerProvider | None
    ) -> None:
        self._api = api
        self._scope = scope
        self._given = tracer_provider
        #: What starts a run's span: ``start``, or once the provider is known the one of its
        #: paths that applies (``start`` without its dispatch).
        self.begin: Callable[[str, Any, Any, Any], Span | None] = self.start
        #: Once the provider is known, what asks about a run before its span is started:
        #: with the SDK its sampler (None: dropped; else what ``start_decided`` takes), where
        #: nothing records a function that always says None; None for other providers.
        self.decide: Callable[[str, Any, Any, Any], Decision | None] | None = None
        trace = api.trace
        self.tracer: Tracer = trace.get_tracer(scope, api.version, tracer_provider=tracer_provider)
        #: While no global provider is set: whether that is still so (``_unset_question``);
        #: None once the provider is known (``settle``).
        self.unset: Callable[[], bool] | None = None
        # Read once here (the provider an OTEL_PYTHON_TRACER_PROVIDER names is built now).
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            self.unset = _unset_question(trace, provider, scope)
        else:
            self._resolve(provider)

    def settle(self) -> None:
        """The global provider is set (``unset`` said so): what it is, remembered."""
        self._resolve(self._api.trace.get_tracer_provider())

    def start(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Span | None:
        """The run's span, started (no attributes), when the run is recorded; else None."""
        unset = self.unset
        if unset is not None:
            if unset():
                return None
            self.settle()
        return self.begin(name, parent, links, kind)

    def _sdk_start(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Span | None:
        """Ask the SDK's sampler, then start the span if sampled (``_Decided.decide``)."""
        decision = self.decide(name, parent, links, kind)  # type: ignore[misc]
        return None if decision is None else self.start_decided(decision)

    def _other_start(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Span | None:
        """A provider other than the SDK's: its span, kept when it records."""
        return _recording(self.tracer.start_span(name, context=parent, kind=kind, links=links))

    def start_decided(self, decision: Decision) -> Span | None:
        """The span the sampler's answer ``decision`` (``decide``) was about, started."""
        name, parent, links, kind, result, trace_id, pending = decision
        pending.result = result
        pending.trace_id = trace_id
        try:
            span = self.tracer.start_span(name, context=parent, kind=kind, links=links)
        finally:
            pending.result = pending.trace_id = None
        return _recording(span)

    def _resolve(self, provider: TracerProvider) -> None:
        """What ``provider`` is (nothing records, the SDK, or another implementation),
        remembered as the paths ``begin`` and ``decide`` take: it is never replaced."""
        self.unset = None
        trace = self._api.trace
        sdk = sys.modules.get("opentelemetry.sdk.trace")  # an SDK provider imported it
        if isinstance(provider, trace.NoOpTracerProvider):
            self.begin = self.decide = _nothing
            return
        if sdk is not None and isinstance(provider, sdk.TracerProvider):
            self.tracer = tracer = provider.get_tracer(self._scope, self._api.version)
            if isinstance(tracer, sdk.Tracer):  # else a shut-down provider's
                self.decide = _Decided.install(tracer, trace.get_current_span).decide
                self.begin = self._sdk_start
                return
        elif self._given is None:
            self.tracer = provider.get_tracer(self._scope, self._api.version)
        self.begin = self._other_start


def _unset_question(trace: Any, provider: Any, scope: str) -> Callable[[], bool]:
    """Whether no global provider is set yet, asked each run until one is.

    The answer is what the API's stand-in provider reads before it hands out a proxy: the
    API module's provider slot (``_TRACER_PROVIDER``, a private name: one attribute read
    instead of a proxy tracer built per run). An API without that slot is asked through
    its public stand-in: ``get_tracer`` gives a ``ProxyTracer`` until a provider is set.
    """
    if hasattr(trace, "_TRACER_PROVIDER"):

        def unset() -> bool:
            return not trace._TRACER_PROVIDER

        return unset
    get_tracer, proxy = provider.get_tracer, trace.ProxyTracer

    def asked() -> bool:
        return type(get_tracer(scope)) is proxy

    return asked


def _nothing(name: str, parent: Any, links: Any, kind: Any) -> None:
    """A run's span where nothing records: none."""
    return None


def _recording(span: Span) -> Span | None:
    """``span`` when it records; else None (it is ended: it was never current)."""
    if span.is_recording():
        return span
    span.end()
    return None


class _Pending(threading.local):
    """What this thread decided about the span it is starting: its trace id (for a root)
    and the sampler's answer."""

    trace_id: int | None = None
    result: Any = None


class _Decided:
    """The sampler and id generator of an SDK tracer, put back behind stand-ins that give
    the span being started the trace id and sampling result already decided for it (in
    this thread; anything else is asked of them as before)."""

    __slots__ = (
        "current",
        "current_span",
        "drop",
        "drops_roots",
        "ids",
        "new_trace_id",
        "no_span",
        "pending",
        "sampler",
    )

    def __init__(self, sampler: Any, ids: Any, current_span: Callable[[Any], Any]) -> None:
        from opentelemetry.context import get_current
        from opentelemetry.sdk.trace.sampling import Decision
        from opentelemetry.trace import INVALID_SPAN

        self.sampler = sampler
        self.ids = ids
        self.new_trace_id = ids.generate_trace_id
        self.current_span = current_span
        self.current = get_current
        self.pending = _Pending()
        self.drop = Decision.DROP
        #: The sampler drops every root span whatever its trace id (``_drops_roots``).
        self.drops_roots = _drops_roots(sampler)
        #: What ``get_current_span`` gives where no span is current.
        self.no_span = INVALID_SPAN

    @classmethod
    def install(cls, tracer: Any, current_span: Callable[[Any], Any]) -> _Decided:
        """Put the stand-ins on ``tracer`` (once: the SDK shares a tracer per scope)."""
        sampler = tracer.sampler
        if isinstance(sampler, _DecidedSampler):
            return sampler.decided
        decided = cls(sampler, tracer.id_generator, current_span)
        tracer.id_generator = _DecidedIds(decided)
        tracer.sampler = _DecidedSampler(decided)
        return decided

    def decide(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Decision | None:
        """Ask the sampler about the trace id the span would get: None when it drops the
        run, else what ``RunSampler.start_decided`` starts the span with (the SDK then
        takes that trace id and that answer instead of asking again)."""
        if parent is None:
            parent_context = self.current()
            # An empty context holds no span: the common case, known without a lookup.
            current = self.current_span(parent_context) if parent_context else self.no_span
        else:
            current = self.current_span(parent)
        if current is self.no_span:  # no parent: a root span
            if self.drops_roots:
                return None
            trace_id = self.new_trace_id()
            root = True
        else:
            span_context = current.get_span_context()
            root = not span_context.is_valid
            if root and self.drops_roots:
                return None
            trace_id = self.new_trace_id() if root else span_context.trace_id
        result = self.sampler.should_sample(parent, trace_id, name, kind, None, links)
        if result.decision is self.drop:  # Decision.is_recording(), without the call
            return None
        return (name, parent, links, kind, result, trace_id if root else None, self.pending)


def _drops_roots(sampler: Any) -> bool:
    """Whether ``sampler`` drops every span without a valid parent, whatever its trace id:
    the SDK's own samplers of exactly these classes, whose answers their classes fix.

    A subclass may answer differently, so only the exact classes count; ``ParentBased``
    keeps its root sampler in a private attribute, read with a default so that an SDK
    without it is simply asked each run.
    """
    from opentelemetry.sdk.trace import sampling

    kind = type(sampler)
    if kind is sampling.ParentBased:
        root = getattr(sampler, "_root", None)
        return root is not None and type(root) is not sampling.ParentBased and _drops_roots(root)
    if kind is sampling.StaticSampler:
        return sampler.get_description() == "AlwaysOffSampler"  # its decision, told
    if kind is sampling.TraceIdRatioBased:
        return sampler.bound == 0
    return False


class _DecidedSampler:
    """Stands in for a tracer's sampler: the pending answer, else the sampler's."""

    __slots__ = ("decided", "get_description")

    def __init__(self, decided: _Decided) -> None:
        self.decided = decided
        self.get_description = decided.sampler.get_description

    def should_sample(self, *args: Any, **kwargs: Any) -> Any:
        pending = self.decided.pending
        result = pending.result
        if result is None:
            return self.decided.sampler.should_sample(*args, **kwargs)
        pending.result = None
        return result


class _DecidedIds:
    """Stands in for a tracer's id generator: the pending trace id, else a new one."""

    __slots__ = ("decided", "generate_span_id", "is_trace_id_random")

    def __init__(self, decided: _Decided) -> None:
        self.decided = decided
        self.generate_span_id = decided.ids.generate_span_id
        self.is_trace_id_random = decided.ids.is_trace_id_random

    def generate_trace_id(self) -> int:
        pending = self.decided.pending
        trace_id = pending.trace_id
        if trace_id is None:
            return self.decided.ids.generate_trace_id()
        pending.trace_id = None
        return trace_id
