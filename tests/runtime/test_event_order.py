"""The order and content of the ``AgentEvent`` stream (docs/runtime.md, Phases, Hooks and
Events)."""

from __future__ import annotations

import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType, AgentPhase
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.messages import AssistantMessage, ToolMessage
from zett_agent.model import ModelEvent, ModelEventType, ModelResponse, ModelUsage, ToolCallDelta
from zett_agent.tools.base import tool

from .support import (
    ProbeModel,
    answer,
    call,
    calls,
    collect,
    events_of,
    let_other_tasks_run,
    lookup,
    types,
    without_deltas,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="session-1", request_id="request-1")
DELTA_OF = {ModelEventType.TEXT: T.TEXT_DELTA, ModelEventType.REASONING: T.REASONING_DELTA}


SEGMENTS = [
    pytest.param(
        answer("Hello"),
        [T.CONTENT_STARTED, T.TEXT_DELTA, T.CONTENT_COMPLETED],
        id="a text answer streams one content segment then completes",
    ),
    pytest.param(
        [
            ModelEvent.reasoning("Let me "),
            ModelEvent.reasoning("think."),
            ModelEvent.text("Four"),
            ModelEvent.text("."),
            ModelEvent.completed(ModelResponse(AssistantMessage(content="Four.", reasoning="..."))),
        ],
        [
            T.REASONING_STARTED,
            T.REASONING_DELTA,
            T.REASONING_DELTA,
            T.REASONING_COMPLETED,
            T.CONTENT_STARTED,
            T.TEXT_DELTA,
            T.TEXT_DELTA,
            T.CONTENT_COMPLETED,
        ],
        id="reasoning and content are separate segments in stream order",
    ),
    pytest.param(
        [
            ModelEvent.text(""),
            ModelEvent.text("hi"),
            ModelEvent.completed(ModelResponse(AssistantMessage(content="hi"))),
        ],
        [T.TEXT_DELTA, T.CONTENT_STARTED, T.TEXT_DELTA, T.CONTENT_COMPLETED],
        id="empty deltas are streamed but open no segment",
    ),
    pytest.param(
        [ModelEvent.text(""), ModelEvent.completed(ModelResponse(AssistantMessage(content="")))],
        [T.TEXT_DELTA],
        id="a stream of only empty deltas opens no segment at all",
    ),
    pytest.param(
        [
            ModelEvent.reasoning("a"),
            ModelEvent.text("b"),
            ModelEvent.reasoning("c"),
            ModelEvent.completed(ModelResponse(AssistantMessage(content="b", reasoning="ac"))),
        ],
        [
            T.REASONING_STARTED,
            T.REASONING_DELTA,
            T.REASONING_COMPLETED,
            T.CONTENT_STARTED,
            T.TEXT_DELTA,
            T.CONTENT_COMPLETED,
            T.REASONING_STARTED,
            T.REASONING_DELTA,
            T.REASONING_COMPLETED,
        ],
        id="alternating reasoning and text open a new segment each time",
    ),
]


@pytest.mark.parametrize(("turn", "segments"), SEGMENTS)
async def test_model_deltas_stream_in_order_grouped_into_segments(turn, segments):
    events = await events_of(ProbeModel(turn), config=CONFIG)
    assert types(events) == [T.MODEL_STARTED, *segments, T.MODEL_COMPLETED, T.RUN_COMPLETED]
    streamed = [(e.type, e.delta) for e in events if e.type in DELTA_OF.values()]
    assert streamed == [(DELTA_OF[m.type], m.delta) for m in turn if m.type in DELTA_OF]


async def test_one_tool_call_then_an_answer_yields_the_documented_sequence():
    model = ProbeModel(calls(call("lookup", key="k")), answer("done"))
    events = await events_of(model, tools=[lookup], config=CONFIG)
    assert without_deltas(events) == [
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.TOOL_STARTED,
        T.TOOL_COMPLETED,
        T.MODEL_STARTED,
        T.MODEL_COMPLETED,
        T.RUN_COMPLETED,
    ]


