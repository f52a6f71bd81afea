"""AG-UI streams of a run continued after its worker stopped: an answered approval stays
answered.

A run asks for an approval over AG-UI; the resume approves it; the note is saved and the
answer streams; then the worker hands the run over (as at the end of a deploy's grace
period) and the sweep continues it with the same ``runId``. The resume's stream goes on
with ``CUSTOM zett.run_continued`` and the rest of the answer, and a client that
re-attaches with an id from before the approval gets the continuation: neither ever shows
the approval again, and the approved tool ran once.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_app.models import ChatRun
from agent_app.sessions.background import sweep
from agent_app.sessions.registry import live_sessions
from tests.app.agui_support import (
    bearer,
    check_events,
    http_fixture,  # noqa: F401 (the ``http`` fixture)
    make_token,
    post_run,
    resume_input,
    run_input,
)
from tests.app.asgi_http import SseReader
from tests.app.llm_doubles import GatedModel, call_tool, completed
from zett_agent.model import ModelEvent, ModelResponse
from zett_site.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


def interrupts(events) -> list[dict]:
    return [
        interrupt
        for event in events
        if event.type == "RUN_FINISHED"
        for interrupt in (event.data.get("outcome") or {}).get("interrupts", [])
    ]


def named(events, name: str) -> list:
    return [event for event in events if event.data.get("name") == name]


async def test_a_continued_run_never_asks_its_answered_approval_again(http, use_model):
    first_attempt = asyncio.Event()  # never set: the first attempt's answer stops half-way
    continuation = asyncio.Event()  # holds the continuation while a client re-attaches
    note = call_tool("save_note", "note-1", title="Milk", text="buy milk")
    use_model(
        GatedModel(
            [ModelEvent.completed(ModelResponse(note))],
            [ModelEvent.text("Sav"), first_attempt],
            [continuation, ModelEvent.text("Saved."), completed("Saved.")],
        )
    )
    _, secret = await make_token("ada")
    thread_id = str(uuid.uuid4())
    asked = await SseReader(await post_run(http, secret, run_input(thread_id, "a note"))).rest()
    (interrupt,) = interrupts(asked)
    run_id = asked[-1].data["runId"]
    resume = resume_input(thread_id, interrupt["id"], {"approved": True})
    resumed = SseReader(await post_run(http, secret, resume))
    await resumed.until(lambda e: e.type == "TEXT_MESSAGE_CONTENT")

    sessions = live_sessions()
    await sessions.session(thread_id).run.step_aside()  # the worker stops; another continues
    assert await sweep(sessions) == 1
    await resumed.until(lambda e: e.data.get("name") == "zett.run_continued")
    # A client that re-attaches from before the approval, while the continuation runs.
    before_approval = min(e.id for e in asked if e.id is not None) - 1
    headers = {**bearer(secret), "Last-Event-ID": str(before_approval)}
    again = SseReader(await http("GET", f"/api/ag-ui/threads/{thread_id}/events", headers=headers))
    await again.until(lambda e: e.data.get("name") == "zett.run_continued")
    continuation.set()
    for stream in (resumed, again):
        await stream.rest()
        events = stream.events  # every event the stream sent
        assert interrupts(events) == []  # the answered approval is no interrupt again
        assert {e.data["runId"] for e in events if "runId" in e.data} == {run_id}
        assert events[-1].type == "RUN_FINISHED" and events[-1].data["outcome"] == {
            "type": "success"
        }
        assert named(events, "approval_requested") == []
        assert len(named(events, "zett.run_continued")) == 1
        check_events(events)
    # The resume's stream had the approved call's result, once; the re-attached stream
    # starts at the continuation (what came before it is the thread's history).
    (result,) = [e for e in resumed.events if e.type == "TOOL_CALL_RESULT"]
    assert result.data["toolCallId"] == "note-1"
    assert [e.type for e in again.events[:2]] == ["RUN_STARTED", "CUSTOM"]
    assert await Note.objects.filter(title="Milk").acount() == 1  # the tool ran once
    run = await ChatRun.objects.aget(request_id=run_id)
    assert (run.status, run.attempts) == ("completed", 2)
