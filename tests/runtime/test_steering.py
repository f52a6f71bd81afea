"""Steering: a user redirects a running request (docs/runtime.md, Steering)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import SteeringMessageEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import ToolMessage, UserMessage
from zett_agent.tools.base import tool

from .support import (
    Observer,
    ProbeModel,
    Responder,
    answer,
    call,
    calls,
    collect,
    lookup,
    parked_tool,
    parked_turn,
    races_lost,
)

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
SKIPPED_TEXT = "Superseded by a steering message"
ACCEPTED = ["SteeringExtension"]


def steer(content: str) -> ExternalEvent:
    return ExternalEvent(name="steering_message", payload={"content": content})


async def steered_while_a_tool_runs(model: ProbeModel, *extensions: AgentExtension, **agent):
    """Run ``go`` with the ``slow`` tool, steer with ``new input`` once it started, release
    it; return the agent, the events and the steer's verdict."""
    started, release = asyncio.Event(), asyncio.Event()
    tools = [parked_tool(started, release), *agent.pop("tools", [])]
    steered = await Agent.create(model, tools=tools, extensions=list(extensions), **agent)
    consumer = asyncio.create_task(collect(steered, "go", config=CONFIG))
    await started.wait()
    try:
        verdict = steered.emit_external_event(steer("new input"), config=CONFIG)
    finally:
        release.set()
    return await consumer, verdict


async def test_steering_while_a_tool_runs_skips_the_rest_of_the_batch_and_answers_the_steer():
    turns = Observer()
    model = ProbeModel(
        calls(call("slow", "c1"), call("lookup", "c2", key="k")), answer("steered answer")
    )
    events, verdict = await steered_while_a_tool_runs(model, turns, tools=[lookup])
    assert verdict == ACCEPTED
    kinds = [
        e.type
        for e in events
        if e.type in {T.TOOL_COMPLETED, T.TOOL_SKIPPED, T.STEERING_STARTED, T.STEERING_COMPLETED}
        or e.type is T.RUN_COMPLETED
    ]
    assert kinds == [
        T.TOOL_COMPLETED,
        T.TOOL_SKIPPED,
        T.STEERING_STARTED,
        T.STEERING_COMPLETED,
        T.RUN_COMPLETED,
    ]
    skipped = next(e for e in events if e.type is T.TOOL_SKIPPED)
    assert skipped.tool_calls[0].id == "c2"
    assert (skipped.message.success, skipped.message.content) == (False, SKIPPED_TEXT)
    assert skipped.error is None
    started_event = next(e for e in events if e.type is T.STEERING_STARTED)
    assert started_event.steering_message == UserMessage(content="new input")
    second_request = model.requests[1].messages
    assert isinstance(second_request[-1], UserMessage)
    assert second_request[-1].content == "new input"
    results = [m for m in second_request if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.success) for m in results] == [("c1", True), ("c2", False)]
    assert turns.turn_results[0].tool_calls[0].id == "c1"
    assert events[-1].message.content == "steered answer"
    assert turns.successes == [events[-1].message]


async def test_steering_while_the_model_streams_is_answered_in_a_new_turn():
    reached, release = asyncio.Event(), asyncio.Event()
    turns = Observer()
    model = ProbeModel(parked_turn(reached, release, "first answer"), answer("answer to the steer"))
    agent = await Agent.create(model, extensions=[turns])
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    assert agent.emit_external_event(steer("actually, this"), config=CONFIG) == ACCEPTED
    release.set()
    final = await run
    assert final.content == "answer to the steer"
    assert [m.content for m in turns.turn_results] == ["first answer", "answer to the steer"]
    assert turns.successes == [final]
    assert model.requests[1].messages[-1] == UserMessage(content="actually, this")


async def test_steering_accepted_at_the_final_answer_is_never_lost():
    """Whether accepted or not while the consumer holds the final MODEL_COMPLETED, the
    answer to 'accepted' must match whether the steer was processed."""
    agent = await Agent.create(Responder())
    accepted: list[list[str]] = []
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.MODEL_COMPLETED and not accepted:
                accepted.append(agent.emit_external_event(steer("late steer"), config=CONFIG))
    processed = any(e.type is T.STEERING_STARTED for e in events)
    assert processed == (accepted == [ACCEPTED])
    if processed:
        assert events[-1].message.content == "re: late steer"


async def test_steering_while_the_consumer_holds_run_completed_is_rejected():
    agent = await Agent.create(Responder())
    results = []
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.RUN_COMPLETED:
                results.append(agent.emit_external_event(steer("too late"), config=CONFIG))
    assert results == [[]]


async def test_steering_before_or_after_a_request_is_rejected():
    agent = await Agent.create(Responder(), config=CONFIG)
    assert agent.emit_external_event(steer("early"), config=CONFIG) == []
    await agent.run("hi", config=CONFIG)
    assert agent.emit_external_event(steer("late"), config=CONFIG) == []


