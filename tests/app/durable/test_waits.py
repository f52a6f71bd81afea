"""Questions and approvals that outlive their run: deadlines, durable waits, continuations.

A paused run is set up the way a crash leaves it — the rows a run writes ahead (the user's
message, the answer that called the tool, the run still ``running``, the wait ``open``) with
no process running it — and then a socket connects, as after a restart.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from agent_app.durable.store import RowMeta, append_rows
from agent_app.durable.waits import digest_of, record_wait
from agent_app.models import ChatMessage, ChatRun, ChatSession, ReplyWait, RunStatus, WaitStatus
from agent_app.protocol.frames import MAX_OUTBOUND_BYTES
from tests.app.conftest import RECEIVE_TIMEOUT, new_browser
from tests.app.llm_doubles import call_tool, say
from zett_agent.messages import AssistantMessage, ToolCall, UserMessage
from zett_agent.testing import ScriptedModel
from zett_site.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


def events_of(frames: list[dict]) -> list[dict]:
    return [frame["event"] for frame in frames if frame["type"] == "agent_event"]


@sync_to_async
def _leave_a_paused_run(
    calls: list[ToolCall], waits: dict[str, str], browser_key: str
) -> tuple[str, str]:
    session = ChatSession.objects.create(title="Trip", browser_key=browser_key)
    request_id = str(uuid.uuid4())
    ChatRun.objects.create(request_id=request_id, session=session, worker="dead:1:boot")
    append_rows(
        str(session.pk),
        request_id,
        [
            (UserMessage("Plan it"), RowMeta()),
            (AssistantMessage(tool_calls=tuple(calls)), RowMeta()),
        ],
    )
    for call in calls:
        kind = waits.get(call.id)
        if kind == "ask_user":
            payload = {
                "session_id": str(session.pk),
                "tool_call_id": call.id,
                "question": call.arguments["question"],
                "options": None,
                "allow_multiple": False,
                "response_event": "ask_user_response",
            }
            record_wait(str(session.pk), request_id, "ask_user", payload)
        elif kind == "approval":
            payload = {
                "tool_call_id": call.id,
                "tool": call.name,
                "arguments": call.arguments,
                "question": "Allow?",
                "response_event": "approval_response",
                "digest": digest_of(call.name, call.arguments),
            }
            record_wait(str(session.pk), request_id, "approval_requested", payload)
    return str(session.pk), request_id


BROWSER: dict[str, str] = {}


async def leave_a_paused_run(calls: list[ToolCall], waits: dict[str, str]) -> tuple[str, str]:
    """The rows a run leaves when its process dies while it waits (``waits``: call → kind),
    in a chat of the browser ``BROWSER["cookie"]`` (the test's sockets use it)."""
    cookie, key = await new_browser()
    BROWSER["cookie"] = cookie
    return await _leave_a_paused_run(calls, waits, key)


QUESTION = ToolCall("ask-1", "ask_user", {"question": "Which city?"})
NOTE = ToolCall("note-1", "save_note", {"title": "Trip", "text": "Rome"})


async def test_a_run_that_died_waiting_is_paused_with_its_questions_pending(sockets, use_model):
    use_model(ScriptedModel())
    session_id, _ = await leave_a_paused_run([QUESTION, NOTE], {"ask-1": "ask_user"})
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    frame = socket.session_frame
    assert [run["status"] for run in frame["runs"]] == ["paused"]
    # The question it asked, and the approval the next call would have asked for.
    assert [(p["tool_call_id"], p["kind"]) for p in frame["pending"]] == [
        ("ask-1", "ask_user"),
        ("note-1", "approval"),
    ]
    approval = frame["pending"][1]["payload"]
    assert approval["digest"] == digest_of("save_note", NOTE.arguments)
    assert approval["expires_at"]  # a deadline from ZETT_REPLY_TIMEOUT


async def test_answering_both_restored_widgets_finishes_the_run_once(sockets, use_model):
    model = use_model(ScriptedModel([say("Saved your Rome note.")]))
    session_id, request_id = await leave_a_paused_run([QUESTION, NOTE], {"ask-1": "ask_user"})
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    digest = socket.session_frame["pending"][1]["payload"]["digest"]
    approve = {"tool_call_id": "note-1", "approved": True, "digest": digest}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": approve})
    result = await socket.expect("external_event_result")
    assert result["accepted_by"] == ["ConfirmationExtension"]
    accepted = await socket.expect("reply_accepted")
    assert accepted["correlation_id"] == "note-1"
    started = await socket.expect("run_started")
    assert (started["kind"], started["resumed_from"], started["content"]) == (
        "resume",
        request_id,
        None,
    )
    # The continuation reaches the question, which is still open: it asks again.
    asked = await socket.until_event("custom", "ask_user")
    assert asked[-1]["event"]["payload"]["tool_call_id"] == "ask-1"
    answer = {"tool_call_id": "ask-1", "answer": "Rome"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    await socket.expect("external_event_result", accepted_by=["AskUserExtension"])
    frames = await socket.run_to_completion()
    assert frames[-1]["event"]["message"]["content"] == "Saved your Rome note."
    assert [
        e["tool_calls"][0]["id"] for e in events_of(frames) if e["type"] == "tool_completed"
    ] == [
        "ask-1",
        "note-1",
    ]
    assert await Note.objects.acount() == 1
    statuses = {run.request_id: run.status async for run in ChatRun.objects.all()}
    assert statuses[request_id] == RunStatus.RESUMED
    assert statuses[started["request_id"]] == RunStatus.COMPLETED
    rows = [(m.role, m.tool_call_id) async for m in ChatMessage.objects.order_by("position")]
    assert rows == [
        ("user", ""),
        ("assistant", ""),
        ("tool", "ask-1"),
        ("tool", "note-1"),
        ("assistant", ""),
    ]
    assert model.requests[0].messages[-1].content  # the model saw both results
    assert {w.status async for w in ReplyWait.objects.all()} == {WaitStatus.DONE}


async def test_two_sockets_answering_a_restored_approval_at_once_run_the_tool_once(
    sockets, use_model
):
    use_model(ScriptedModel([say("Noted.")]))
    session_id, _ = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    one = await sockets(session_id, cookie=BROWSER["cookie"])
    two = await sockets(session_id, cookie=BROWSER["cookie"])
    approve = {"tool_call_id": "note-1", "approved": True}
    frame = {"type": "external_event", "name": "approval_response", "payload": approve}
    await asyncio.gather(one.send(frame), two.send(frame))
    results = [
        (await one.until(lambda f: f["type"] == "external_event_result"))[-1],
        (await two.until(lambda f: f["type"] == "external_event_result"))[-1],
    ]
    verdicts = sorted(result["accepted_by"] for result in results)
    assert verdicts == [[], ["ConfirmationExtension"]]
    assert {r["reason"] for r in results if not r["accepted_by"]} == {"stale"}
    await one.run_to_completion()
    await two.run_to_completion()
    assert await Note.objects.acount() == 1


async def test_an_approval_for_other_arguments_than_shown_is_refused(sockets, use_model):
    use_model(ScriptedModel([say("Noted.")]))
    session_id, _ = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    forged = {"tool_call_id": "note-1", "approved": True, "digest": digest_of("save_note", {})}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": forged})
    result = await socket.expect("external_event_result")
    assert (result["accepted_by"], result["reason"]) == ([], "mismatch")
    await socket.assert_quiet()
    assert not await Note.objects.aexists()


async def test_a_huge_restored_question_is_listed_cut_and_still_answers_the_run(sockets, use_model):
    use_model(ScriptedModel([say("Thanks.")]))
    question = "Which city, of all of them? " * 25_000  # 700 KB
    huge = ToolCall("ask-1", "ask_user", {"question": question})
    session_id, _ = await leave_a_paused_run([huge], {"ask-1": "ask_user"})
    socket = await sockets(session_id, cookie=BROWSER["cookie"], expect_session=False)
    text = await socket.communicator.receive_from(timeout=RECEIVE_TIMEOUT)
    assert len(text.encode("utf-8")) < MAX_OUTBOUND_BYTES
    (pending,) = json.loads(text)["pending"]
    assert pending["content_truncated"] is True
    assert pending["payload"]["tool_call_id"] == "ask-1"
    assert pending["payload"]["question"].endswith(f"[cut: {len(question)} characters in all]")
    assert (await ReplyWait.objects.aget()).payload["question"] == question
    answer = {"tool_call_id": "ask-1", "answer": "Rome"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": answer})
    await socket.expect("external_event_result", accepted_by=["AskUserExtension"])
    frames = await socket.run_to_completion()
    assert frames[-1]["event"]["message"]["content"] == "Thanks."


async def test_a_restored_approval_whose_deadline_passed_reads_as_expired(sockets, use_model):
    use_model(ScriptedModel())
    session_id, _ = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    await ReplyWait.objects.aupdate(expires_at="2020-01-01T00:00:00Z")
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    frame = socket.session_frame
    assert frame["pending"] == []
    assert [run["status"] for run in frame["runs"]] == ["expired"]
    result = frame["history"][-1]
    assert (result["role"], result["success"]) == ("tool", False)
    assert result["attributes"]["reply"] == {"kind": "approval", "expired": True}
    late = {"tool_call_id": "note-1", "approved": True}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": late})
    assert (await socket.expect("external_event_result"))["reason"] == "expired"


async def test_a_live_wait_expires_the_tool_fails_the_run_goes_on_and_late_replies_are_refused(
    sockets, use_model, settings
):
    settings.ZETT_REPLY_TIMEOUT = 0.2
    use_model(ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Ok.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "save it"})
    asked = (await socket.until_event("custom", "approval_requested"))[-1]["event"]["payload"]
    assert asked["expires_at"].endswith("+00:00")
    frames = await socket.run_to_completion()  # nobody answers: the deadline ends the wait
    failed = next(e for e in events_of(frames) if e["type"] == "tool_failed")
    assert "Nobody answered in time" in failed["message"]["content"]
    assert failed["message"]["attributes"]["reply"] == {"kind": "approval", "expired": True}
    late = {"tool_call_id": "note-1", "approved": True}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": late})
    assert (await socket.expect("external_event_result"))["reason"] == "expired"
    assert not await Note.objects.aexists()


async def test_a_new_message_instead_of_an_answer_closes_the_paused_run(sockets, use_model):
    use_model(ScriptedModel([say("Fresh start.")]))
    session_id, request_id = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    await socket.send({"type": "user_message", "content": "never mind"})
    cancelled = await socket.expect("run_cancelled")
    assert cancelled["request_id"] == request_id
    await socket.run_to_completion()
    again = await sockets(session_id, cookie=BROWSER["cookie"])
    assert again.session_frame["pending"] == []
    closing = next(m for m in again.session_frame["history"] if m["role"] == "tool")
    assert closing["success"] is False and "new message" in closing["content"]


@sync_to_async
def _approved_and_executing(session_id: str, started: bool) -> None:
    """The approval of note-1 was given and its tool about to run (``executing``);
    ``started``: its body began (its run says so)."""
    wait = ReplyWait.objects.get(session_id=session_id, tool_call_id="note-1")
    wait.status = WaitStatus.EXECUTING
    wait.reply = {"tool_call_id": "note-1", "approved": True, "digest": wait.payload["digest"]}
    wait.save(update_fields=["status", "reply"])
    if started:
        ChatRun.objects.filter(session_id=session_id).update(started_call="note-1")


@pytest.mark.parametrize("started", [False, True])
async def test_an_approved_call_cut_off_by_a_crash_runs_once_at_most(sockets, use_model, started):
    use_model(ScriptedModel([say("Noted.")]))
    session_id, _ = await leave_a_paused_run([NOTE], {"note-1": "approval"})
    await _approved_and_executing(session_id, started)
    socket = await sockets(session_id, cookie=BROWSER["cookie"])
    assert socket.session_frame["pending"] == []  # its approval is never asked again
    if not started:
        # save_note is atomic: nothing of it was committed, so it runs now, approved.
        await socket.until(lambda f: f["type"] == "run_started")
        await socket.run_to_completion()
        assert await Note.objects.filter(session_id=session_id).acount() == 1
    else:
        # It may have run: never again; the run goes on without it.
        if socket.session_frame["active_request_id"]:
            await socket.run_to_completion()
        assert await Note.objects.filter(session_id=session_id).acount() == 0
        tool = await sync_to_async(
            lambda: ChatMessage.objects.get(session_id=session_id, role="tool").content
        )()
        assert "may or may not have completed" in tool
