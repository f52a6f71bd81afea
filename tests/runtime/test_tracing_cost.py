"""A run the sampler drops costs the tracing extension one decision, and the runtime no
further events; with no SDK behind the API a run never calls the extension at all; the
sampler is asked once per run, about the trace id the run's span then gets;
``AgentRunContext.withdraw`` leaves an extension out of one request only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    DEFAULT_OFF,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    NoOpTracerProvider,
    SpanContext,
    TraceFlags,
    get_current_span,
    use_span,
)

from tests.runtime.support import ProbeModel, add, answer, call, calls, collect
from tests.runtime.test_tracing_context import run_python
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions._trace_sampling import _unset_question
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import PhaseTransitionEvent
from zett_agent.extensions.tracing import TracingExtension
from zett_agent.phases import AgentPhase

SESSION = "chat-7"


class Switch(Sampler):
    """Samples the runs it is told to."""

    def __init__(self) -> None:
        self.sample = False

    def should_sample(self, parent_context, trace_id, name, *args, **kwargs):
        decision = Decision.RECORD_AND_SAMPLE if self.sample else Decision.DROP
        return SamplingResult(decision)

    def get_description(self) -> str:
        return "Switch"


class Asked(Sampler):
    """Records every question; samples the trace ids whose last bit is 0 (as a ratio
    sampler reads the trace id), or every one when a parent is sampled."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, bool]] = []

    def should_sample(self, parent_context, trace_id, name, *args, **kwargs):
        parent = get_current_span(parent_context).get_span_context()
        sampled = parent.trace_flags.sampled if parent.is_valid else trace_id % 2 == 0
        self.asked.append((name, trace_id, sampled))
        return SamplingResult(Decision.RECORD_AND_SAMPLE if sampled else Decision.DROP)

    def get_description(self) -> str:
        return "Asked"