@pytest.mark.parametrize(
    "payload", [{}, {"content": 5}, {"content": "   "}], ids=["missing", "not-text", "blank"]
)
async def test_a_malformed_steering_payload_is_rejected(payload):
    started, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(
        ProbeModel(calls(call("slow")), answer("done")), tools=[parked_tool(started, release)]
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    malformed = ExternalEvent(name="steering_message", payload=payload)
    try:
        assert agent.emit_external_event(malformed, config=CONFIG) == []
    finally:
        release.set()
    assert (await run).content == "done"


async def test_steering_is_routed_by_config_not_by_payload():
    started, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(
        ProbeModel(calls(call("slow")), answer("steered")), tools=[parked_tool(started, release)]
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    wrong = ExternalEvent(name="steering_message", payload={"content": "x", "session_id": "s"})
    try:
        assert agent.emit_external_event(wrong, config=AgentRunConfig(session_id="other")) == []
        assert agent.emit_external_event(steer("right"), config=CONFIG) == ACCEPTED
    finally:
        release.set()
    assert (await run).content == "steered"


async def test_a_hook_may_steer_by_publishing_a_steering_message_event():
    class Redirect(AgentExtension):
        def __init__(self) -> None:
            self.done = False

        async def after_tool(self, context, call, result, error):
            if not self.done:
                self.done = True
                await context.publish(SteeringMessageEvent(UserMessage(content="from a hook")))

    model = ProbeModel(
        calls(call("lookup", "c1", key="a"), call("lookup", "c2", key="b")), answer("ok")
    )
    agent = await Agent.create(model, tools=[lookup], extensions=[Redirect()])
    events = await collect(agent, "go", config=CONFIG)
    assert [e.tool_calls[0].id for e in events if e.type is T.TOOL_SKIPPED] == ["c2"]
    assert model.requests[1].messages[-1] == UserMessage(content="from a hook")


async def test_a_steer_superseded_by_another_steer_is_interrupted():
    started = [asyncio.Event(), asyncio.Event()]
    releases = [asyncio.Event(), asyncio.Event()]
    uses = iter(range(2))

    @tool
    async def slow() -> str:
        """Work slowly.

        Guidelines:
            - Use in tests.
        """
        index = next(uses)
        started[index].set()
        await releases[index].wait()
        return "done"

    model = ProbeModel(calls(call("slow", "c1")), calls(call("slow", "c2")), answer("final"))
    agent = await Agent.create(model, tools=[slow])
    consumer = asyncio.create_task(collect(agent, "go", config=CONFIG))
    await started[0].wait()
    agent.emit_external_event(steer("first steer"), config=CONFIG)
    releases[0].set()
    await started[1].wait()
    agent.emit_external_event(steer("second steer"), config=CONFIG)
    releases[1].set()
    events = await consumer
    steering = [
        (e.type, e.steering_message.content)
        for e in events
        if e.type in {T.STEERING_STARTED, T.STEERING_COMPLETED, T.STEERING_INTERRUPTED}
    ]
    assert steering == [
        (T.STEERING_STARTED, "first steer"),
        (T.STEERING_INTERRUPTED, "first steer"),
        (T.STEERING_STARTED, "second steer"),
        (T.STEERING_COMPLETED, "second steer"),
    ]


async def test_steering_resets_the_iteration_budget():
    model = ProbeModel(
        calls(call("slow", "c1")), calls(call("lookup", "c2", key="k")), answer("done")
    )
    events, verdict = await steered_while_a_tool_runs(model, tools=[lookup], max_iterations=2)
    assert verdict == ACCEPTED
    assert events[-1].message.content == "done"
    assert len(model.requests) == 3


async def test_passing_a_built_in_extension_is_an_error():
    found = []

    class Find(AgentExtension):
        async def on_tool(self, context):
            found.extend(e for e in context.extensions if e.name == "SteeringExtension")

    agent = await Agent.create(ProbeModel(answer("ok")), extensions=[Find()])
    await agent.run("hi", config=CONFIG)
    with pytest.raises(ValueError, match="SteeringExtension"):
        Agent(ProbeModel(), extensions=[found[0]])


async def test_steering_racing_the_end_of_a_request_is_processed_exactly_when_accepted():
    """100 runs: a thread steers while the request finishes; accepted ⇔ processed."""
    assert await races_lost(steer("racing"), ACCEPTED, T.STEERING_STARTED) == []


async def test_after_turn_already_sees_the_steering_message_appended():
    last_seen: list[object] = []

    class Look(AgentExtension):
        async def after_turn(self, context, result):
            last_seen.append(context.state.messages[-1])

    model = ProbeModel(calls(call("slow", "c1")), answer("ok"))
    _, verdict = await steered_while_a_tool_runs(model, Look())
    assert verdict == ACCEPTED
    assert last_seen[0] == UserMessage(content="new input")
