"""A delegate cut off while it works (streams, or runs a tool) goes on after the crash.

The chat's ``ask_<id>`` call is safe to run again: the continuation of the chat's run runs
it again, and it goes on with the same sub-run from the sub-run's stored conversation (its
checkpoint), never from the start. Inside the sub-run the top run's rules hold: a call of
a tool that must not run twice and had started is not run again; an ``atomic`` tool's
writes and result commit together, so it runs again exactly when nothing was committed.

Each test but the last leaves the rows a worker killed at that point leaves, then opens
the chat; the last hands a live run over while its delegate streams (what a worker does
at the end of a deploy's grace period) and lets the sweep continue it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from agent_app.assistants import Assistant, register, registry
from agent_app.durable.continuation import STARTED_TOOL_CONTENT
from agent_app.durable.store import RowMeta, append_rows
from agent_app.durable.waits import digest_of, record_wait
from agent_app.models import (
    ChatMessage,
    ChatRun,
    ChatSession,
    ReplyWait,
    RunStatus,
    SubRun,
    SubRunStatus,
    WaitStatus,
)
from agent_app.sessions.background import sweep
from agent_app.sessions.registry import live_sessions
from tests.app.conftest import answer_of, events_of, new_browser
from tests.app.llm_doubles import GatedModel, call_tool, completed, say
from zett_agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.model import ModelEvent, ModelResponse
from zett_agent.serialization import message_to_dict
from zett_agent.testing import ScriptedModel
from zett_agent.tools import tool

pytestmark = pytest.mark.django_db(transaction=True)

LETTERS: list[str] = []


@tool(atomic=True)
def file_claim(number: int) -> str:
    """File a claim.

    Guidelines:
        Once per claim.
    """
    Group.objects.create(name=f"claim {number}")
    return f"claim {number} filed"


@tool
def send_letter(to: str) -> str:
    """Send a letter.

    Guidelines:
        Only when asked.
    """
    LETTERS.append(to)
    return f"letter to {to} sent"


class Desk(Assistant):
    id = "desk"
    name = "Desk"
    instructions = "You are the desk."
    delegates = ["clerk"]


class Clerk(Assistant):
    id = "clerk"
    name = "Clerk"
    instructions = "You are the clerk."
    tools = [file_claim, send_letter]
    approval_required = {"send_letter"}


class DeskModel:
    """Asks the clerk for a new request; answers ``Desk: <the clerk's answer>``."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def stream(self, request):
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            answer = say(f"Desk: {last.content}")
        else:
            answer = call_tool("ask_clerk", "p-1", request="File claim 7")
        async for event in ScriptedModel([answer]).stream(request):
            yield event


@pytest.fixture
def desk():
    """Register Desk and Clerk; ``desk(model)`` gives the clerk its model."""
    LETTERS.clear()
    register(Desk)
    register(Clerk)

    def script(model: Any) -> Any:
        registry.get("clerk").model = model
        return model

    yield script
    registry.unregister("desk")
    registry.unregister("clerk")


@sync_to_async
def leave_a_delegate_working(
    browser_key: str, sub_messages: list, *, started_call: str = ""
) -> tuple[str, str]:
    """The rows of a chat whose worker died while its clerk sub-run worked on
    ``sub_messages`` (and, with ``started_call``, had started that call)."""
    session = ChatSession.objects.create(title="Claim", browser_key=browser_key, assistant="desk")
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(request_id=request_id, session=session, worker="dead:1:boot")
    ask = ToolCall("p-1", "ask_clerk", {"request": "File claim 7"})
    append_rows(
        str(session.pk),
        request_id,
        [(UserMessage("Claim 7"), RowMeta()), (AssistantMessage(tool_calls=(ask,)), RowMeta())],
    )
    SubRun.objects.create(
        session=session,
        parent_tool_call_id="p-1",
        root_tool_call_id="p-1",
        assistant="clerk",
        request_id=request_id,
        messages=[message_to_dict(m) for m in [UserMessage("File claim 7"), *sub_messages]],
        started_call=started_call,
    )
    return str(session.pk), request_id


async def continue_on_join(sockets, session_id: str, cookie: str) -> tuple[dict, list[dict]]:
    """Open the chat (the join continues the run); ``run_continued`` and the frames after."""
    socket = await sockets(session_id, cookie=cookie)
    continued = await socket.expect("run_continued")
    frames = await socket.run_to_completion()
    return continued, frames