class CountingTracing(TracingExtension):
    """The tracing extension, counting the hook calls it gets."""

    def __init__(self, **options) -> None:
        super().__init__("helper", **options)
        self.calls: dict[str, int] = {}

    def _count(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1

    async def on_event(self, context, event) -> None:
        self._count("on_event")
        await super().on_event(context, event)

    async def after_model(self, context, response) -> None:
        self._count("after_model")
        await super().after_model(context, response)

    async def after_tool(self, context, call, result, error) -> None:
        self._count("after_tool")
        await super().after_tool(context, call, result, error)


class Listener(AgentExtension):
    """Every phase another extension's ``on_event`` sees."""

    def __init__(self) -> None:
        self.phases: list[AgentPhase] = []

    async def on_event(self, context, event) -> None:
        if isinstance(event, PhaseTransitionEvent):
            self.phases.append(event.current_phase)


def tool_run_model() -> ProbeModel:
    return ProbeModel(calls(call("add", "call-1", a=1, b=2)), answer("three"))


async def test_a_dropped_run_is_one_decision_and_no_hook_call(exporter):
    switch = Switch()
    provider = TracerProvider(sampler=switch)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = CountingTracing(tracer_provider=provider)
    model = ProbeModel(
        calls(call("add", "call-1", a=1, b=2)),
        answer("three"),
        calls(call("add", "call-2", a=2, b=2)),
        answer("four"),
    )
    agent = await Agent.create(model, tools=[add], extensions=[tracing])

    await collect(agent, "1+2?", config=AgentRunConfig(session_id=SESSION))
    assert tracing.calls == {}  # asked when the request was claimed: the sampler said no
    assert exporter.get_finished_spans() == ()

    switch.sample = True  # the next run of the same agent is recorded in full
    tracing.calls.clear()
    await collect(agent, "2+2?", config=AgentRunConfig(session_id=SESSION))
    assert tracing.calls["after_model"] == 2
    assert tracing.calls["after_tool"] == 1
    assert tracing.calls["on_event"] > 1
    names = sorted(span.name for span in exporter.get_finished_spans())
    assert names == ["chat", "chat", "execute_tool add", "invoke_agent helper"]


async def test_the_sampler_is_asked_once_per_run_about_the_trace_id_its_span_gets(exporter):
    sampler = Asked()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = await Agent.create(
        ProbeModel(*[answer(f"answer {n}") for n in range(24)]),
        extensions=[TracingExtension("helper", tracer_provider=provider)],
    )
    for n in range(24):
        await collect(agent, f"question {n}", config=AgentRunConfig(session_id=SESSION))

    runs = [entry for entry in sampler.asked if entry[0] == "invoke_agent helper"]
    assert len(runs) == 24  # once per run: the SDK took the answer it was given
    recorded = {span.context.trace_id for span in exporter.get_finished_spans()}
    assert recorded == {trace_id for _, trace_id, sampled in runs if sampled}
    assert 0 < len(recorded) < 24  # both answers came up
    chats = [entry for entry in sampler.asked if entry[0] == "chat"]
    assert {trace_id for _, trace_id, _ in chats} == recorded  # asked by the SDK, as usual


async def test_under_the_consumers_current_span_the_sampler_is_asked_about_its_trace(exporter):
    sampler = Asked()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = await Agent.create(
        ProbeModel(answer("one")),
        extensions=[TracingExtension("helper", tracer_provider=provider)],
    )
    trace_id = 0x5B8AA5A2D2C872E8321CF37308D69DF3  # odd: a root with it would be dropped
    parent = NonRecordingSpan(
        SpanContext(trace_id, 0x51, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )
    with use_span(parent):
        await collect(agent, "hi", config=AgentRunConfig(session_id=SESSION))
    runs = [entry for entry in sampler.asked if entry[0] == "invoke_agent helper"]
    assert runs == [("invoke_agent helper", trace_id, True)]
    (run,) = [span for span in exporter.get_finished_spans() if span.name == runs[0][0]]
    assert (run.context.trace_id, run.parent.span_id) == (trace_id, 0x51)


class CountedIds(RandomIdGenerator):
    """The SDK's id generator, counting the trace ids it draws."""

    def __init__(self) -> None:
        self.trace_ids = 0

    def generate_trace_id(self) -> int:
        self.trace_ids += 1
        return super().generate_trace_id()


class AskedOff(StaticSampler):
    """Drops every span as ``ALWAYS_OFF`` does, but is a subclass: its answer is asked."""

    def __init__(self) -> None:
        super().__init__(Decision.DROP)
        self.asked = 0

    def should_sample(self, *args, **kwargs):
        self.asked += 1
        return super().should_sample(*args, **kwargs)


async def traced_runs(sampler, exporter, runs: int = 3, parent=None) -> CountedIds:
    """``runs`` one-answer runs traced through a provider with ``sampler``, under
    ``parent`` as the current span when given; the provider's id generator."""
    ids = CountedIds()
    provider = TracerProvider(sampler=sampler, id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = await Agent.create(
        ProbeModel(*[answer(f"answer {n}") for n in range(runs)]),
        extensions=[TracingExtension("helper", tracer_provider=provider)],
    )
    for n in range(runs):
        if parent is None:
            await collect(agent, f"question {n}", config=AgentRunConfig(session_id=SESSION))
        else:
            with use_span(parent):
                await collect(agent, f"question {n}", config=AgentRunConfig(session_id=SESSION))
    return ids


@pytest.mark.parametrize(
    "sampler",
    [ALWAYS_OFF, DEFAULT_OFF, TraceIdRatioBased(0.0), ParentBased(TraceIdRatioBased(0.0))],
    ids=["always-off", "parent-based-off", "ratio-0", "parent-based-ratio-0"],
)
async def test_a_sampler_that_drops_every_root_is_not_asked_and_draws_no_trace_id(
    sampler, exporter
):
    ids = await traced_runs(sampler, exporter)
    assert ids.trace_ids == 0
    assert exporter.get_finished_spans() == ()


async def test_a_ratio_sampler_that_may_keep_a_root_is_asked_about_each_trace_id(exporter):
    ids = await traced_runs(ParentBased(TraceIdRatioBased(1e-12)), exporter)
    assert ids.trace_ids == 3  # one per run: the ratio reads it
    assert exporter.get_finished_spans() == ()


async def test_a_subclass_of_the_sdks_own_sampler_is_asked_each_run(exporter):
    sampler = AskedOff()
    ids = await traced_runs(sampler, exporter)
    assert (sampler.asked, ids.trace_ids) == (3, 3)
    assert exporter.get_finished_spans() == ()


async def test_a_sampled_parent_is_followed_when_only_roots_are_dropped(exporter):
    trace_id = 0x5B8AA5A2D2C872E8321CF37308D69DF3
    parent = NonRecordingSpan(
        SpanContext(trace_id, 0x51, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )
    ids = await traced_runs(DEFAULT_OFF, exporter, runs=1, parent=parent)
    assert ids.trace_ids == 0  # the parent's trace
    runs = [span for span in exporter.get_finished_spans() if span.name == "invoke_agent helper"]
    assert [(span.context.trace_id, span.parent.span_id) for span in runs] == [(trace_id, 0x51)]


async def test_an_invalid_current_span_leaves_a_run_a_root_that_is_dropped(exporter):
    ids = await traced_runs(DEFAULT_OFF, exporter, runs=2, parent=INVALID_SPAN)
    assert ids.trace_ids == 0
    assert exporter.get_finished_spans() == ()


def test_with_no_provider_set_a_run_calls_no_hook_until_one_is():
    output = run_python(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from zett_agent.agent import Agent
        from zett_agent.extensions.tracing import TracingExtension
        from zett_agent.testing import ScriptedModel
        from zett_agent.messages import AssistantMessage

        class Counting(TracingExtension):
            calls = 0

            async def on_event(self, context, event):
                self.calls += 1
                await super().on_event(context, event)

        async def main():
            tracing = Counting("helper")
            model = ScriptedModel([AssistantMessage("one"), AssistantMessage("two")])
            agent = await Agent.create(model, extensions=[tracing])
            await agent.run("first")
            print(tracing.calls)
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            await agent.run("second")
            print(sorted(span.name for span in exporter.get_finished_spans()))
        asyncio.run(main())
        """
    )
    assert output.splitlines() == ["0", "['chat', 'invoke_agent helper']"]


async def test_with_no_sdk_a_run_calls_no_hook():
    tracing = CountingTracing(tracer_provider=NoOpTracerProvider())
    agent = await Agent.create(tool_run_model(), tools=[add], extensions=[tracing])
    await collect(agent, "1+2?", config=AgentRunConfig(session_id=SESSION))
    assert tracing.calls == {}


async def test_other_listeners_still_see_every_phase_of_a_dropped_run():
    listener = Listener()
    tracing = CountingTracing(tracer_provider=NoOpTracerProvider())
    agent = await Agent.create(tool_run_model(), tools=[add], extensions=[listener, tracing])
    await collect(agent, "1+2?", config=AgentRunConfig(session_id=SESSION))
    assert tracing.calls == {}
    assert listener.phases[0] is AgentPhase.LOADING_CONTEXT
    assert AgentPhase.RUNNING_TOOL in listener.phases
    assert listener.phases[-1] is AgentPhase.COMPLETED


async def test_withdraw_leaves_an_extension_out_of_one_request_only():
    class Quitter(AgentExtension):
        def __init__(self) -> None:
            self.seen: list[list[str]] = []

        async def before_run(self, context) -> None:
            self.seen[-1].append("before_run")
            if len(self.seen) == 1:
                context.withdraw(self)

        async def after_model(self, context, response) -> None:
            self.seen[-1].append("after_model")

        async def after_run(self, context, final) -> None:
            self.seen[-1].append("after_run")

    quitter = Quitter()
    agent = await Agent.create(ProbeModel(answer("one"), answer("two")), extensions=[quitter])
    for text in ("first", "second"):
        quitter.seen.append([])
        await collect(agent, text, config=AgentRunConfig(session_id=SESSION))
    assert quitter.seen == [["before_run"], ["before_run", "after_model", "after_run"]]


async def test_a_run_that_fails_before_its_span_starts_keeps_no_sampling_answer(exporter):
    class Refusing(AgentExtension):
        async def on_event(self, context, event) -> None:
            phase = getattr(event, "current_phase", None)
            if phase is AgentPhase.LOADING_CONTEXT:
                raise RuntimeError("refused")

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = TracingExtension("helper", tracer_provider=provider)
    agent = await Agent.create(tool_run_model(), tools=[add], extensions=[Refusing(), tracing])
    with pytest.raises(RuntimeError, match="refused"):
        await collect(agent, "1+2?", config=AgentRunConfig(session_id=SESSION))
    assert tracing._decisions == {} and tracing._runs == {}
    assert exporter.get_finished_spans() == ()


def test_whether_a_global_provider_is_set_is_read_from_the_api_or_asked_of_its_stand_in():
    api = SimpleNamespace(_TRACER_PROVIDER=None, ProxyTracer=trace.ProxyTracer)
    unset = _unset_question(api, None, "zett_agent")
    assert unset() is True
    api._TRACER_PROVIDER = TracerProvider()
    assert unset() is False

    class StandIn:  # an API without the provider slot: its stand-in provider is asked
        real = None

        def get_tracer(self, scope):
            return self.real if self.real is not None else trace.ProxyTracer(scope)

    stand_in = StandIn()
    asked = _unset_question(SimpleNamespace(ProxyTracer=trace.ProxyTracer), stand_in, "zett")
    assert asked() is True
    stand_in.real = TracerProvider().get_tracer("zett")
    assert asked() is False
