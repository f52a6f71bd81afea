"""Questions and approvals over AG-UI: interrupts, the run after the answer, paused runs.

The frames are those of real runs (``tests.app.test_agui_encoder`` records them); the
answers are given the way an AG-UI client gives them, as a ``resume``.
"""

from __future__ import annotations

import pytest

from agent_app.agui.encoder import RunEncoder, refusal_events
from agent_app.agui.errors import ErrorCode
from tests.app.test_agui_encoder import (
    event_names,
    parse,
    record_approval,
    record_question,
    validate,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_question_ends_the_stream_in_an_interrupt_and_the_answer_starts_the_next(
    sockets, use_model
):
    recording = await record_question(sockets, use_model)
    events = recording.live()
    custom = next(f for f in recording.frames if f.get("event", {}).get("name") == "ask_user")
    payload = custom["event"]["payload"]
    at = next(i for i, e in enumerate(events) if e.id == custom["seq"])
    assert event_names(events[at - 1 : at + 1]) == ["ask_user", "RUN_FINISHED"]
    assert events[at - 1].data["value"] == payload
    finished = parse(events[at])
    assert finished.outcome.type == "interrupt"
    assert events[at].data["outcome"]["interrupts"] == [
        {
            "id": "ask-1",
            "reason": "input_required",
            "toolCallId": "ask-1",
            "message": "Which city?",
            "responseSchema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "enum": ["Paris", "Rome"]}},
                "required": ["answer"],
                "additionalProperties": False,
            },
            "expiresAt": payload["expires_at"],
            "metadata": {"zett": {"name": "ask_user", "payload": payload}},
        }
    ]
    # The reply (the resume) continues the same zett run: a new AG-UI run, same runId.
    after = events[at + 1 :]
    assert after[0].data == {
        "type": "RUN_STARTED",
        "threadId": recording.thread_id,
        "runId": events[0].data["runId"],
    }
    assert event_names(after[:2]) == ["RUN_STARTED", "zett.tool_started"]
    result = next(e for e in after if e.type == "TOOL_CALL_RESULT")
    assert (result.data["toolCallId"], result.data["content"]) == ("ask-1", "Rome")
    assert result.data["metadata"]["zett"]["reply"]["answer"] == "Rome"
    assert events[-1].data["outcome"] == {"type": "success"}


async def test_an_approval_is_a_confirmation_interrupt(sockets, use_model):
    recording = await record_approval(sockets, use_model)
    events = recording.live()
    custom = next(
        f for f in recording.frames if f.get("event", {}).get("name") == "approval_requested"
    )
    payload = custom["event"]["payload"]
    finished = next(e for e in events if e.id == custom["seq"])
    (interrupt,) = finished.data["outcome"]["interrupts"]
    assert interrupt == {
        "id": "note-1",
        "reason": "confirmation",
        "toolCallId": "note-1",
        "message": payload["question"],
        "responseSchema": {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "digest": {"type": "string", "const": payload["digest"]},
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
        "expiresAt": payload["expires_at"],
        "metadata": {"zett": {"name": "approval_requested", "payload": payload}},
    }
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == "note-1"
    assert result.data["metadata"]["zett"]["reply"] == {"kind": "approval", "approved": True}


async def test_a_paused_run_interrupts_once_and_its_continuation_names_it(sockets, use_model):
    """``run_paused`` and a continuation, as docs/protocol.md describes them, after a real
    question: the frames a worker sends when the asking process died."""
    recording = await record_question(sockets, use_model)
    asked = [f for f in recording.frames if f["type"] != "reply_accepted"]
    asked = asked[: next(i for i, f in enumerate(asked) if f.get("event", {}).get("name")) + 1]
    request_id, seq = asked[0]["request_id"], asked[-1]["seq"]
    payload = asked[-1]["event"]["payload"]
    item = {
        "request_id": request_id,
        "tool_call_id": "ask-1",
        "kind": "ask_user",
        "name": "ask_user",
        "payload": payload,
        "response_event": "ask_user_response",
        "expires_at": payload["expires_at"],
    }
    encoder = RunEncoder(recording.thread_id)
    encoder.encode_all(asked)
    paused = {"type": "run_paused", "seq": seq + 1, "request_id": request_id, "pending": [item]}
    assert encoder.encode(paused) == []  # the client was told already
    other = {**item, "tool_call_id": "ask-2", "payload": {**payload, "tool_call_id": "ask-2"}}
    again = encoder.encode({**paused, "seq": seq + 2, "pending": [item, other]})
    assert event_names(again) == ["RUN_STARTED", "RUN_FINISHED"]
    ids = [i["id"] for i in again[-1].data["outcome"]["interrupts"]]
    assert ids == ["ask-1", "ask-2"]
    reply = {"type": "reply_accepted", "seq": seq + 3, "request_id": request_id, "name": "x"}
    continuation = {
        "type": "run_started",
        "seq": seq + 4,
        "request_id": "continuation-1",
        "content": None,
        "kind": "resume",
        "resumed_from": request_id,
    }
    assert encoder.encode(reply) == []  # the continuation takes the paused run over
    started = encoder.encode(continuation)
    assert started[0].data == {
        "type": "RUN_STARTED",
        "threadId": recording.thread_id,
        "runId": "continuation-1",
        "parentRunId": request_id,
    }
    for event in [*again, *started]:
        parse(event)


async def test_a_refusal_after_all_is_a_stream_that_ends_in_run_error():
    events = refusal_events(
        "thread-1", "run-1", ErrorCode.INTERRUPT_ANSWERED, "This question was answered already."
    )
    assert [event.id for event in events] == [None, None]
    assert events[-1].data == {
        "type": "RUN_ERROR",
        "message": "This question was answered already.",
        "code": "interrupt_answered",
    }
    for event in events:
        parse(event)
    await validate(events)


async def test_a_run_whose_end_never_came_is_ended_when_the_next_starts(sockets, use_model):
    """A process that died mid-answer sends no end; the next run's start ends that run."""
    recording = await record_question(sockets, use_model)
    begun = recording.frames[:3]  # run_started, model_started, the tool call's delta
    last = begun[-1]["seq"]
    next_run = {**recording.frames[0], "seq": last + 1, "request_id": "next-run"}
    events = RunEncoder(recording.thread_id).encode_all([*begun, next_run])
    names = event_names(events)
    at = names.index("RUN_ERROR")
    assert events[at].data["code"] == "interrupted" and events[at].id is None
    assert names[at + 1 :] == ["RUN_STARTED", "zett.run_started"]
    assert events[-1].id == last + 1
    await validate(events[: at + 1])  # the first run, ended
