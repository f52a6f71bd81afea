"""Internal messages: application instructions answered at the next final answer (SPEC A8)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.exceptions import AgentProtocolError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import InternalMessageEvent, SteeringMessageEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AgentMessage, AssistantMessage, UserMessage
from zett_agent.model import ModelEvent

from .support import answer

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")


def instruct(content: str) -> ExternalEvent:
    return ExternalEvent(name="internal_message", payload={"content": content})


class AnswerLastInput:
    """Answers with the text of the last user or agent message; can park its first turn."""

    def __init__(self, park_first: bool = False) -> None:
        self.requests = []
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self.park_first = park_first

    async def stream(self, request):
        self.requests.append(request)
        last = next(
            m for m in reversed(request.messages) if isinstance(m, UserMessage | AgentMessage)
        )
        if self.park_first and len(self.requests) == 1:
            yield ModelEvent.text("...")
            self.reached.set()
            await self.release.wait()
        for event in answer(f"re: {last.content}"):
            yield event


class Finals(AgentExtension):
    def __init__(self) -> None:
        self.successes: list[AssistantMessage] = []
        self.turns: list[str] = []

    async def after_turn(self, context, result):
        self.turns.append(result.content)

    async def on_success(self, context, result):
        self.successes.append(result)


async def run_with_instruction(agent: Agent, model: AnswerLastInput, *contents: str):
    events: list[AgentEvent] = []
    verdicts: list[list[str]] = []

    async def consume():
        async with contextlib.aclosing(agent.stream("start", config=CONFIG)) as stream:
            async for event in stream:
                events.append(event)

    consumer = asyncio.create_task(consume())
    await model.reached.wait()
    verdicts.extend(agent.emit_external_event(instruct(c), config=CONFIG) for c in contents)
    model.release.set()
    await consumer
    return events, verdicts


async def test_an_instruction_is_answered_after_the_final_answer_in_its_own_turn():
    model = AnswerLastInput(park_first=True)
    finals = Finals()
    agent = await Agent.create(model, extensions=[finals])
    events, verdicts = await run_with_instruction(agent, model, "Also summarise.")
    assert verdicts == [["InternalMessageExtension"]]
    marks = [
        (e.type, e.internal_message.content)
        for e in events
        if e.type in {T.INTERNAL_MESSAGE_STARTED, T.INTERNAL_MESSAGE_COMPLETED}
    ]
    assert marks == [
        (T.INTERNAL_MESSAGE_STARTED, "Also summarise."),
        (T.INTERNAL_MESSAGE_COMPLETED, "Also summarise."),
    ]
    assert isinstance(model.requests[1].messages[-1], AgentMessage)
    assert model.requests[1].messages[-1].content == "Also summarise."
    assert events[-1].type is T.RUN_COMPLETED
    assert events[-1].message.content == "re: Also summarise."
    assert finals.turns == ["re: start", "re: Also summarise."]
    assert finals.successes == [events[-1].message]


async def test_instructions_are_limited_per_request():
    model = AnswerLastInput(park_first=True)
    agent = await Agent.create(model, max_internal_messages=1)
    _, verdicts = await run_with_instruction(agent, model, "one", "two")
    assert verdicts == [["InternalMessageExtension"], []]
    assert len(model.requests) == 2


async def test_a_limit_of_zero_rejects_every_instruction():
    model = AnswerLastInput(park_first=True)
    agent = await Agent.create(model, max_internal_messages=0)
    events, verdicts = await run_with_instruction(agent, model, "one")
    assert verdicts == [[]]
    assert T.INTERNAL_MESSAGE_STARTED not in [e.type for e in events]


async def test_instructions_outside_a_running_request_are_rejected():
    agent = await Agent.create(AnswerLastInput(), config=CONFIG)
    assert agent.emit_external_event(instruct("early"), config=CONFIG) == []
    await agent.run("hi", config=CONFIG)
    assert agent.emit_external_event(instruct("late"), config=CONFIG) == []


async def test_a_hook_may_queue_an_instruction_by_publishing_an_event():
    class Nudge(AgentExtension):
        async def before_run(self, context):
            await context.publish(InternalMessageEvent(AgentMessage(content="Be thorough.")))

    model = AnswerLastInput()
    agent = await Agent.create(model, extensions=[Nudge()])
    result = await agent.run("hi", config=CONFIG)
    assert result.content == "re: Be thorough."


async def test_publishing_beyond_the_limit_is_a_protocol_error():
    class Pushy(AgentExtension):
        async def before_run(self, context):
            await context.publish(InternalMessageEvent(AgentMessage(content="one")))
            await context.publish(InternalMessageEvent(AgentMessage(content="two")))

    agent = await Agent.create(AnswerLastInput(), extensions=[Pushy()], max_internal_messages=1)
    with pytest.raises(AgentProtocolError, match="max_internal_messages"):
        await agent.run("hi", config=CONFIG)


async def test_an_instruction_superseded_by_steering_is_interrupted():
    class SteerDuringInstruction(AgentExtension):
        async def before_turn(self, context):
            if context.state.messages and isinstance(context.state.messages[-1], AgentMessage):
                await context.publish(SteeringMessageEvent(UserMessage(content="never mind")))

    class Nudge(AgentExtension):
        async def before_run(self, context):
            await context.publish(InternalMessageEvent(AgentMessage(content="Be thorough.")))

    agent = await Agent.create(AnswerLastInput(), extensions=[Nudge(), SteerDuringInstruction()])
    events: list[AgentEvent] = []
    async with contextlib.aclosing(agent.stream("hi", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
    kinds = [
        e.type
        for e in events
        if e.type.name.startswith(("INTERNAL_MESSAGE", "STEERING")) or e.type is T.RUN_COMPLETED
    ]
    assert kinds == [
        T.INTERNAL_MESSAGE_STARTED,
        T.INTERNAL_MESSAGE_INTERRUPTED,
        T.STEERING_STARTED,
        T.STEERING_COMPLETED,
        T.RUN_COMPLETED,
    ]
    assert events[-1].message.content == "re: never mind"


async def test_instructions_racing_the_end_of_a_request_are_processed_exactly_when_accepted():
    """100 runs: a thread instructs while the request finishes; accepted ⇔ processed."""

    class HandsOffTheGil:
        async def stream(self, request):
            last = next(
                m for m in reversed(request.messages) if isinstance(m, UserMessage | AgentMessage)
            )
            for word in ("re:", last.content):
                await asyncio.to_thread(lambda: None)
                yield ModelEvent.text(word + " ")
            for event in answer(f"re: {last.content} ")[1:]:
                yield event

    agent = await Agent.create(HandsOffTheGil(), extensions=[])
    for index in range(100):
        config = AgentRunConfig(session_id=f"race-{index}")
        go = threading.Event()
        verdict: list[list[str]] = []

        def instruct_when_told(c=config, g=go, v=verdict):
            g.wait()
            v.append(agent.emit_external_event(instruct("racing"), config=c))

        thread = threading.Thread(target=instruct_when_told)
        thread.start()
        events: list[AgentEvent] = []
        release_at = index % 10
        async with contextlib.aclosing(agent.stream("start", config=config)) as stream:
            async for event in stream:
                events.append(event)
                if len(events) == release_at:
                    go.set()
        go.set()
        await asyncio.to_thread(thread.join)
        processed = any(e.type is T.INTERNAL_MESSAGE_STARTED for e in events)
        accepted = verdict == [["InternalMessageExtension"]]
        assert processed == accepted, f"run {index}: accepted={accepted} processed={processed}"