def assert_one_clean_run(continued: dict, frames: list[dict], request_id: str) -> None:
    assert continued["request_id"] == request_id
    assert not any(f["type"] in ("run_interrupted", "run_failed") for f in frames)
    seqs = [continued["seq"]] + [f["seq"] for f in frames if "seq" in f]
    assert seqs == sorted(set(seqs))


@sync_to_async
def chat_tool_results(session_id: str) -> list[str]:
    return list(
        ChatMessage.objects.filter(session_id=session_id, role="tool")
        .order_by("position")
        .values_list("tool_call_id", flat=True)
    )


def claims() -> int:
    return Group.objects.filter(name__startswith="claim ").count()


async def test_a_delegate_cut_off_while_it_streams_goes_on_from_its_checkpoint(
    sockets, use_model, desk
):
    front = use_model(DeskModel())
    clerk = desk(ScriptedModel([say("Claim 7 is filed.")]))
    cookie, key = await new_browser()
    await sync_to_async(Group.objects.create)(name="claim 7")  # committed with its result
    filed = (
        AssistantMessage(tool_calls=(ToolCall("c-1", "file_claim", {"number": 7}),)),
        ToolMessage("c-1", "file_claim", "claim 7 filed"),
    )
    session_id, request_id = await leave_a_delegate_working(key, list(filed))
    continued, frames = await continue_on_join(sockets, session_id, cookie)
    assert_one_clean_run(continued, frames, request_id)
    assert answer_of(frames) == "Desk: Claim 7 is filed."
    # The clerk went on from its stored conversation: one model call, after the result.
    (request,) = clerk.requests
    assert request.messages[-1].content == "claim 7 filed"
    assert front.requests[-1].messages[-1].content == "Claim 7 is filed."
    nested = [e for e in events_of(frames) if e.get("agent") == "clerk"]
    assert {e["parent_tool_call_id"] for e in nested} == {"p-1"}
    # The call starts again and ends once; the clerk's work comes between.
    own = [e for e in events_of(frames) if "agent" not in e and e["type"].startswith("tool_")]
    assert [(e["type"], e["tool_calls"][0]["id"]) for e in own] == [
        ("tool_started", "p-1"),
        ("tool_completed", "p-1"),
    ]
    assert await sync_to_async(claims)() == 1
    assert await chat_tool_results(session_id) == ["p-1"]  # one result for the call
    sub = await SubRun.objects.aget(session_id=session_id)
    assert (sub.status, sub.answer) == (SubRunStatus.COMPLETED, "Claim 7 is filed.")
    run = await ChatRun.objects.aget(request_id=request_id)
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)


