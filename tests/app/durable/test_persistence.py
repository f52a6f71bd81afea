"""The ORM persistence extension (agent_app.durable.persistence), driven through a real Agent.

Rows are written ahead: each message when the runtime appends it, so these tests look at
the database while a request is still going, and cancel requests at every point where they
can be cancelled.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from agent_app.durable.persistence import OrmPersistenceExtension, RunSeams, shielded
from agent_app.durable.store import bump_version, message_from_row, restore_history, row_fields
from agent_app.models import ChatMessage, ChatSession
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
from zett_site.tools import calculate

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


async def test_a_failed_request_keeps_what_settled_and_the_next_skips_the_open_batch(session_id):
    model = ScriptedModel([calc_call(), AssistantMessage("fine")])
    agent = await agent_for(session_id, model, FailBeforeTool())
    with pytest.raises(RuntimeError, match="tool runner is down"):
        await agent.run("compute", config=AgentRunConfig(session_id))
    assert [r.role for r in await stored(session_id)] == ["user", "assistant"]
    await (await agent_for(session_id, model)).run("again", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [("user", "compute"), ("user", "again")]


class FailAfterModel(AgentExtension):
    priority = 5  # before the persistence extension's own ``after_model``

    async def after_model(self, context, response):
        raise RuntimeError("reviewer is down")


async def test_an_answer_whose_after_model_fails_first_is_still_stored(session_id):
    """The answer waits for ``after_model`` to be written with its usage; when another
    extension's ``after_model`` fails before it, the request's end writes it."""
    model = ScriptedModel([AssistantMessage("Kept anyway.")])
    agent = await agent_for(session_id, model, FailAfterModel())
    with pytest.raises(RuntimeError, match="reviewer is down"):
        await agent.run("hello", config=AgentRunConfig(session_id))
    rows = await stored(session_id)
    assert [(r.role, r.content, r.usage) for r in rows] == [
        ("user", "hello", None),
        ("assistant", "Kept anyway.", None),
    ]


class AddsAnAnswer(AgentExtension):
    async def on_message(self, context):
        context.add_message(AssistantMessage("Noted by an extension."))


async def test_an_answer_no_model_gave_is_written_when_it_is_appended(session_id):
    model = ScriptedModel([AssistantMessage("From the model.")])
    agent = await agent_for(session_id, model, AddsAnAnswer())
    await agent.run("hello", config=AgentRunConfig(session_id))
    rows = await stored(session_id)
    assert [(r.role, r.content, r.usage is None) for r in rows] == [
        ("assistant", "Noted by an extension.", True),  # added before the input is appended
        ("user", "hello", True),
        ("assistant", "From the model.", False),
    ]


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


async def test_a_cancelled_answer_keeps_its_streamed_text_as_a_partial_answer(session_id):
    model = ScriptedModel([AssistantMessage("one two three four")])
    agent = await agent_for(session_id, model)
    shown = ""
    async with aclosing(agent.stream("count", config=AgentRunConfig(session_id))) as events:
        async for event in events:
            if event.type is AgentEventType.TEXT_DELTA:
                shown += event.delta
                if shown.count(" ") == 2:
                    break
    rows = await stored(session_id)
    assert [(r.role, r.content, r.partial) for r in rows] == [
        ("user", "count", False),
        ("assistant", shown, True),
    ]
    later = ScriptedModel([AssistantMessage("five")])
    await (await agent_for(session_id, later)).run("go on", config=AgentRunConfig(session_id))
    assert conversation(later.requests[0].messages)[1] == ("assistant", shown)


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


async def test_a_row_saved_through_the_orm_is_read_by_the_next_request(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("one", config=AgentRunConfig(session_id))
    # An import script or a test seeding history: a plain ORM save, past agent_app.durable.store.
    await ChatMessage.objects.acreate(
        session_id=session_id, position=2, **row_fields(UserMessage("imported"))
    )
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [
        ("user", "one"),
        ("assistant", "First."),
        ("user", "imported"),
        ("user", "two"),
    ]
    assert [r.position for r in await stored(session_id)] == [0, 1, 2, 3, 4]


async def test_rows_superseded_under_a_new_version_are_gone_from_the_next_request(session_id):
    model = ScriptedModel([AssistantMessage("First."), AssistantMessage("Second.")])
    agent = await agent_for(session_id, model)
    await agent.run("forget me", config=AgentRunConfig(session_id))

    def supersede_first_turn():
        from django.db import transaction
        from django.utils import timezone

        with transaction.atomic():
            bump_version(session_id, timezone.now())
            ChatMessage.objects.filter(session_id=session_id).update(superseded=True)

    from asgiref.sync import sync_to_async

    await sync_to_async(supersede_first_turn)()
    await agent.run("two", config=AgentRunConfig(session_id))
    assert conversation(model.requests[1].messages) == [("user", "two")]
    # The hidden turn keeps its rows; the shown path starts again at position 0.
    rows = sorted(await stored(session_id), key=lambda row: row.pk)
    assert [(r.position, r.superseded) for r in rows] == [
        (0, True),
        (1, True),
        (0, False),
        (1, False),
    ]


async def test_writing_to_a_session_whose_row_is_gone_fails_the_request(session_id):
    agent = await agent_for(session_id, ScriptedModel([AssistantMessage("First.")]))
    await ChatSession.objects.filter(pk=session_id).adelete()
    with pytest.raises(ChatSession.DoesNotExist):
        await agent.run("two", config=AgentRunConfig(session_id))


# --- write-ahead ------------------------------------------------------------------------


async def test_each_message_is_stored_when_it_is_appended_not_at_the_end(session_id):
    seen: list[list[str]] = []

    async def look(request):
        seen.append([r.role async for r in ChatMessage.objects.filter(session_id=session_id)])
        return calc_call() if len(seen) == 1 else AssistantMessage("42.")

    class Peek:
        def __init__(self):
            self.requests = []

        async def stream(self, request):
            self.requests.append(request)
            answer = await look(request)
            async for event in ScriptedModel([answer]).stream(request):
                yield event

    agent = await agent_for(session_id, Peek())
    await agent.run("6*7?", config=AgentRunConfig(session_id))
    # The user's message is stored before the model is first called; the answer with its
    # tool call and the tool's result before it is called again.
    assert seen == [["user"], ["user", "assistant", "tool"]]


class CancelWhenAppended(AgentExtension):
    """Cancels the request's own task when the ``nth`` message is appended.

    It runs before the persistence extension (lower priority), so the cancellation is
    pending when the persistence write starts: the write must still finish.
    """

    priority = 5

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.count = 0

    async def on_event(self, context, event):
        from zett_agent.extensions.events import MessageAppendedEvent

        if isinstance(event, MessageAppendedEvent):
            self.count += 1
            if self.count == self.nth:
                asyncio.current_task().cancel()


@pytest.mark.parametrize("nth", [1, 2, 3, 4])
async def test_a_cancellation_that_lands_during_a_write_never_drops_it(session_id, nth):
    model = ScriptedModel([calc_call(), AssistantMessage("It is 42.")])
    agent = await agent_for(session_id, model, CancelWhenAppended(nth))
    config = AgentRunConfig(session_id)
    with pytest.raises(asyncio.CancelledError):
        await agent.run("6*7?", config=config)
    appended = [m for m in agent.get_state(session_id).messages if not isinstance(m, SystemMessage)]
    rows = await stored(session_id)
    assert [message_from_row(row) for row in rows] == appended
    assert rows[0].content == "6*7?"


@pytest.mark.parametrize("stop_after", range(12))
async def test_a_request_cancelled_at_any_event_stores_every_message_it_appended(
    session_id, stop_after
):
    model = ScriptedModel([calc_call(), AssistantMessage("It is forty-two.")])
    agent = await agent_for(session_id, model)
    seen = 0
    async with aclosing(agent.stream("6*7?", config=AgentRunConfig(session_id))) as events:
        async for _ in events:
            seen += 1
            if seen > stop_after:
                break
    state = agent.get_state(session_id)
    appended = [m for m in state.messages if not isinstance(m, SystemMessage)]
    rows = [row for row in await stored(session_id) if not row.partial]
    assert [message_from_row(row) for row in rows] == appended
    assert appended[0] == UserMessage("6*7?")


async def test_shielded_finishes_the_awaited_work_before_the_cancellation_goes_on():
    started, release = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def write():
        started.set()
        await release.wait()
        done.append("written")

    task = asyncio.create_task(shielded(write()))
    await started.wait()
    task.cancel()
    task.cancel()  # twice: still finished first
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["written"]


async def test_shielded_returns_or_raises_what_the_work_does_and_logs_a_failure_it_outlived(
    caplog,
):
    async def answer():
        return 42

    async def fail():
        raise ValueError("disk full")

    assert await shielded(answer()) == 42
    with pytest.raises(ValueError, match="disk full"):
        await shielded(fail())

    started, release = asyncio.Event(), asyncio.Event()

    async def fail_later():
        started.set()
        await release.wait()
        raise ValueError("disk full")

    task = asyncio.create_task(shielded(fail_later()))
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "A write failed while its request was cancelled" in caplog.text


async def test_shielded_work_cancelled_itself_is_a_cancellation():
    started = asyncio.Event()

    async def stuck():
        started.set()
        await asyncio.Event().wait()

    inner = asyncio.ensure_future(stuck())
    outer = asyncio.create_task(shielded(inner))
    await started.wait()
    inner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer


async def test_restoring_keeps_an_open_batch_only_for_a_resume(session_id):
    await ChatMessage.objects.abulk_create(
        ChatMessage(session_id=session_id, position=i, **row_fields(m))
        for i, m in enumerate([UserMessage("a"), calc_call("open")])
    )
    from asgiref.sync import sync_to_async

    plain = await sync_to_async(restore_history)(session_id)
    resumable = await sync_to_async(restore_history)(session_id, keep_open_tail=True)
    assert plain == [UserMessage("a")]
    assert resumable == [UserMessage("a"), calc_call("open")]


async def test_a_request_reads_and_checks_only_what_is_new_whatever_the_chat_length(
    monkeypatch,
):
    """Flat turns: after the first request, no request reads every row or checks every
    message again; what it reads and validates does not grow with the chat."""
    from agent_app.durable import store

    reads: list[str] = []
    validated: list[int] = []
    real_read, real_valid = store.read_messages, store.valid_history

    def counting_read(session_id):
        reads.append(session_id)
        return real_read(session_id)

    def counting_valid(messages, **kwargs):
        messages = list(messages)
        validated.append(len(messages))
        return real_valid(messages, **kwargs)

    monkeypatch.setattr(store, "read_messages", counting_read)
    monkeypatch.setattr(store, "valid_history", counting_valid)
    work = []
    for length in (10, 1000):
        session_id = str((await ChatSession.objects.acreate()).pk)
        await ChatMessage.objects.abulk_create(
            ChatMessage(
                session_id=session_id,
                position=i,
                **row_fields(UserMessage(f"q{i}") if i % 2 == 0 else AssistantMessage(f"a{i}")),
            )
            for i in range(length)
        )
        agent = await agent_for(session_id, ScriptedModel([AssistantMessage("x")] * 2))
        await agent.run("warm up", config=AgentRunConfig(session_id))  # reads the rows once
        assert reads == [session_id]
        reads.clear()
        validated.clear()
        await agent.run("next", config=AgentRunConfig(session_id))
        assert reads == []
        work.append(sum(validated))
    assert work[0] == work[1] < 10


async def test_a_final_answer_goes_to_a_caller_that_stores_it_with_the_run_end(session_id):
    """``RunSeams.at_end``: the tool-calling answer and the tool's result are written at
    once; the final answer is handed over, with its usage, and not written here."""
    at_end: list = []
    model = ScriptedModel([calc_call(), AssistantMessage("It is 42.")])
    agent = await agent_for(session_id, model)
    await agent.run(
        "6*7?", config=AgentRunConfig(session_id), metadata=RunSeams(at_end=at_end).metadata()
    )
    assert [r.role for r in await stored(session_id)] == ["user", "assistant", "tool"]
    ((answer, meta),) = at_end
    assert answer == AssistantMessage("It is 42.")
    assert meta.usage is not None and not meta.partial


class FailAfterTurn(AgentExtension):
    async def after_turn(self, context, message):
        if not message.tool_calls:
            raise RuntimeError("auditor is down")


async def test_a_request_that_fails_after_its_final_answer_writes_the_handed_over_answer(
    session_id,
):
    at_end: list = []
    agent = await agent_for(session_id, ScriptedModel([AssistantMessage("Done.")]), FailAfterTurn())
    with pytest.raises(RuntimeError, match="auditor is down"):
        await agent.run(
            "Go", config=AgentRunConfig(session_id), metadata=RunSeams(at_end=at_end).metadata()
        )
    assert at_end == []  # taken back and written: nobody is left to store it with an end
    assert [(r.role, r.content) for r in await stored(session_id)] == [
        ("user", "Go"),
        ("assistant", "Done."),
    ]
