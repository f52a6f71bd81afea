"""``agent.steering_interrupts_stream = True``: a steer ends a streaming model call at once
(docs/runtime.md, Steering). Off by default: the default keeps the checkpoints of SPEC A8."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import SteeringMessageEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AssistantMessage, ToolMessage, UserMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, ToolCallDelta

from .support import Observer, ProbeModel, answer, call, lookup

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
WORDS = ["one ", "two ", "three ", "four ", "five "]


def steer(content: str) -> ExternalEvent:
    return ExternalEvent(name="steering_message", payload={"content": content})


def words() -> list[ModelEvent]:
    """A text answer of five deltas."""
    text = "".join(WORDS)
    return [
        *(ModelEvent.text(word) for word in WORDS),
        ModelEvent.completed(ModelResponse(AssistantMessage(text))),
    ]


def silent_after(reached: asyncio.Event, *first: ModelEvent):
    """A turn that streams ``first``, sets ``reached`` and then never says anything more."""

    async def turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for event in first:
            yield event
        reached.set()
        await asyncio.Event().wait()
        yield ModelEvent.text("never")  # pragma: no cover - never reached

    return turn


async def steer_at_delta(agent: Agent, number: int, content: str = "shorter") -> list[AgentEvent]:
    """Run ``start``; steer as the consumer holds the ``number``th text delta."""
    events: list[AgentEvent] = []
    deltas = 0
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.TEXT_DELTA:
                deltas += 1
                if deltas == number:
                    assert agent.emit_external_event(steer(content), config=CONFIG) == [
                        "SteeringExtension"
                    ]
    return events


async def interrupting(model: ProbeModel, **options) -> Agent:
    """An agent whose steering cuts a streaming model call short."""
    agent = await Agent.create(model, **options)
    agent.steering_interrupts_stream = True
    return agent


def kinds(events: list[AgentEvent]) -> list[AgentEventType]:
    return [e.type for e in events if e.type is not T.TEXT_DELTA]


async def test_by_default_a_steer_during_a_text_answer_waits_for_the_whole_answer():
    model = ProbeModel(words(), answer("steered"))
    agent = await Agent.create(model)
    assert agent.steering_interrupts_stream is False
    events = await steer_at_delta(agent, 2)
    first = next(e for e in events if e.type is T.MODEL_COMPLETED)
    assert first.response.message.content == "".join(WORDS)
    assert model.produced == len(WORDS) + 1 + 2
    assert model.requests[1].messages[-2].content == "".join(WORDS)


async def test_a_steer_between_two_deltas_ends_the_text_and_the_next_turn_answers_it():
    turns = Observer()
    model = ProbeModel(words(), answer("steered answer"))
    agent = await interrupting(model, extensions=[turns])
    events = await steer_at_delta(agent, 2)
    assert kinds(events) == [
        T.MODEL_STARTED,
        T.CONTENT_STARTED,
        T.CONTENT_COMPLETED,
        T.MODEL_COMPLETED,
        T.STEERING_STARTED,
        T.MODEL_STARTED,
        T.CONTENT_STARTED,
        T.CONTENT_COMPLETED,
        T.MODEL_COMPLETED,
        T.STEERING_COMPLETED,
        T.RUN_COMPLETED,
    ]
    # The model produced two deltas and was closed: the rest of the answer never came.
    assert (model.produced, model.streams_closed) == (2 + 2, 2)
    cut = next(e for e in events if e.type is T.MODEL_COMPLETED).response
    assert cut.finish_reason == "interrupted"
    assert cut.message.content == "one two "
    assert cut.message.attributes == {"interrupted": True}
    assert cut.usage.total_tokens == 0
    # The model sees what it had said, then the steer.
    history = model.requests[1].messages
    assert [type(m).__name__ for m in history[-3:]] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]
    assert (history[-2].content, history[-1].content) == ("one two ", "shorter")
    assert [m.content for m in turns.turn_results] == ["one two ", "steered answer"]
    assert events[-1].message.content == "steered answer"


async def test_a_steer_while_the_provider_is_silent_cuts_the_stream_at_once():
    reached = asyncio.Event()
    model = ProbeModel(silent_after(reached, ModelEvent.text("Let me ")), answer("ok"))
    agent = await interrupting(model)
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    assert agent.emit_external_event(steer("faster"), config=CONFIG) == ["SteeringExtension"]
    final = await run
    assert final.content == "ok"
    assert model.streams_closed == 2
    history = agent.get_state("s").messages
    assert [(m.role.value, m.content) for m in history[1:]] == [
        ("user", "start"),
        ("assistant", "Let me "),
        ("user", "faster"),
        ("assistant", "ok"),
    ]


async def test_a_steer_from_another_thread_interrupts_too():
    reached = asyncio.Event()
    model = ProbeModel(silent_after(reached, ModelEvent.text("Let me ")), answer("ok"))
    agent = await interrupting(model)
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    verdict = await asyncio.to_thread(agent.emit_external_event, steer("faster"), config=CONFIG)
    assert verdict == ["SteeringExtension"]
    assert (await run).content == "ok"


async def test_a_steer_before_the_first_token_keeps_nothing_of_that_call():
    reached = asyncio.Event()
    model = ProbeModel(silent_after(reached), answer("ok"))
    agent = await interrupting(model)
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    agent.emit_external_event(steer("faster"), config=CONFIG)
    assert (await run).content == "ok"
    history = model.requests[1].messages
    assert [(m.role.value, m.content) for m in history[1:]] == [
        ("user", "start"),
        ("user", "faster"),
    ]


async def test_reasoning_streamed_before_the_steer_is_kept_on_the_partial_message():
    reached = asyncio.Event()
    model = ProbeModel(silent_after(reached, ModelEvent.reasoning("hmm")), answer("ok"))
    agent = await interrupting(model)
    events: list[AgentEvent] = []
    run = asyncio.create_task(_collect_into(agent, events))
    await reached.wait()
    agent.emit_external_event(steer("faster"), config=CONFIG)
    await run
    assert kinds(events)[:5] == [
        T.MODEL_STARTED,
        T.REASONING_STARTED,
        T.REASONING_DELTA,
        T.REASONING_COMPLETED,
        T.MODEL_COMPLETED,
    ]
    partial = model.requests[1].messages[-2]
    assert (partial.content, partial.reasoning) == ("", "hmm")


async def _collect_into(agent: Agent, events: list[AgentEvent]) -> None:
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)


async def test_a_call_that_began_a_tool_call_is_not_cut_and_its_calls_are_skipped():
    reached, release = asyncio.Event(), asyncio.Event()

    async def tool_turn(request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelEvent.text("Looking up. ")
        yield ModelEvent.tool_call(ToolCallDelta(0, "c1", "lookup", ""))
        reached.set()
        await release.wait()
        message = AssistantMessage("Looking up. ", tool_calls=(call("lookup", "c1", key="k"),))
        yield ModelEvent.completed(ModelResponse(message, finish_reason="tool_calls"))

    model = ProbeModel(tool_turn, answer("steered"))
    agent = await interrupting(model, tools=[lookup])
    events: list[AgentEvent] = []
    run = asyncio.create_task(_collect_into(agent, events))
    await reached.wait()
    agent.emit_external_event(steer("stop that"), config=CONFIG)
    release.set()
    await run
    assert [e.type for e in events if e.type in {T.TOOL_SKIPPED, T.STEERING_STARTED}] == [
        T.TOOL_SKIPPED,
        T.STEERING_STARTED,
    ]
    first = next(e for e in events if e.type is T.MODEL_COMPLETED).response
    assert first.finish_reason == "tool_calls"
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.success) for m in results] == [("c1", False)]


async def test_cancelling_the_request_while_the_stream_is_silent_still_cancels_it():
    reached = asyncio.Event()
    turns = Observer()
    model = ProbeModel(silent_after(reached, ModelEvent.text("Let me ")))
    agent = await interrupting(model, extensions=[turns])
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert len(turns.cancelled) == 1
    assert model.streams_closed == 1


async def test_several_steers_during_one_answer_are_answered_by_one_turn():
    reached = asyncio.Event()
    model = ProbeModel(silent_after(reached, ModelEvent.text("Let me ")), answer("ok"))
    agent = await interrupting(model)
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    agent.emit_external_event(steer("one"), config=CONFIG)
    agent.emit_external_event(steer("two"), config=CONFIG)
    assert (await run).content == "ok"
    assert [m.content for m in model.requests[1].messages[-2:]] == ["one", "two"]


async def test_the_steer_signal_is_withdrawn_when_the_call_ends():
    model = ProbeModel(words())
    agent = await interrupting(model)
    seen: list[object] = []
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.MODEL_COMPLETED:
                seen.append(agent._inboxes["s"].on_steering)
    assert seen == [None]


def test_the_partial_message_round_trips_through_serialization():
    from zett_agent.serialization import message_from_dict, message_to_dict

    message = AssistantMessage("one ", attributes={"interrupted": True})
    assert message_from_dict(message_to_dict(message)) == message
    assert UserMessage("x") == message_from_dict(message_to_dict(UserMessage("x")))


class SteersBeforeTheCall(AgentExtension):
    """Publishes a steer from ``before_model`` of the first call; records its model layer."""

    def __init__(self) -> None:
        self.layer: list[str] = []

    async def before_model(self, context, request) -> None:
        if not self.layer:
            await context.publish(SteeringMessageEvent(UserMessage("early")))

    async def on_model_request(self, context, request, call_next):
        self.layer.append("open")
        try:
            async with contextlib.aclosing(call_next(request)) as stream:
                async for event in stream:
                    yield event
        finally:
            self.layer.append("closed")


async def test_a_steer_waiting_when_the_call_starts_cuts_it_at_its_first_wait():
    steers = SteersBeforeTheCall()
    model = ProbeModel(silent_after(asyncio.Event()), answer("ok"))
    agent = await interrupting(model, extensions=[steers])
    assert (await agent.run("start", config=CONFIG)).content == "ok"
    # The first call's layer opened and closed, as for any call; nothing of it was kept.
    assert steers.layer == ["open", "closed", "open", "closed"]
    assert [(m.role.value, m.content) for m in model.requests[1].messages[1:]] == [
        ("user", "start"),
        ("user", "early"),
    ]