async def test_a_delegates_atomic_tool_without_a_result_wrote_nothing_and_runs_once(
    sockets, use_model, desk
):
    use_model(DeskModel())
    desk(ScriptedModel([say("Filed.")]))
    cookie, key = await new_browser()
    call = AssistantMessage(tool_calls=(ToolCall("c-1", "file_claim", {"number": 7}),))
    session_id, request_id = await leave_a_delegate_working(key, [call])
    continued, frames = await continue_on_join(sockets, session_id, cookie)
    assert_one_clean_run(continued, frames, request_id)
    assert answer_of(frames) == "Desk: Filed."
    assert await sync_to_async(claims)() == 1
    sub = await SubRun.objects.aget(session_id=session_id)
    assert [m["role"] for m in sub.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_delegates_atomic_tool_stores_its_result_with_its_writes(sockets, use_model, desk):
    use_model(DeskModel())
    desk(ScriptedModel([call_tool("file_claim", "c-1", number=7), say("Filed.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Claim 7", "assistant": "desk"})
    frames = await socket.run_to_completion()
    assert answer_of(frames) == "Desk: Filed."
    sub = await SubRun.objects.aget(session_id=socket.session_id)
    results = [m for m in sub.messages if m["role"] == "tool"]
    assert len(results) == 1 and "claim 7 filed" in str(results[0])
    assert sub.started_call == ""  # atomic: nothing to record before it runs


@sync_to_async
def approve_and_start(session_id: str, request_id: str) -> None:
    """The clerk's ``send_letter`` call, approved: its wait says ``executing``."""
    payload = {
        "tool_call_id": "c-2",
        "tool": "send_letter",
        "arguments": {"to": "Ann"},
        "question": "Allow send_letter to run with these arguments?",
        "response_event": "approval_response",
        "digest": digest_of("send_letter", {"to": "Ann"}),
        "agent": "clerk",
        "parent_tool_call_id": "p-1",
    }
    record_wait(session_id, request_id, "approval_requested", payload)
    ReplyWait.objects.filter(session_id=session_id, tool_call_id="c-2").update(
        status=WaitStatus.EXECUTING,
        reply={"tool_call_id": "c-2", "approved": True, "digest": payload["digest"]},
    )


@pytest.mark.parametrize("had_started", [True, False])
async def test_a_delegates_approved_call_runs_at_most_once(sockets, use_model, desk, had_started):
    use_model(DeskModel())
    clerk = desk(ScriptedModel([say("Done with the letter.")]))
    cookie, key = await new_browser()
    letter = AssistantMessage(tool_calls=(ToolCall("c-2", "send_letter", {"to": "Ann"}),))
    session_id, request_id = await leave_a_delegate_working(
        key, [letter], started_call="c-2" if had_started else ""
    )
    await approve_and_start(session_id, request_id)
    continued, frames = await continue_on_join(sockets, session_id, cookie)
    assert_one_clean_run(continued, frames, request_id)
    assert answer_of(frames) == "Desk: Done with the letter."
    result = clerk.requests[0].messages[-1]
    if had_started:  # its body had begun: it may have run, so never again
        assert (result.content, result.success) == (STARTED_TOOL_CONTENT, False)
        assert LETTERS == []
    else:  # approved, but it never began: the approval stands and it runs once
        assert result.content == "letter to Ann sent"
        assert LETTERS == ["Ann"]
    wait = await ReplyWait.objects.aget(session_id=session_id, tool_call_id="c-2")
    assert wait.status == WaitStatus.DONE


async def test_a_delegate_that_had_answered_is_not_asked_again(sockets, use_model, desk):
    use_model(DeskModel())
    clerk = desk(ScriptedModel())
    cookie, key = await new_browser()
    session_id, request_id = await leave_a_delegate_working(key, [say("Claim 7 is filed.")])
    continued, frames = await continue_on_join(sockets, session_id, cookie)
    assert_one_clean_run(continued, frames, request_id)
    assert answer_of(frames) == "Desk: Claim 7 is filed."
    assert clerk.requests == []


async def test_not_continued_a_working_delegates_call_may_or_may_not_have_completed(
    sockets, use_model, desk, settings
):
    settings.ZETT_RUN_ATTEMPTS = 1
    use_model(DeskModel())
    desk(ScriptedModel())
    cookie, key = await new_browser()
    call = AssistantMessage(tool_calls=(ToolCall("c-1", "file_claim", {"number": 7}),))
    session_id, _ = await leave_a_delegate_working(key, [call])
    socket = await sockets(session_id, cookie=cookie)
    assert [run["status"] for run in socket.session_frame["runs"]] == ["interrupted"]
    (closed,) = [m for m in socket.session_frame["history"] if m["role"] == "tool"]
    assert (closed["tool_call_id"], closed["content"]) == ("p-1", STARTED_TOOL_CONTENT)


async def test_a_run_handed_over_while_its_delegate_streams_completes_once(
    sockets, use_model, desk
):
    use_model(DeskModel())
    parked = asyncio.Event()  # never set: the clerk's first answer stops half-way
    clerk = desk(
        GatedModel(
            [ModelEvent.completed(ModelResponse(call_tool("file_claim", "c-1", number=7)))],
            [ModelEvent.text("Claim 7 "), parked],
            [ModelEvent.text("Claim 7 is filed."), completed("Claim 7 is filed.")],
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Claim 7", "assistant": "desk"})
    before = await socket.until(
        lambda f: (
            f["type"] == "agent_event"
            and f["event"]["type"] == "text_delta"
            and f["event"].get("agent") == "clerk"
        )
    )
    request_id = next(f for f in before if f["type"] == "run_started")["request_id"]
    sessions = live_sessions()
    live = sessions.session(socket.session_id)
    await live.run.step_aside()  # what a stopping worker does past its grace period
    assert await sweep(sessions) == 1  # any worker's sweep continues it
    after = await socket.until(lambda f: f["type"] == "run_continued")
    frames = await socket.run_to_completion()
    continued = after[-1]
    assert_one_clean_run(continued, after[:-1] + frames, request_id)
    seqs = [f["seq"] for f in before + after + frames if "seq" in f]
    assert seqs == sorted(set(seqs))  # strictly increasing on the watching socket
    assert answer_of(frames) == "Desk: Claim 7 is filed."
    assert await sync_to_async(claims)() == 1  # the clerk's tool ran once
    assert clerk.requests[-1].messages[-1].content == "claim 7 filed"  # from its checkpoint
    assert await chat_tool_results(socket.session_id) == ["p-1"]
    run = await ChatRun.objects.aget(request_id=request_id)
    assert (run.status, run.attempts) == (RunStatus.COMPLETED, 2)