async def test_tool_events_carry_one_call_and_its_result():
    model = ProbeModel(calls(call("lookup", "call-9", key="k")), answer("done"))
    events = await events_of(model, tools=[lookup], config=CONFIG)
    started = next(e for e in events if e.type is T.TOOL_STARTED)
    completed = next(e for e in events if e.type is T.TOOL_COMPLETED)
    assert [(c.id, c.name, c.arguments) for c in started.tool_calls] == [
        ("call-9", "lookup", {"key": "k"})
    ]
    assert [c.id for c in completed.tool_calls] == ["call-9"]
    assert isinstance(completed.message, ToolMessage)
    assert completed.message.tool_call_id == "call-9"
    assert completed.message.name == "lookup"
    assert completed.message.content == "value of k"
    assert completed.message.success is True
    assert completed.error is None


async def test_several_tool_calls_run_one_at_a_time_in_model_order():
    running: list[str] = []
    overlaps: list[str] = []

    @tool
    async def step(label: str) -> str:
        """Run one step.

        Guidelines:
            - Use for each step.
        """
        if running:
            overlaps.append(label)
        running.append(label)
        await let_other_tasks_run()  # an overlapping call would run now
        running.remove(label)
        return label

    model = ProbeModel(
        calls(call("step", "c1", label="one"), call("step", "c2", label="two")), answer("ok")
    )
    events = await events_of(model, tools=[step], config=CONFIG)
    tool_events = [
        (e.type, e.tool_calls[0].id) for e in events if e.type in {T.TOOL_STARTED, T.TOOL_COMPLETED}
    ]
    assert tool_events == [
        (T.TOOL_STARTED, "c1"),
        (T.TOOL_COMPLETED, "c1"),
        (T.TOOL_STARTED, "c2"),
        (T.TOOL_COMPLETED, "c2"),
    ]
    assert overlaps == []
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in results] == [("c1", "one"), ("c2", "two")]


async def test_streamed_tool_call_fragments_become_tool_call_delta_events():
    turn = [
        ModelEvent.tool_call(ToolCallDelta(index=0, id="c1", name="lookup")),
        ModelEvent.tool_call(ToolCallDelta(index=0, arguments_delta='{"key": "k"}')),
        *calls(call("lookup", "c1", key="k")),
    ]
    events = await events_of(ProbeModel(turn, answer("ok")), tools=[lookup], config=CONFIG)
    deltas = [e.tool_call_delta for e in events if e.type is T.TOOL_CALL_DELTA]
    assert deltas == [
        ToolCallDelta(index=0, id="c1", name="lookup"),
        ToolCallDelta(index=0, arguments_delta='{"key": "k"}'),
    ]
    assert types(events).index(T.TOOL_CALL_DELTA) < types(events).index(T.MODEL_COMPLETED)


async def test_model_completed_carries_the_response_with_usage():
    usage = ModelUsage(input_tokens=12, output_tokens=3)
    events = await events_of(ProbeModel(answer("hi", usage=usage)), config=CONFIG)
    completed = next(e for e in events if e.type is T.MODEL_COMPLETED)
    assert completed.response.message.content == "hi"
    assert completed.response.usage == usage


async def test_run_completed_is_last_and_carries_the_final_answer():
    events = await events_of(ProbeModel(answer("The end.")), config=CONFIG)
    assert events[-1].type is T.RUN_COMPLETED
    assert isinstance(events[-1].message, AssistantMessage)
    assert events[-1].message.content == "The end."
    assert types(events).count(T.RUN_COMPLETED) == 1


async def test_every_event_names_the_session_of_its_request():
    model = ProbeModel(calls(call("lookup", key="k")), answer("done"))
    events = await events_of(model, tools=[lookup], config=CONFIG)
    assert {e.session_id for e in events} == {"session-1"}


async def test_every_event_is_stamped_with_the_phase_current_when_it_was_queued():
    model = ProbeModel(calls(call("lookup", key="k")), answer("done"))
    events = await events_of(model, tools=[lookup], config=CONFIG)
    phases = {e.type: e.phase for e in events}
    assert phases[T.MODEL_STARTED] is AgentPhase.GENERATING
    assert phases[T.TEXT_DELTA] is AgentPhase.GENERATING
    assert phases[T.MODEL_COMPLETED] is AgentPhase.READY
    assert phases[T.TOOL_STARTED] is AgentPhase.RUNNING_TOOL
    assert phases[T.TOOL_COMPLETED] is AgentPhase.READY
    assert phases[T.RUN_COMPLETED] is AgentPhase.COMPLETED


