"""``InMemoryMessageAccumulator``: per-session history restored into every request."""

from __future__ import annotations

import asyncio

import pytest

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.events import MessageAppendedEvent
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage

from .support import ProbeModel, answer, call, calls, cancel_when, collect, lookup, parked_tool

CONFIG = AgentRunConfig(session_id="s")


def dialogue(messages) -> list[tuple[str, str]]:
    """The non-system messages of a request as (role, text) pairs."""
    return [
        (m.role.value, m.content if isinstance(m.content, str) else "<parts>")
        for m in messages
        if not isinstance(m, SystemMessage)
    ]


async def two_requests(model, *extensions, first="first", second="second", **options) -> None:
    """Send ``first``, then ``second``, to session ``s`` of an agent that remembers history
    with ``InMemoryMessageAccumulator`` (followed by ``extensions``)."""
    agent = await Agent.create(
        model, extensions=[InMemoryMessageAccumulator(), *extensions], **options
    )
    await agent.run(first, config=CONFIG)
    await agent.run(second, config=CONFIG)


async def test_a_session_remembers_its_previous_turns():
    model = ProbeModel(answer("Hi Ada."), answer("You are Ada."))
    await two_requests(model, first="I am Ada.", second="Who am I?")
    assert dialogue(model.requests[1].messages) == [
        ("user", "I am Ada."),
        ("assistant", "Hi Ada."),
        ("user", "Who am I?"),
    ]


async def test_sessions_do_not_share_history():
    model = ProbeModel(answer("one"), answer("two"))
    agent = await Agent.create(model, extensions=[InMemoryMessageAccumulator()])
    await agent.run("first", config=AgentRunConfig(session_id="a"))
    await agent.run("second", config=AgentRunConfig(session_id="b"))
    assert dialogue(model.requests[1].messages) == [("user", "second")]


async def test_system_messages_are_rebuilt_not_restored():
    model = ProbeModel(answer("one"), answer("two"))
    await two_requests(model, system_prompt="Be brief.")
    system = [m for m in model.requests[1].messages if isinstance(m, SystemMessage)]
    assert [m.content for m in system] == ["Be brief."]
    assert isinstance(model.requests[1].messages[0], SystemMessage)


async def test_tool_calls_and_results_are_restored_in_order():
    model = ProbeModel(calls(call("lookup", "c1", key="k")), answer("found"), answer("again"))
    await two_requests(model, first="look it up", second="thanks", tools=[lookup])
    restored = [m for m in model.requests[2].messages if not isinstance(m, SystemMessage)]
    assert [type(m) for m in restored] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
        UserMessage,
    ]
    assert restored[1].tool_calls[0].id == restored[2].tool_call_id == "c1"


async def test_messages_that_opt_out_of_history_are_not_restored():
    class Annotate(AgentExtension):
        async def before_run(self, context):
            if context.input_message.content == "first":
                context.add_message(UserMessage(content="ephemeral", include_in_messages=False))

    model = ProbeModel(answer("one"), answer("two"))
    await two_requests(model, Annotate())
    assert ("user", "ephemeral") in dialogue(model.requests[0].messages)
    assert ("user", "ephemeral") not in dialogue(model.requests[1].messages)
    assert ("user", "first") in dialogue(model.requests[1].messages)


async def test_restored_history_is_not_published_again():
    appended: list[list[str]] = []

    class Count(AgentExtension):
        async def on_tool(self, context):
            appended.append([])

        async def on_event(self, context, event):
            if isinstance(event, MessageAppendedEvent) and not isinstance(
                event.message, SystemMessage
            ):
                appended[-1].append(event.message.role.value)

    model = ProbeModel(answer("one"), answer("two"))
    await two_requests(model, Count())
    assert appended == [["user", "assistant"], ["user", "assistant"]]


async def test_a_cancelled_tool_call_is_remembered_with_its_cancellation_result():
    started = asyncio.Event()
    model = ProbeModel(calls(call("slow", "c1")), answer("after the cancel"))
    agent = await Agent.create(
        model, tools=[parked_tool(started)], extensions=[InMemoryMessageAccumulator()]
    )
    await cancel_when(started, collect(agent, "start", config=CONFIG))
    await agent.run("go on", config=CONFIG)
    assert dialogue(model.requests[1].messages) == [
        ("user", "start"),
        ("assistant", ""),
        ("tool", "Request cancelled before tool completion"),
        ("user", "go on"),
    ]


async def test_the_agent_state_holds_the_whole_conversation_after_a_request():
    agent = await Agent.create(
        ProbeModel(answer("hello")), extensions=[InMemoryMessageAccumulator()]
    )
    await agent.run("hi", config=CONFIG)
    assert dialogue(agent.get_state("s").messages) == [("user", "hi"), ("assistant", "hello")]


def unanswered_tool_calls(messages) -> list[str]:
    """Ids of tool calls that no ToolMessage answers; providers reject such histories."""
    requested = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [call_id for call_id in requested if call_id not in answered]


async def test_a_request_that_failed_mid_batch_leaves_no_unanswered_call_in_the_history():
    class FailSecond(AgentExtension):
        async def before_tool(self, context, call):
            if call.id == "c2":
                raise RuntimeError("hook failed")

    batch = calls(call("lookup", "c1", key="a"), call("lookup", "c2", key="b"))
    model = ProbeModel(batch, answer("fresh"))
    agent = await Agent.create(
        model, tools=[lookup], extensions=[InMemoryMessageAccumulator(), FailSecond()]
    )
    with pytest.raises(RuntimeError, match="hook failed"):
        await agent.run("start", config=CONFIG)
    await agent.run("again", config=CONFIG)
    assert unanswered_tool_calls(model.requests[1].messages) == []
    assert model.requests[1].messages[-1] == UserMessage(content="again")


async def test_a_request_that_failed_in_the_model_after_a_tool_keeps_a_valid_history():
    async def broken(request):
        raise ConnectionError("gone")
        yield  # pragma: no cover

    model = ProbeModel(calls(call("lookup", "c1", key="a")), broken, answer("fresh"))
    agent = await Agent.create(model, tools=[lookup], extensions=[InMemoryMessageAccumulator()])
    with pytest.raises(ConnectionError):
        await agent.run("start", config=CONFIG)
    await agent.run("again", config=CONFIG)
    assert unanswered_tool_calls(model.requests[2].messages) == []


async def test_a_loaded_history_is_restored_and_truncating_forgets_the_newer_turns():
    memory = InMemoryMessageAccumulator()
    memory.load("s", [UserMessage("I am Ada."), AssistantMessage("Hi Ada.")])
    model = ProbeModel(answer("You are Ada."), answer("again"))
    agent = await Agent.create(model, extensions=[memory])
    await agent.run("Who am I?", config=CONFIG)
    assert dialogue(model.requests[0].messages)[:2] == [
        ("user", "I am Ada."),
        ("assistant", "Hi Ada."),
    ]
    assert len(memory.messages("s")) == 4
    memory.truncate("s", 2)
    await agent.run("Again?", config=CONFIG)
    assert dialogue(model.requests[1].messages) == [
        ("user", "I am Ada."),
        ("assistant", "Hi Ada."),
        ("user", "Again?"),
    ]
    with pytest.raises(ValueError, match="length"):
        memory.truncate("s", -1)
