"""The ORM persistence extension (agent_app.persistence), driven through a real Agent."""

from __future__ import annotations

import uuid
from contextlib import aclosing

import pytest

from agent_app.models import ChatMessage, ChatSession
from agent_app.persistence import (
    OrmPersistenceExtension,
    load_history,
    message_from_row,
    row_fields,
)
from agent_app.tools import calculate
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.base import AgentExtension
from zett_agent.extensions.tool_guidelines import ToolGuidelinesExtension
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelUsage
from zett_agent.testing import ScriptedModel

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def session_id() -> str:
    return str((await ChatSession.objects.acreate()).pk)


async def agent_for(session_id: str, model, *extensions) -> Agent:
    return await Agent.create(
        model,
        config=AgentRunConfig(session_id=session_id),
        system_prompt="Be brief.",
        tools=[calculate],
        extensions=[OrmPersistenceExtension(), *extensions],
    )


async def stored(session_id: str) -> list[ChatMessage]:
    return [m async for m in ChatMessage.objects.filter(session_id=session_id).order_by("position")]


def conversation(messages) -> list[tuple[str, str]]:
    """(role, text) of the non-system messages a model saw."""
    return [
        (m.role.value, m.content if isinstance(m.content, str) else "<parts>")
        for m in messages
        if not isinstance(m, SystemMessage)
    ]