async def test_custom_events_from_after_model_come_before_model_completed():
    class Announce(AgentExtension):
        async def after_model(self, context, response):
            await context.emit(
                AgentEvent(T.CUSTOM, session_id=context.session_id, name="usage", payload={})
            )

    events = await events_of(ProbeModel(answer("hi")), extensions=[Announce()], config=CONFIG)
    assert without_deltas(events) == [T.MODEL_STARTED, T.CUSTOM, T.MODEL_COMPLETED, T.RUN_COMPLETED]
    custom = events[types(events).index(T.CUSTOM)]
    assert custom.name == "usage"
    assert custom.phase is AgentPhase.READY


async def test_custom_events_keep_their_name_and_payload():
    class Announce(AgentExtension):
        async def before_run(self, context):
            await context.emit(
                AgentEvent(
                    T.CUSTOM,
                    session_id=context.session_id,
                    name="progress",
                    payload={"percent": 10},
                )
            )

    events = await events_of(ProbeModel(answer("hi")), extensions=[Announce()], config=CONFIG)
    assert events[0].type is T.CUSTOM
    assert (events[0].name, events[0].payload, events[0].session_id) == (
        "progress",
        {"percent": 10},
        "session-1",
    )


async def test_extensions_may_emit_compaction_events():
    class Compactor(AgentExtension):
        async def before_run(self, context):
            await context.emit(AgentEvent(T.COMPACTION_STARTED, session_id=context.session_id))

    events = await events_of(ProbeModel(answer("hi")), extensions=[Compactor()], config=CONFIG)
    assert events[0].type is T.COMPACTION_STARTED


@pytest.mark.parametrize("kind", [T.TEXT_DELTA, T.RUN_COMPLETED, T.TOOL_STARTED, T.MODEL_STARTED])
async def test_extensions_may_not_emit_runtime_event_types(kind):
    class Impostor(AgentExtension):
        async def before_run(self, context):
            await context.emit(AgentEvent(kind, session_id=context.session_id))

    agent = await Agent.create(ProbeModel(answer("hi")), extensions=[Impostor()])
    with pytest.raises(AgentProtocolError, match=f"(?i){kind.value}"):
        await collect(agent, "hi", config=CONFIG)


async def test_extensions_may_not_emit_events_for_another_session():
    class Impostor(AgentExtension):
        async def before_run(self, context):
            await context.emit(AgentEvent(T.CUSTOM, session_id="someone-else", name="x"))

    agent = await Agent.create(ProbeModel(answer("hi")), extensions=[Impostor()])
    with pytest.raises(AgentProtocolError, match="someone-else"):
        await collect(agent, "hi", config=CONFIG)


async def test_events_emitted_from_a_tool_arrive_between_its_start_and_completion():
    @tool
    async def report() -> str:
        """Report progress.

        Guidelines:
            - Use to report.
        """
        return "reported"

    class Progress(AgentExtension):
        async def on_tool_call(self, context, call, call_next):
            await context.emit(
                AgentEvent(T.CUSTOM, session_id=context.session_id, name="tool_progress")
            )
            return await call_next(call)

    model = ProbeModel(calls(call("report")), answer("ok"))
    events = await events_of(model, tools=[report], extensions=[Progress()], config=CONFIG)
    assert without_deltas(events)[2:5] == [T.TOOL_STARTED, T.CUSTOM, T.TOOL_COMPLETED]


async def test_the_stream_can_be_consumed_with_aclosing_and_async_for():
    agent = await Agent.create(ProbeModel(answer("hi")), extensions=[])
    seen = []
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as events:
        async for event in events:
            seen.append(event.type)
    assert seen[-1] is T.RUN_COMPLETED


async def test_a_context_kept_after_its_request_ended_can_no_longer_emit():
    kept = []

    class Keep(AgentExtension):
        async def on_tool(self, context):
            kept.append(context)

    agent = await Agent.create(ProbeModel(answer("hi")), extensions=[Keep()])
    await collect(agent, "hi", config=CONFIG)
    with pytest.raises(AgentProtocolError):
        await kept[0].emit(AgentEvent(T.CUSTOM, session_id="session-1", name="late"))


async def test_the_runtime_stamps_the_phase_of_extension_events_itself():
    class Liar(AgentExtension):
        async def before_run(self, context):
            await context.emit(
                AgentEvent(T.CUSTOM, context.session_id, AgentPhase.FAILED, name="claims-failed")
            )

    events = await events_of(ProbeModel(answer("hi")), extensions=[Liar()], config=CONFIG)
    assert events[0].phase is AgentPhase.READY
