"""Steering: a user redirects a running request (SPEC A8)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import SteeringMessageEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AssistantMessage, ToolMessage, UserMessage
from zett_agent.model import ModelEvent
from zett_agent.tools.base import tool

from .support import ProbeModel, answer, call, calls, collect, lookup

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
SKIPPED_TEXT = "Superseded by a steering message"


def steer(content: str) -> ExternalEvent:
    return ExternalEvent(name="steering_message", payload={"content": content})


class AnswerLastUser:
    """Answers every request with the text of the last user message."""

    def __init__(self) -> None:
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        last_user = next(m for m in reversed(request.messages) if isinstance(m, UserMessage))
        for event in answer(f"re: {last_user.content}"):
            yield event


class Turns(AgentExtension):
    def __init__(self) -> None:
        self.turn_results: list[AssistantMessage] = []
        self.successes: list[AssistantMessage] = []

    async def after_turn(self, context, result):
        self.turn_results.append(result)

    async def on_success(self, context, result):
        self.successes.append(result)


def gated_tool(started: asyncio.Event, release: asyncio.Event):
    @tool
    async def slow() -> str:
        """Work slowly.

        Guidelines:
            - Use in tests.
        """
        started.set()
        await release.wait()
        return "slow result"

    return slow


async def test_steering_while_a_tool_runs_skips_the_rest_of_the_batch_and_answers_the_steer():
    started, release = asyncio.Event(), asyncio.Event()
    turns = Turns()
    model = ProbeModel(
        calls(call("slow", "c1"), call("lookup", "c2", key="k")), answer("steered answer")
    )
    agent = await Agent.create(
        model, tools=[gated_tool(started, release), lookup], extensions=[turns]
    )
    events: list[AgentEvent] = []

    async def consume():
        async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
            async for event in stream:
                events.append(event)

    consumer = asyncio.create_task(consume())
    await started.wait()
    assert agent.emit_external_event(steer("do this instead"), config=CONFIG) == [
        "SteeringExtension"
    ]
    release.set()
    await consumer

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
    assert started_event.steering_message == UserMessage(content="do this instead")
    second_request = model.requests[1].messages
    assert isinstance(second_request[-1], UserMessage)
    assert second_request[-1].content == "do this instead"
    results = [m for m in second_request if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.success) for m in results] == [("c1", True), ("c2", False)]
    assert turns.turn_results[0].tool_calls[0].id == "c1"
    assert events[-1].message.content == "steered answer"
    assert turns.successes == [events[-1].message]


async def test_steering_while_the_model_streams_is_answered_in_a_new_turn():
    reached, release = asyncio.Event(), asyncio.Event()

    async def parked(request):
        yield ModelEvent.text("first ")
        reached.set()
        await release.wait()
        for event in answer("first answer")[1:]:
            yield event

    turns = Turns()
    model = ProbeModel(parked, answer("answer to the steer"))
    agent = await Agent.create(model, extensions=[turns])
    run = asyncio.create_task(agent.run("start", config=CONFIG))
    await reached.wait()
    assert agent.emit_external_event(steer("actually, this"), config=CONFIG) == [
        "SteeringExtension"
    ]
    release.set()
    final = await run
    assert final.content == "answer to the steer"
    assert [m.content for m in turns.turn_results] == ["first answer", "answer to the steer"]
    assert turns.successes == [final]
    assert model.requests[1].messages[-1] == UserMessage(content="actually, this")


async def test_steering_accepted_at_the_final_answer_is_never_lost():
    """Whether accepted or not while the consumer holds the final MODEL_COMPLETED, the
    answer to 'accepted' must match whether the steer was processed."""
    model = AnswerLastUser()
    agent = await Agent.create(model)
    accepted: list[list[str]] = []
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.MODEL_COMPLETED and not accepted:
                accepted.append(agent.emit_external_event(steer("late steer"), config=CONFIG))
    processed = any(e.type is T.STEERING_STARTED for e in events)
    assert processed == (accepted == [["SteeringExtension"]])
    if processed:
        assert events[-1].message.content == "re: late steer"


async def test_steering_while_the_consumer_holds_run_completed_is_rejected():
    agent = await Agent.create(AnswerLastUser())
    results = []
    async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.RUN_COMPLETED:
                results.append(agent.emit_external_event(steer("too late"), config=CONFIG))
    assert results == [[]]


async def test_steering_before_or_after_a_request_is_rejected():
    agent = await Agent.create(AnswerLastUser(), config=CONFIG)
    assert agent.emit_external_event(steer("early"), config=CONFIG) == []
    await agent.run("hi", config=CONFIG)
    assert agent.emit_external_event(steer("late"), config=CONFIG) == []


@pytest.mark.parametrize(
    "payload", [{}, {"content": 5}, {"content": "   "}], ids=["missing", "not-text", "blank"]
)
async def test_a_malformed_steering_payload_is_rejected(payload):
    started, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(
        ProbeModel(calls(call("slow")), answer("done")),
        tools=[gated_tool(started, release)],
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    try:
        assert (
            agent.emit_external_event(
                ExternalEvent(name="steering_message", payload=payload), config=CONFIG
            )
            == []
        )
    finally:
        release.set()
    assert (await run).content == "done"


async def test_steering_is_routed_by_config_not_by_payload():
    started, release = asyncio.Event(), asyncio.Event()
    agent = await Agent.create(
        ProbeModel(calls(call("slow")), answer("steered")), tools=[gated_tool(started, release)]
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    wrong = ExternalEvent(name="steering_message", payload={"content": "x", "session_id": "s"})
    assert agent.emit_external_event(wrong, config=AgentRunConfig(session_id="other")) == []
    assert agent.emit_external_event(steer("right"), config=CONFIG) == ["SteeringExtension"]
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
    events: list[AgentEvent] = []

    async def consume():
        async with contextlib.aclosing(agent.stream("go", config=CONFIG)) as stream:
            async for event in stream:
                events.append(event)

    consumer = asyncio.create_task(consume())
    await started[0].wait()
    agent.emit_external_event(steer("first steer"), config=CONFIG)
    releases[0].set()
    await started[1].wait()
    agent.emit_external_event(steer("second steer"), config=CONFIG)
    releases[1].set()
    await consumer
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
    started, release = asyncio.Event(), asyncio.Event()
    model = ProbeModel(
        calls(call("slow", "c1")), calls(call("lookup", "c2", key="k")), answer("done")
    )
    agent = await Agent.create(
        model, tools=[gated_tool(started, release), lookup], max_iterations=2
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    agent.emit_external_event(steer("new input"), config=CONFIG)
    release.set()
    assert (await run).content == "done"
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

    class HandsOffTheGil:
        """Streams a few words, each after a round trip through a worker thread, so the
        steering thread gets real chances to run at every point of the request."""

        async def stream(self, request):
            last_user = next(m for m in reversed(request.messages) if isinstance(m, UserMessage))
            words = f"re: {last_user.content}".split(" ")
            for word in words:
                await asyncio.to_thread(lambda: None)
                yield ModelEvent.text(word + " ")
            for event in answer(" ".join(words) + " ")[1:]:
                yield event

    agent = await Agent.create(HandsOffTheGil(), extensions=[])
    outcomes = {"accepted": 0, "rejected": 0}
    for index in range(100):
        config = AgentRunConfig(session_id=f"race-{index}")
        go = threading.Event()
        verdict: list[list[str]] = []

        def steer_when_told(c=config, g=go, v=verdict):
            g.wait()
            v.append(agent.emit_external_event(steer("racing"), config=c))

        thread = threading.Thread(target=steer_when_told)
        thread.start()
        events: list[AgentEvent] = []
        release_at = index % 10  # sweep the release over every event of the request
        async with contextlib.aclosing(agent.stream("start", config=config)) as stream:
            async for event in stream:
                events.append(event)
                if len(events) == release_at:
                    go.set()
        go.set()
        await asyncio.to_thread(thread.join)
        processed = any(e.type is T.STEERING_STARTED for e in events)
        accepted = verdict == [["SteeringExtension"]]
        assert processed == accepted, f"run {index}: accepted={accepted} processed={processed}"
        outcomes["accepted" if accepted else "rejected"] += 1
    assert sum(outcomes.values()) == 100


async def test_after_turn_already_sees_the_steering_message_appended():
    started, release = asyncio.Event(), asyncio.Event()
    last_seen: list[object] = []

    class Look(AgentExtension):
        async def after_turn(self, context, result):
            last_seen.append(context.state.messages[-1])

    agent = await Agent.create(
        ProbeModel(calls(call("slow", "c1")), answer("ok")),
        tools=[gated_tool(started, release)],
        extensions=[Look()],
    )
    run = asyncio.create_task(agent.run("go", config=CONFIG))
    await started.wait()
    agent.emit_external_event(steer("turn left"), config=CONFIG)
    release.set()
    await run
    assert last_seen[0] == UserMessage(content="turn left")
