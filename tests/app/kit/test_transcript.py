"""``Transcript``, the client's reading of frames, on frame sequences a test cannot easily
make a server send in-process: a chat opened after its run was paused by a crash, a
sub-run's approval (events with ``parent_tool_call_id``), an event cut for its size."""

from __future__ import annotations

from agent_app.testing.transcript import Transcript

PENDING = {
    "request_id": "r1",
    "tool_call_id": "c1",
    "kind": "approval",
    "name": "approval_requested",
    "payload": {"tool_call_id": "c1", "tool": "refund", "arguments": {"order": 5}},
    "response_event": "approval_response",
    "expires_at": None,
}


def event(request_id: str, **fields) -> dict:
    return {"type": "agent_event", "seq": 1, "request_id": request_id, "event": fields}


def turn(*call_ids: str, parent: str | None = None) -> dict:
    calls = [{"id": call_id, "name": "refund", "arguments": {}} for call_id in call_ids]
    fields = {"type": "model_completed", "response": {"message": {"tool_calls": calls}}}
    if parent:
        fields |= {"parent_tool_call_id": parent, "agent": "billing"}
    return event("r2", **fields)


def asked(call_id: str, parent: str | None = None) -> dict:
    payload = {"tool_call_id": call_id, "tool": "refund", "response_event": "approval_response"}
    fields = {"type": "custom", "name": "approval_requested", "payload": payload}
    if parent:
        fields |= {"parent_tool_call_id": parent, "agent": "billing"}
    return event("r2", **fields)


def test_a_paused_run_is_settled_and_its_continuation_is_read_to_its_end():
    transcript = Transcript()
    transcript.feed({"type": "session", "pending": [PENDING], "active_request_id": None})
    assert transcript.status == "paused" and transcript.settled
    assert transcript.waits["c1"]["tool"] == "refund"
    # The client replied and the server accepted it: a continuation run is expected.
    transcript.waits.pop("c1")
    transcript.status = "sent"
    assert not transcript.settled
    transcript.feed({"type": "reply_accepted", "correlation_id": "c1"})
    transcript.feed({"type": "run_started", "request_id": "r2", "kind": "resume"})
    assert not transcript.settled
    final = {"type": "run_completed", "message": {"content": "Refunded."}}
    transcript.feed(event("r2", **final))
    assert transcript.status == "completed" and transcript.answer_text == "Refunded."


def test_a_run_paused_while_the_client_watched_keeps_its_waits():
    transcript = Transcript()
    transcript.feed({"type": "session", "pending": [], "active_request_id": "r1"})
    transcript.feed({"type": "run_started", "request_id": "r1"})
    transcript.feed({"type": "run_paused", "request_id": "r1", "pending": [PENDING]})
    assert transcript.status == "paused" and list(transcript.waits) == ["c1"]


def test_a_call_running_another_assistant_is_held_by_the_sub_runs_wait():
    transcript = Transcript()
    transcript.feed({"type": "run_started", "request_id": "r2"})
    transcript.feed(turn("ask-1", "c9"))  # ask_billing, then another call
    transcript.feed(turn("sub-1", parent="ask-1"))
    assert not transcript.settled  # the sub-run is working
    transcript.feed(asked("sub-1", parent="ask-1"))
    assert transcript.waiting and transcript.settled
    transcript.feed({"type": "reply_accepted", "correlation_id": "sub-1"})
    assert not transcript.settled


def test_an_answer_cut_for_its_size_is_read_from_its_deltas():
    transcript = Transcript()
    transcript.feed({"type": "run_started", "request_id": "r2"})
    for fields in (
        {"type": "model_started"},
        {"type": "text_delta", "delta": "Long "},
        {"type": "text_delta", "delta": "answer."},
        {"type": "run_completed", "message": {"content": ""}, "content_omitted": True},
    ):
        transcript.feed(event("r2", **fields))
    assert transcript.answer_text == "Long answer."
