"""``AskUserExtension``: the model asks the user a question and waits (docs/runtime.md, External
events)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.ask_user import AskUserEvent, AskUserExtension
from zett_agent.extensions.external import ExternalEvent
from zett_agent.messages import ToolCall

from .support import CallThenReport, cancel_when

T = AgentEventType
CONFIG = AgentRunConfig(session_id="s", request_id="r")


def asking_model(**arguments) -> CallThenReport:
    """Calls ask_user with ``arguments``, then reports the tool result it got back."""
    return CallThenReport(ToolCall(id="ask-1", name="ask_user", arguments=arguments))


def answer_event(**payload) -> ExternalEvent:
    return ExternalEvent(name="ask_user_response", payload={"tool_call_id": "ask-1", **payload})


async def ask(model: CallThenReport, reply: ExternalEvent):
    """Run one request on an agent with ``AskUserExtension``, replying to the question (if
    any) when it is asked; return the events and the replies' verdicts."""
    agent = await Agent.create(model, extensions=[AskUserExtension()])
    events: list[AgentEvent] = []
    accepted: list[list[str]] = []
    async with contextlib.aclosing(agent.stream("help me choose", config=CONFIG)) as stream:
        async for event in stream:
            events.append(event)
            if event.type is T.CUSTOM:
                accepted.append(agent.emit_external_event(reply, config=CONFIG))
    return events, accepted


async def test_the_extension_offers_an_ask_user_tool_with_the_documented_parameters():
    model = asking_model(question="Which colour?")
    await ask(model, answer_event(answer="red"))
    (definition,) = [t for t in model.requests[0].tools if t.name == "ask_user"]
    properties = definition.parameters["properties"]
    assert {"question", "options", "allow_multiple"} <= set(properties)
    assert definition.parameters.get("required") == ["question"]


async def test_asking_emits_an_ask_user_event_with_the_documented_payload():
    model = asking_model(question="Which colour?", options=["red", "blue"])
    events, _ = await ask(model, answer_event(answer="red"))
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
    model = asking_model(question="Which colour?", options=["red", "blue"])
    events, accepted = await ask(model, answer_event(answer="blue"))
    assert accepted == [["AskUserExtension"]]
    result = next(e for e in events if e.type is T.TOOL_COMPLETED).message
    assert result.success is True
    assert json.loads(result.content)["answer"] == "blue"
    assert events[-1].type is T.RUN_COMPLETED


async def test_multiple_choice_questions_say_so_in_the_event():
    model = asking_model(question="Which toppings?", options=["a", "b", "c"], allow_multiple=True)
    events, _ = await ask(model, answer_event(answer=["a", "c"]))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert event.payload["allow_multiple"] is True


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"question": "   "},
        {"question": ""},
        {"question": "Which?", "options": "red"},
        {"question": "Which?", "allow_multiple": "sometimes"},
        {"question": "Which?", "colour": "red"},
    ],
    ids=[
        "no-question",
        "blank-question",
        "empty-question",
        "options-not-a-list",
        "allow-multiple-not-bool",
        "unknown-argument",
    ],
)
async def test_invalid_arguments_fail_the_tool_without_asking(arguments):
    model = asking_model(**arguments)
    events, accepted = await ask(model, answer_event(answer="red"))
    assert [e for e in events if e.type is T.CUSTOM] == []
    assert accepted == []
    failed = next(e for e in events if e.type is T.TOOL_FAILED)
    assert failed.message.success is False
    assert events[-1].type is T.RUN_COMPLETED


async def test_a_reply_with_the_wrong_tool_call_id_is_rejected():
    agent = await Agent.create(asking_model(question="Which?"), extensions=[AskUserExtension()])
    wrong = ExternalEvent(name="ask_user_response", payload={"tool_call_id": "ask-2"})
    pending: list[list[str]] = []
    async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
        async for event in stream:
            if event.type is T.CUSTOM:
                pending.append(agent.emit_external_event(wrong, config=CONFIG))
                pending.append(agent.emit_external_event(answer_event(answer="red"), config=CONFIG))
    assert pending == [[], ["AskUserExtension"]]
    assert event.type is T.RUN_COMPLETED


async def test_cancelling_while_the_user_thinks_rejects_the_late_answer():
    asked = asyncio.Event()
    agent = await Agent.create(asking_model(question="Which?"), extensions=[AskUserExtension()])

    async def consume():
        async with contextlib.aclosing(agent.stream("q", config=CONFIG)) as stream:
            async for event in stream:
                if event.type is T.CUSTOM:
                    asked.set()

    await cancel_when(asked, consume())
    assert agent.emit_external_event(answer_event(answer="late"), config=CONFIG) == []
    assert agent.is_conflict("s") is False


async def test_a_question_without_options_says_so_in_the_event():
    model = asking_model(question="What is your name?")
    events, accepted = await ask(model, answer_event(answer="Ada"))
    (event,) = [e for e in events if e.type is T.CUSTOM]
    assert event.payload["options"] is None
    assert event.payload["allow_multiple"] is False
    assert accepted == [["AskUserExtension"]]
