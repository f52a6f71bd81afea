"""Whether a run is recorded, decided before anything is built for it.

``TracingExtension`` asks once per run, when the request is claimed (``silent``, then with
the SDK ``decide``; ``begin`` starts the span where the answer needs one). What the answer
costs depends on what is behind the OpenTelemetry API:

- nothing (no SDK configured: the global provider never set, or a ``NoOpTracerProvider``):
  no run is ever recorded. While the global provider is not set, the API's
  ``get_tracer_provider()`` gives its ``ProxyTracerProvider``, whose ``get_tracer`` hands
  out a ``ProxyTracer`` until a provider is set and the provider's own tracer after: that
  one call (no span, no context) is what a run asks;
- the OpenTelemetry SDK's ``TracerProvider``: its sampler is asked directly, with the trace
  id the run's span would get (the parent's, else a new one from the provider's id
  generator). A run it drops costs that one call: no span object, no context. A run it
  records gets its span from the SDK as any span (``start_decided``, when the run starts),
  started with that trace id and that answer (stand-ins for the tracer's sampler and id
  generator hand them over), so the sampler is asked once per run and a ratio sampler
  keeps its ratio;
- anything else: a span is started and asked ``is_recording()``.

The global provider may be set after the extension is built (it is set once, then never
replaced): until it is, each run looks again, through public API only
(``get_tracer_provider`` itself is not asked per run: with the provider unset it looks up
``OTEL_PYTHON_TRACER_PROVIDER`` in ``os.environ`` and pays a ``KeyError`` each time).
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
#: the ``SamplingResult``, and the trace id for a root span (None with a parent).
Decision = tuple[str, Any, Any, Any, Any, int | None]

#: What a provider is, once known: nothing records, the SDK, or some other implementation.
_NOTHING, _SDK, _OTHER = "nothing", "sdk", "other"


class RunSampler:
    """Starts a run's span when the run is to be recorded; says None, cheaply, when not.

    ``tracer`` is the tracer every span of a recorded run comes from (the provider's own,
    once the provider is known)."""

    __slots__ = (
        "_api",
        "_decided",
        "_given",
        "_kind",
        "_scope",
        "begin",
        "decide",
        "probe",
        "proxy_tracer",
        "tracer",
    )

    def __init__(
        self, api: OpenTelemetry, scope: str, tracer_provider: TracerProvider | None
    ) -> None:
        self._api = api
        self._scope = scope
        self._given = tracer_provider
        self._kind: str | None = None
        self._decided: _Decided | None = None
        #: What starts a run's span: ``start``, or once the provider is known the one of its
        #: paths that applies (``start`` without its dispatch).
        self.begin: Callable[[str, Any, Any, Any], Span | None] = self.start
        #: With the SDK: asks its sampler about a run's span before it is started (None:
        #: dropped; else what ``start_decided`` takes). None for other providers.
        self.decide: Callable[[str, Any, Any, Any], Decision | None] | None = None
        trace = api.trace
        self.tracer: Tracer = trace.get_tracer(scope, api.version, tracer_provider=tracer_provider)
        #: While no global provider is set: the API's stand-in provider's ``get_tracer``,
        #: which gives a ``proxy_tracer`` until one is set (``unset`` asks it); else None.
        self.probe: Callable[[str], object] | None = None
        self.proxy_tracer = trace.ProxyTracer
        # Read once here (the provider an OTEL_PYTHON_TRACER_PROVIDER names is built now).
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            self.probe = provider.get_tracer
        else:
            self._resolve(provider)

    def unset(self) -> bool:
        """Whether no global provider is set yet."""
        probe = self.probe
        return probe is not None and type(probe(self._scope)) is self.proxy_tracer

    def silent(self) -> bool:
        """Whether no run can be recorded now: no global provider set yet (one question of
        the API's stand-in provider), or one that records nothing."""
        if self.probe is not None:
            if self.unset():
                return True
            self._resolve(self._api.trace.get_tracer_provider())
        return self._kind is _NOTHING

    def start(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Span | None:
        """The run's span, started (no attributes), when the run is recorded; else None."""
        what = self._kind
        if what is None:
            if self.unset():
                return None
            what = self._resolve(self._api.trace.get_tracer_provider())
        if what is _NOTHING:
            return None
        if what is _SDK:
            return self._sdk_start(name, parent, links, kind)
        return _recording(self.tracer.start_span(name, context=parent, kind=kind, links=links))

    def _sdk_start(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Span | None:
        """Ask the SDK's sampler, then start the span if sampled (``_sdk_decide``)."""
        decision = self._sdk_decide(name, parent, links, kind)
        return None if decision is None else self.start_decided(decision)

    def _sdk_decide(
        self, name: str, parent: Context | None, links: list[Link] | None, kind: Any
    ) -> Decision | None:
        """Ask the SDK's sampler about the trace id the span would get: None when it drops
        the run, else what ``start_decided`` starts the span with (the SDK then takes that
        trace id and that answer instead of asking again)."""
        decided = self._decided
        assert decided is not None
        current = self._api.trace.get_current_span(parent)
        if current is decided.no_span:  # no parent: the common case, known at once
            root, trace_id = True, decided.ids.generate_trace_id()
        else:
            span_context = current.get_span_context()
            root = not span_context.is_valid
            trace_id = decided.ids.generate_trace_id() if root else span_context.trace_id
        result = decided.sampler.should_sample(parent, trace_id, name, kind, None, links)
        if result.decision is decided.drop:  # Decision.is_recording(), without the call
            return None
        return (name, parent, links, kind, result, trace_id if root else None)

    def start_decided(self, decision: Decision) -> Span | None:
        """The span the sampler's answer ``decision`` (``decide``) was about, started."""
        name, parent, links, kind, result, trace_id = decision
        pending = self._decided.pending  # type: ignore[union-attr]
        pending.result = result
        pending.trace_id = trace_id
        try:
            span = self.tracer.start_span(name, context=parent, kind=kind, links=links)
        finally:
            pending.result = pending.trace_id = None
        return _recording(span)

    def _resolve(self, provider: TracerProvider) -> str:
        """What ``provider`` is, remembered: it is never replaced."""
        self.probe = None
        trace = self._api.trace
        sdk = sys.modules.get("opentelemetry.sdk.trace")  # an SDK provider imported it
        if isinstance(provider, trace.NoOpTracerProvider):
            self._kind = _NOTHING
            self.begin = _nothing
        elif sdk is not None and isinstance(provider, sdk.TracerProvider):
            self.tracer = tracer = provider.get_tracer(self._scope, self._api.version)
            self._kind = _SDK if isinstance(tracer, sdk.Tracer) else _OTHER  # a shut-down one
            if self._kind is _SDK:
                self._decided = _Decided.install(tracer)
                self.begin = self._sdk_start
                self.decide = self._sdk_decide
        else:
            self._kind = _OTHER
            if self._given is None:
                self.tracer = provider.get_tracer(self._scope, self._api.version)
        return self._kind


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

    __slots__ = ("drop", "ids", "no_span", "pending", "sampler")

    def __init__(self, sampler: Any, ids: Any) -> None:
        from opentelemetry.sdk.trace.sampling import Decision
        from opentelemetry.trace import INVALID_SPAN

        self.sampler = sampler
        self.ids = ids
        self.pending = _Pending()
        self.drop = Decision.DROP
        #: What ``get_current_span`` gives where no span is current.
        self.no_span = INVALID_SPAN

    @classmethod
    def install(cls, tracer: Any) -> _Decided:
        """Put the stand-ins on ``tracer`` (once: the SDK shares a tracer per scope)."""
        sampler = tracer.sampler
        if isinstance(sampler, _DecidedSampler):
            return sampler.decided
        decided = cls(sampler, tracer.id_generator)
        tracer.id_generator = _DecidedIds(decided)
        tracer.sampler = _DecidedSampler(decided)
        return decided


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
