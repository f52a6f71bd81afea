"""``ScriptedModel``, the library's deterministic model for tests (zett_agent/testing.py)."""

from __future__ import annotations

import contextlib

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.model import AgentModel, ModelEvent, ModelEventType, ModelRequest, ModelResponse
from zett_agent.testing import ScriptedModel

from .support import collect, lookup

T = AgentEventType


async def stream_of(model: ScriptedModel, request: ModelRequest | None = None) -> list[ModelEvent]:
    request = request or ModelRequest(messages=(UserMessage(content="hi"),))
    async with contextlib.aclosing(model.stream(request)) as events:
        return [event async for event in events]


def test_a_scripted_model_is_an_agent_model():
    assert isinstance(ScriptedModel([]), AgentModel)


async def test_an_assistant_message_is_streamed_word_by_word_then_completed():
    model = ScriptedModel([AssistantMessage(content="Hello there, friend.")])
    events = await stream_of(model)
    deltas = [e for e in events if e.type is ModelEventType.TEXT]
    assert len(deltas) == 3
    assert "".join(e.delta for e in deltas) == "Hello there, friend."
    assert events[-1].type is ModelEventType.COMPLETED
    assert events[-1].response.message.content == "Hello there, friend."
    assert [e.type for e in events].count(ModelEventType.COMPLETED) == 1


async def test_reasoning_is_streamed_before_the_content():
    model = ScriptedModel([AssistantMessage(content="Four.", reasoning="Two plus two.")])
    events = await stream_of(model)
    kinds = [e.type for e in events]
    assert kinds.index(ModelEventType.REASONING) < kinds.index(ModelEventType.TEXT)
    reasoning = "".join(e.delta for e in events if e.type is ModelEventType.REASONING)
    assert reasoning == "Two plus two."
    assert events[-1].response.message.reasoning == "Two plus two."


async def test_a_message_with_tool_calls_completes_with_those_calls():
    calls = (ToolCall(id="c1", name="lookup", arguments={"key": "k"}),)
    model = ScriptedModel([AssistantMessage(tool_calls=calls)])
    events = await stream_of(model)
    assert events[-1].response.message.tool_calls == calls


async def test_a_list_of_model_events_is_replayed_as_is():
    turn = [
        ModelEvent.text("raw"),
        ModelEvent.completed(ModelResponse(AssistantMessage(content="raw"))),
    ]
    model = ScriptedModel([turn])
    assert await stream_of(model) == turn


async def test_a_callable_turn_answers_from_the_request():
    model = ScriptedModel(
        [lambda request: AssistantMessage(content=f"you said {request.messages[-1].content}")]
    )
    events = await stream_of(model, ModelRequest(messages=(UserMessage(content="ping"),)))
    assert events[-1].response.message.content == "you said ping"


async def test_a_callable_turn_may_return_model_events():
    model = ScriptedModel(
        [lambda request: [ModelEvent.completed(ModelResponse(AssistantMessage(content="ev")))]]
    )
    events = await stream_of(model)
    assert [e.type for e in events] == [ModelEventType.COMPLETED]


async def test_every_request_is_recorded():
    model = ScriptedModel([AssistantMessage(content="a"), AssistantMessage(content="b")])
    first = ModelRequest(messages=(UserMessage(content="1"),))
    second = ModelRequest(messages=(UserMessage(content="2"),))
    await stream_of(model, first)
    await stream_of(model, second)
    assert model.requests == [first, second]


async def test_running_out_of_turns_is_a_clear_error():
    model = ScriptedModel([AssistantMessage(content="only one")])
    await stream_of(model)
    with pytest.raises(RuntimeError, match="turn"):
        await stream_of(model)


async def test_it_drives_an_agent_through_a_tool_call_and_an_answer():
    model = ScriptedModel(
        [
            AssistantMessage(
                tool_calls=(ToolCall(id="c1", name="lookup", arguments={"key": "k"}),)
            ),
            lambda request: AssistantMessage(
                content=f"The answer is {request.messages[-1].content}."
            ),
        ]
    )
    agent = await Agent.create(model, tools=[lookup], extensions=[])
    events = await collect(agent, "What is k?", config=AgentRunConfig(session_id="s"))
    assert events[-1].type is T.RUN_COMPLETED
    assert events[-1].message.content == "The answer is value of k."
    assert isinstance(model.requests[1].messages[-1], ToolMessage)
    text = "".join(e.delta for e in events if e.type is T.TEXT_DELTA)
    assert text == "The answer is value of k."


async def test_running_out_of_turns_inside_an_agent_fails_the_request():
    agent = await Agent.create(ScriptedModel([]), extensions=[])
    with pytest.raises(RuntimeError, match="turn"):
        await agent.run("hi", config=AgentRunConfig(session_id="s"))