def calc_call(call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(
        tool_calls=(ToolCall(id=call_id, name="calculate", arguments={"expression": "6*7"}),)
    )


async def test_a_completed_request_stores_its_messages_in_order_with_usage(session_id):
    usage = ModelUsage(input_tokens=11, output_tokens=3)
    model = ScriptedModel([calc_call(), AssistantMessage("It is 42.")], usage=usage)
    agent = await agent_for(session_id, model)
    await agent.run("What is 6*7?", config=AgentRunConfig(session_id, "req-1"))
    rows = await stored(session_id)
    assert [(r.position, r.role) for r in rows] == [
        (0, "user"),
        (1, "assistant"),
        (2, "tool"),
        (3, "assistant"),
    ]
    assert {r.request_id for r in rows} == {"req-1"}
    assert rows[1].tool_calls == [
        {"id": "c1", "name": "calculate", "arguments": {"expression": "6*7"}}
    ]
    assert (rows[2].tool_call_id, rows[2].name, rows[2].success, rows[2].content) == (
        "c1",
        "calculate",
        True,
        "42",
    )
    assert rows[3].usage["input_tokens"] == 11 and rows[3].usage["output_tokens"] == 3
    assert rows[0].usage is None and rows[2].usage is None


async def test_system_messages_are_never_stored(session_id):
    model = ScriptedModel([AssistantMessage("Hi.")])
    agent = await agent_for(session_id, model, ToolGuidelinesExtension())
    await agent.run("Hello", config=AgentRunConfig(session_id))
    assert any(isinstance(m, SystemMessage) for m in model.requests[0].messages)
    assert [r.role for r in await stored(session_id)] == ["user", "assistant"]


async def test_the_next_request_starts_from_the_stored_history(session_id):
    model = ScriptedModel([AssistantMessage("First answer."), AssistantMessage("Second answer.")])
    await (await agent_for(session_id, model)).run("one", config=AgentRunConfig(session_id))
    fresh_agent = await agent_for(session_id, model)  # nothing in memory: all from the DB
    await fresh_agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [
        ("user", "one"),
        ("assistant", "First answer."),
        ("user", "two"),
    ]
    assert [r.position for r in await stored(session_id)] == [0, 1, 2, 3]


async def test_restoring_drops_orphan_results_and_incomplete_tool_batches(session_id):
    history = [
        UserMessage("a"),
        AssistantMessage(
            tool_calls=(
                ToolCall("x1", "calculate", {"expression": "1"}),
                ToolCall("x2", "calculate", {"expression": "2"}),
            )
        ),
        ToolMessage("x1", "calculate", "1"),  # x2 never answered: the batch goes
        UserMessage("b"),
        ToolMessage("ghost", "calculate", "9"),  # no call at all: goes
        AssistantMessage("kept"),
    ]
    await ChatMessage.objects.abulk_create(
        ChatMessage(session_id=session_id, position=i, **row_fields(m))
        for i, m in enumerate(history)
    )
    model = ScriptedModel([AssistantMessage("ok")])
    await (await agent_for(session_id, model)).run("c", config=AgentRunConfig(session_id))
    assert conversation(model.requests[0].messages) == [
        ("user", "a"),
        ("user", "b"),
        ("assistant", "kept"),
        ("user", "c"),
    ]
    # What happened stays on record; the new messages go after it.
    assert [r.position for r in await stored(session_id)] == list(range(8))


class FailBeforeTool(AgentExtension):
    async def before_tool(self, context, call):
        raise RuntimeError("tool runner is down")


async def test_a_failed_request_keeps_the_user_message_but_not_an_unsettled_batch(session_id):
    model = ScriptedModel([calc_call()])
    agent = await agent_for(session_id, model, FailBeforeTool())
    with pytest.raises(RuntimeError, match="tool runner is down"):
        await agent.run("compute", config=AgentRunConfig(session_id))
    assert [(r.role, r.content) for r in await stored(session_id)] == [("user", "compute")]


async def test_a_cancelled_request_keeps_what_was_settled(session_id):
    model = ScriptedModel([calc_call(), AssistantMessage("never streamed")])
    agent = await agent_for(session_id, model)
    seen_tool = False
    async with aclosing(agent.stream("compute", config=AgentRunConfig(session_id))) as events:
        async for event in events:
            seen_tool = seen_tool or event.type is AgentEventType.TOOL_COMPLETED
            if seen_tool and event.type is AgentEventType.MODEL_STARTED:
                break  # closing the stream cancels the request mid-turn
    assert [r.role for r in await stored(session_id)] == ["user", "assistant", "tool"]


async def test_the_title_comes_from_the_first_user_message(session_id):
    model = ScriptedModel([AssistantMessage("a"), AssistantMessage("b")])
    agent = await agent_for(session_id, model)
    long_text = "Plan   a trip " + "very " * 40
    await agent.run(long_text, config=AgentRunConfig(session_id))
    await agent.run("something else", config=AgentRunConfig(session_id))
    session = await ChatSession.objects.aget(pk=session_id)
    assert session.title.startswith("Plan a trip very") and session.title.endswith("…")
    assert len(session.title) == 80


async def test_a_request_for_a_session_without_a_row_creates_the_row():
    session_id = str(uuid.uuid4())
    model = ScriptedModel([AssistantMessage("hi")])
    await (await agent_for(session_id, model)).run("hello", config=AgentRunConfig(session_id))
    assert (await ChatSession.objects.aget(pk=session_id)).title == "hello"


@pytest.mark.parametrize(
    "message",
    [
        UserMessage("plain", attributes={"client": "web"}),
        UserMessage(
            [
                TextContent("look"),
                ImageContent(ImageUrlSource("https://example.com/a.png"), detail="low"),
                ImageContent(ImageBytesSource(b"\x89PNG", "image/png")),
            ]
        ),
        AssistantMessage(
            "answer",
            reasoning="because",
            tool_calls=(ToolCall("t", "calculate", {"expression": "1"}),),
            provider="demo",
            model="zett-demo",
        ),
        ToolMessage("t", "calculate", "boom", success=False),
        AgentMessage("internal instruction"),
    ],
)
async def test_a_row_turns_back_into_exactly_the_message_it_was_saved_from(session_id, message):
    row = await ChatMessage.objects.acreate(
        session_id=session_id, position=0, **row_fields(message)
    )
    fetched = await ChatMessage.objects.aget(pk=row.pk)
    assert message_from_row(fetched) == message


async def test_history_for_the_client_is_the_stored_messages_as_json(session_id):
    model = ScriptedModel([AssistantMessage("pong")])
    await (await agent_for(session_id, model)).run("ping", config=AgentRunConfig(session_id))
    history = await load_history(session_id)
    assert [(m["role"], m["content"]) for m in history] == [("user", "ping"), ("assistant", "pong")]


# --- the rows kept in memory between requests -------------------------------------------


async def test_rows_are_read_once_per_session_and_then_kept_in_memory(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("one", config=AgentRunConfig(session_id))
    # Nothing in the app edits a row in place; doing it here shows the kept copy is used.
    await ChatMessage.objects.filter(session_id=session_id, position=0).aupdate(content="edited")
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [
        ("user", "one"),
        ("assistant", "First."),
        ("user", "two"),
    ]
    assert [r.position for r in await stored(session_id)] == [0, 1, 2, 3]


async def test_rows_another_writer_added_are_read_by_the_next_request(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("one", config=AgentRunConfig(session_id))
    other_process = await agent_for(session_id, ScriptedModel([AssistantMessage("Elsewhere.")]))
    await other_process.run("meanwhile", config=AgentRunConfig(session_id))
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [
        ("user", "one"),
        ("assistant", "First."),
        ("user", "meanwhile"),
        ("assistant", "Elsewhere."),
        ("user", "two"),
    ]
    assert [r.position for r in await stored(session_id)] == list(range(6))


async def test_a_row_deleted_underneath_is_gone_from_the_next_request(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("forget me", config=AgentRunConfig(session_id))
    await ChatMessage.objects.filter(session_id=session_id, role="user").adelete()
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [
        ("assistant", "First."),
        ("user", "two"),
    ]
    assert [r.position for r in await stored(session_id)] == [1, 2, 3]


async def test_a_deleted_session_starts_over_empty_in_a_new_row(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("one", config=AgentRunConfig(session_id))
    await ChatSession.objects.filter(pk=session_id).adelete()
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [("user", "two")]
    assert [(r.position, r.content) for r in await stored(session_id)] == [
        (0, "two"),
        (1, "Second."),
    ]
    assert (await ChatSession.objects.aget(pk=session_id)).title == "two"


async def test_an_existing_title_is_kept(session_id):
    await ChatSession.objects.filter(pk=session_id).aupdate(title="Named by hand")
    agent = await agent_for(session_id, ScriptedModel([AssistantMessage("a")]))
    await agent.run("hello", config=AgentRunConfig(session_id))
    assert (await ChatSession.objects.aget(pk=session_id)).title == "Named by hand"
