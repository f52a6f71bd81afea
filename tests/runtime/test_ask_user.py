"""``AskUserExtension``: the model asks the user a question and waits (SPEC A7)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.ask_user import AskUserEvent, AskUserExtension
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import ToolCall, ToolMessage

from .support import answer, calls, let_other_tasks_run

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s", request_id="r")


class AskingModel:
    """Calls ask_user with the given arguments, then echoes the tool result."""

    def __init__(self, **arguments) -> None:
        self.arguments = arguments
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            events = answer(f"{last.success}|{last.content}")
        else:
            events = calls(ToolCall(id="ask-1", name="ask_user", arguments=self.arguments))
        for event in events:
            yield event


def answer_event(**payload) -> ExternalEvent:
    return ExternalEvent(name="ask_user_response", payload={"tool_call_id": "ask-1", **payload})


async def ask(agent: Agent, reply: ExternalEvent | None):
    """Run one request, replying to the question (if any) when it is asked."""
    events: list[AgentEvent] = []
    accepted: list[list[str]] = []
    async with contextlib.aclosing(agent.stream("help me choose", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM and reply is not None:
                accepted.append(agent.emit_external_event(reply, config=CONFIG))
    return events, accepted


async def test_the_extension_offers_an_ask_user_tool_with_the_documented_parameters():
    model = AskingModel(question="Which colour?")
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    await ask(agent, answer_event(answer="red"))
    (definition,) = [t for t in model.requests[0].tools if t.name == "ask_user"]
    properties = definition.parameters["properties"]
    assert {"question", "options", "allow_multiple"} <= set(properties)
    assert definition.parameters.get("required") == ["question"]


async def test_asking_emits_an_ask_user_event_with_the_documented_payload():
    model = AskingModel(question="Which colour?", options=["red", "blue"])
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events, _ = await ask(agent, answer_event(answer="red"))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert isinstance(event, AskUserEvent)
    assert isinstance(event, AgentEvent)
    assert event.name == "ask_user"
    assert event.session_id == "s"
    assert event.payload == {
        "session_id": "s",
        "tool_call_id": "ask-1",
        "question": "Which colour?",
        "options": ["red", "blue"],
        "allow_multiple": False,
        "response_event": "ask_user_response",
    }
    json.dumps(event.payload)


async def test_the_reply_payload_is_returned_to_the_model():
    model = AskingModel(question="Which colour?", options=["red", "blue"])
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events, accepted = await ask(agent, answer_event(answer="blue"))
    assert accepted == [["AskUserExtension"]]
    result = next(e for e in events if e.type is T.TOOL_COMPLETED).message
    assert result.success is True
    assert json.loads(result.content)["answer"] == "blue"
    assert events[-1].type is T.RUN_COMPLETED


async def test_multiple_choice_questions_say_so_in_the_event():
    model = AskingModel(question="Which toppings?", options=["a", "b", "c"], allow_multiple=True)
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events, _ = await ask(agent, answer_event(answer=["a", "c"]))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert event.payload["allow_multiple"] is True


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"question": "Which?", "options": "red"},
        {"question": "Which?", "allow_multiple": "sometimes"},
        {"question": "Which?", "colour": "red"},
    ],
    ids=["no-question", "options-not-a-list", "allow-multiple-not-bool", "unknown-argument"],
)
async def test_invalid_arguments_fail_the_tool_without_asking(arguments):
    model = AskingModel(**arguments)
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events, accepted = await ask(agent, answer_event(answer="red"))
    assert [e for e in events if e.type is T.CUSTOM] == []
    assert accepted == []
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert failed.message.success is False
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_reply_with_the_wrong_tool_call_id_is_rejected():
    model = AskingModel(question="Which colour?")
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    wrong = ExternalEvent(name="ask_user_response", payload={"tool_call_id": "ask-2"})
    pending: list[list[str]] = []

    async def consume():
        async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    pending.append(agent.emit_external_event(wrong, config=CONFIG))
                    pending.append(
                        agent.emit_external_event(answer_event(answer="red"), config=CONFIG)
                    )
        return event

    final = await consume()
    assert pending == [[], ["AskUserExtension"]]
    assert final.type is T.RUN_COMPLETED


async def test_cancelling_while_the_user_thinks_rejects_the_late_answer():
    asked = asyncio.Event()
    agent = await Agent.create(AskingModel(question="Which?"), extensions=[AskUserExtension()])

    async def consume():
        async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    asked.set()

    task = asyncio.create_task(consume())
    await asked.wait()
    await let_other_tasks_run()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert agent.emit_external_event(answer_event(answer="late"), config=CONFIG) == []
    assert agent.is_conflict("s") is False


async def test_a_question_without_options_says_so_in_the_event():
    model = AskingModel(question="What is your name?")
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events, accepted = await ask(agent, answer_event(answer="Ada"))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert event.payload["options"] is None
    assert event.payload["allow_multiple"] is False
    assert accepted == [["AskUserExtension"]]
