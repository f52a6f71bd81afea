"""Internal messages: application instructions answered at the next final answer
(docs/runtime.md, Steering)."""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.exceptions import AgentIterationLimitError
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import InternalMessageEvent, SteeringMessageEvent
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import AgentMessage, UserMessage

from .support import Observer, Responder, collect, last_input, races_lost

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s")
ACCEPTED = ["InternalMessageExtension"]


def instruct(content: str) -> ExternalEvent:
    return ExternalEvent(name="internal_message", payload={"content": content})


class Nudge(AgentExtension):
    """Queues one instruction before the run by publishing an ``InternalMessageEvent``."""

    def __init__(self, *contents: str) -> None:
        self.contents = contents or ("Be thorough.",)

    async def before_run(self, context):
        for content in self.contents:
            await context.publish(InternalMessageEvent(AgentMessage(content=content)))


async def run_with_instruction(agent: Agent, model: Responder, *contents: str):
    """Instruct the request while its first model turn is parked; return events, verdicts."""
    consumer = asyncio.create_task(collect(agent, "start", config=CONFIG))
    await model.reached.wait()
    verdicts = [agent.emit_external_event(instruct(c), config=CONFIG) for c in contents]
    model.release.set()
    return await consumer, verdicts


async def test_an_instruction_is_answered_after_the_final_answer_in_its_own_turn():
    model = Responder(park_first=True)
    finals = Observer()
    agent = await Agent.create(model, extensions=[finals])
    events, verdicts = await run_with_instruction(agent, model, "Also summarise.")
    assert verdicts == [ACCEPTED]
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
    assert [m.content for m in finals.turn_results] == ["re: start", "re: Also summarise."]
    assert finals.successes == [events[-1].message]


async def test_instructions_are_limited_per_request():
    model = Responder(park_first=True)
    agent = await Agent.create(model, max_internal_messages=1)
    _, verdicts = await run_with_instruction(agent, model, "one", "two")
    assert verdicts == [ACCEPTED, []]
    assert len(model.requests) == 2


async def test_a_limit_of_zero_rejects_every_instruction():
    model = Responder(park_first=True)
    agent = await Agent.create(model, max_internal_messages=0)
    events, verdicts = await run_with_instruction(agent, model, "one")
    assert verdicts == [[]]
    assert T.INTERNAL_MESSAGE_STARTED not in [e.type for e in events]


async def test_instructions_outside_a_running_request_are_rejected():
    agent = await Agent.create(Responder(), config=CONFIG)
    assert agent.emit_external_event(instruct("early"), config=CONFIG) == []
    await agent.run("hi", config=CONFIG)
    assert agent.emit_external_event(instruct("late"), config=CONFIG) == []


async def test_a_hook_may_queue_an_instruction_by_publishing_an_event():
    agent = await Agent.create(Responder(), extensions=[Nudge()])
    result = await agent.run("hi", config=CONFIG)
    assert result.content == "re: Be thorough."


async def test_publishing_beyond_the_limit_fails_when_the_extra_one_is_due():
    model = Responder()
    agent = await Agent.create(model, extensions=[Nudge("one", "two")], max_internal_messages=1)
    with pytest.raises(AgentIterationLimitError, match="internal messages"):
        await agent.run("hi", config=CONFIG)
    assert [last_input(r).content for r in model.requests] == ["hi", "one"]


async def test_an_instruction_superseded_by_steering_is_interrupted():
    class SteerDuringInstruction(AgentExtension):
        async def before_turn(self, context):
            if context.state.messages and isinstance(context.state.messages[-1], AgentMessage):
                await context.publish(SteeringMessageEvent(UserMessage(content="never mind")))

    agent = await Agent.create(Responder(), extensions=[Nudge(), SteerDuringInstruction()])
    events = await collect(agent, "hi", config=CONFIG)
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
    assert await races_lost(instruct("racing"), ACCEPTED, T.INTERNAL_MESSAGE_STARTED) == []


@pytest.mark.parametrize("bad", [-1, True, False, 1.0])
def test_a_limit_that_is_not_an_int_of_at_least_zero_is_rejected(bad):
    with pytest.raises(ValueError, match="max_internal_messages"):
        Agent(Responder(), max_internal_messages=bad)


async def test_internal_message_completed_carries_the_answer_to_the_instruction():
    agent = await Agent.create(Responder(), extensions=[Nudge("say bye")])
    events = await collect(agent, "hello", config=CONFIG)
    (completed,) = [e for e in events if e.type is T.INTERNAL_MESSAGE_COMPLETED]
    assert completed.internal_message.content == "say bye"
    assert completed.message.content == "re: say bye"
    assert completed.message is events[-1].message
