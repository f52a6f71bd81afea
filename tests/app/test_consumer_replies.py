"""The chat socket's replies end to end: ``ask_user`` answers and tool approvals.

Each reply is an ``external_event`` frame through the real ASGI app, as in
``test_consumer.py``: its verdict (``external_event_result``), its audit row
(``ExternalEventRecord``), and what the run then does with it.
"""

from __future__ import annotations

import pytest
from django.db.models.signals import post_delete

from agent_app.guard.access import chat_was_deleted
from agent_app.models import ChatSession, ExternalEventRecord
from tests.app.conftest import answer_of, events_of, rows
from tests.app.llm_doubles import call_tool, say
from zett_agent.testing import ScriptedModel
from zett_site.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


async def test_ask_user_waits_for_the_answer_and_feeds_it_to_the_model(sockets, use_model):
    model = use_model(
        ScriptedModel(
            [
                call_tool("ask_user", "ask-1", question="Which city?", options=["Paris", "Rome"]),
                lambda request: say(f"You chose {request.messages[-1].content}."),
            ]
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Plan a trip"})
    frames = await socket.until_event("custom", "ask_user")
    question = frames[-1]["event"]["payload"]
    assert question["question"] == "Which city?"
    assert question["options"] == ["Paris", "Rome"]
    assert question["tool_call_id"] == "ask-1"
    assert question["response_event"] == "ask_user_response"
    await socket.send(
        {
            "type": "external_event",
            "name": "ask_user_response",
            "payload": {"tool_call_id": "ask-1", "answer": "Rome"},
        }
    )
    result = await socket.expect("external_event_result")
    assert result == {
        "type": "external_event_result",
        "name": "ask_user_response",
        "correlation_id": "ask-1",
        "accepted_by": ["AskUserExtension"],
        "reason": None,
    }
    assert answer_of(await socket.run_to_completion()) == "You chose Rome."
    assert len(model.requests) == 2
    record = await ExternalEventRecord.objects.aget(session_id=socket.session_id)
    assert record.name == "ask_user_response"
    assert record.accepted_by == ["AskUserExtension"]
    assert record.request_id == frames[0]["request_id"]
    assert record.payload == {"tool_call_id": "ask-1", "answer": "Rome"}
    stored = await rows(socket.session_id)
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2][1] == "Rome"  # the answer itself, not the reply's JSON


async def test_a_duplicate_or_unknown_reply_is_rejected_with_an_empty_accepted_by(
    sockets, use_model
):
    use_model(ScriptedModel([call_tool("ask_user", "ask-1", question="Name?"), say("Thanks.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Hi"})
    await socket.until_event("custom", "ask_user")
    unknown = {"tool_call_id": "nope", "answer": "x"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": unknown})
    await socket.expect(
        "external_event_result", correlation_id="nope", accepted_by=[], reason="stale"
    )
    reply = {"tool_call_id": "ask-1", "answer": "Ada"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": reply})
    await socket.expect("external_event_result", accepted_by=["AskUserExtension"])
    await socket.run_to_completion()
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": reply})
    # Answered already: stale, whether or not a run is going.
    await socket.expect(
        "external_event_result", correlation_id="ask-1", accepted_by=[], reason="stale"
    )
    await socket.assert_quiet()  # the socket reads its next frame once the row is written
    verdicts = [
        (r.correlation_id, r.accepted_by)
        async for r in ExternalEventRecord.objects.filter(session_id=socket.session_id).order_by(
            "received_at", "pk"
        )
    ]
    # Every reply is on record, taken or not (one may answer a paused run: it is checked).
    assert verdicts == [("nope", []), ("ask-1", ["AskUserExtension"]), ("ask-1", [])]


async def test_an_approved_tool_runs_and_writes_its_note(sockets, use_model):
    use_model(
        ScriptedModel(
            [call_tool("save_note", "note-1", title="Milk", text="Buy milk"), say("Saved.")]
        )
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "Note: buy milk"})
    frames = await socket.until_event("custom", "approval_requested")
    request = frames[-1]["event"]["payload"]
    assert request["tool_call_id"] == "note-1"
    assert request["tool"] == "save_note"
    assert request["arguments"] == {"title": "Milk", "text": "Buy milk"}
    assert request["response_event"] == "approval_response"
    assert not await Note.objects.aexists()
    approval = {"tool_call_id": "note-1", "approved": True}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": approval})
    await socket.expect("external_event_result", accepted_by=["ConfirmationExtension"])
    frames = await socket.run_to_completion()
    assert any(e["type"] == "tool_completed" for e in events_of(frames))
    note = await Note.objects.aget()
    assert (note.title, note.text, str(note.session_id)) == ("Milk", "Buy milk", socket.session_id)
    record = await ExternalEventRecord.objects.aget(session_id=socket.session_id)
    assert record.accepted


async def test_a_denied_tool_fails_clearly_and_the_agent_carries_on(sockets, use_model):
    model = use_model(
        ScriptedModel([call_tool("save_note", "note-1", title="T", text="x"), say("Understood.")])
    )
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "save it"})
    await socket.until_event("custom", "approval_requested")
    denial = {"tool_call_id": "note-1", "approved": False}
    await socket.send({"type": "external_event", "name": "approval_response", "payload": denial})
    await socket.expect("external_event_result", accepted_by=["ConfirmationExtension"])
    frames = await socket.run_to_completion()
    failed = next(e for e in events_of(frames) if e["type"] == "tool_failed")
    assert failed["error"]["type"] == "ApprovalDenied"
    assert "denied" in failed["message"]["content"]
    assert failed["message"]["success"] is False
    assert answer_of(frames) == "Understood."
    assert not await Note.objects.aexists()
    tool_result = model.requests[1].messages[-1]
    assert tool_result.success is False and "denied" in tool_result.content


async def test_a_reply_whose_audit_row_cannot_be_written_is_refused_and_acts_on_nothing(
    sockets, use_model, caplog
):
    use_model(ScriptedModel([call_tool("ask_user", "ask-1", question="Sure?"), say("Done.")]))
    socket = await sockets()
    await socket.send({"type": "user_message", "content": "go"})
    await socket.until_event("custom", "ask_user")
    # The session's row vanishes under the paused run: the audit row has nothing to point to.
    # (Without telling the chat's sockets, which would close them: a deletion racing this.)
    post_delete.disconnect(sender=ChatSession, dispatch_uid="zett.chat_deleted")
    try:
        await ChatSession.objects.filter(pk=socket.session_id).adelete()
    finally:
        post_delete.connect(chat_was_deleted, sender=ChatSession, dispatch_uid="zett.chat_deleted")
    reply = {"tool_call_id": "ask-1", "answer": "yes"}
    await socket.send({"type": "external_event", "name": "ask_user_response", "payload": reply})
    await socket.expect_error("internal")
    await socket.expect("external_event_result", accepted_by=[], reason="internal")
    await socket.assert_quiet()  # the run still waits: the reply never reached it
    assert not await ExternalEventRecord.objects.aexists()
    assert "Could not record the ask_user_response reply" in caplog.text
    await socket.send({"type": "cancel"})
    await socket.until_event("run_cancelled")
