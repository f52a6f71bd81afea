"""A delegate's approval survives the process that asked it (real daphne, SIGKILL), and
reaches the worker running the run from any other (two workers, Redis).

The front desk asks billing for a refund; billing's refund waits for the person's approval.
The server is killed while it waits; the server started again on the same database shows
the approval (billing's, under the front desk's call); approving it continues the chat's
run, which resumes billing where it stopped: the refund runs exactly once, billing reports
it and the front desk answers with billing's report.
"""

from __future__ import annotations

import uuid

import pytest

from tests.app.processes.runs import (
    completed_or_failed,
    is_custom,
    kill_and_see_it_continued,
    saved_notes,
    sqlite_run_status,
    started_request,
)
from tests.app.servers import one_worker, two_workers
from tests.app.team_assistants import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

TEAM = "tests.app.team_assistants.FrontDesk,tests.app.team_assistants.Billing"
WRITERS = "tests.app.team_assistants.Editor,tests.app.team_assistants.Scribe"


approval_asked = is_custom("approval_requested")
ended = completed_or_failed


async def test_a_delegates_approval_survives_a_kill_and_the_run_completes(tmp_path):
    worker = one_worker("team", tmp_path, ZETT_ASSISTANTS=TEAM, ZETT_DEFAULT_ASSISTANT="front")
    async with worker as (server, url):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": "Refund 7"})
        asked = (await client.until(approval_asked))[-1]["event"]
        assert (asked["agent"], asked["parent_tool_call_id"]) == ("billing", "ask-1")
        server.kill()
        assert saved_notes(url) == 0
        server.start()
        again = await server.socket(session_id)
        assert [run["status"] for run in again.session_frame["runs"]] == ["paused"]
        (pending,) = again.session_frame["pending"]
        assert (pending["tool_call_id"], pending["agent"]) == ("refund-1", "billing")
        approval = pending["payload"]
        await again.send(
            {
                "type": "external_event",
                "name": "approval_response",
                "payload": {
                    "tool_call_id": "refund-1",
                    "approved": True,
                    "digest": approval["digest"],
                },
            }
        )
        result = await again.until(lambda f: f["type"] == "external_event_result")
        assert result[-1]["accepted_by"] == ["ConfirmationExtension"]
        frames = await again.until(ended)
        assert frames[-1]["event"]["message"]["content"] == ("Front: Billing: order 7 refunded")
        assert saved_notes(url) == 1
        nested = [
            f["event"] for f in frames if f["type"] == "agent_event" and "agent" in f["event"]
        ]
        assert "tool_completed" in {event["type"] for event in nested}
        final = await server.socket(session_id)
        assert [run["status"] for run in final.session_frame["runs"]] == [
            "resumed",
            "completed",
        ]
        assert [m["role"] for m in final.session_frame["history"]] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]


async def test_a_delegates_approval_on_another_worker_and_after_the_first_one_died(tmp_path):
    """Two workers, PostgreSQL and Redis: the run asks on worker one; the approval's wait is
    shown on worker two, which takes over once one is killed and continues the run."""
    cluster = two_workers(
        "team",
        tmp_path,
        ZETT_ASSISTANTS=TEAM,
        ZETT_DEFAULT_ASSISTANT="front",
        ZETT_LEASE_SECONDS="2",
    )
    async with cluster as (one, two, url):
        session_id = str(uuid.uuid4())
        asking = await one.socket(session_id)
        watching = await two.socket(session_id)
        await asking.send({"type": "user_message", "content": "Refund 7"})
        asked = (await watching.until(approval_asked))[-1]["event"]
        assert asked["agent"] == "billing"
        one.kill()
        paused = await watching.until(lambda f: f["type"] in ("run_paused", "run_interrupted"))
        assert paused[-1]["type"] == "run_paused"
        (pending,) = paused[-1]["pending"]
        assert (pending["tool_call_id"], pending["agent"]) == ("refund-1", "billing")
        await watching.send(
            {
                "type": "external_event",
                "name": "approval_response",
                "payload": {
                    "tool_call_id": "refund-1",
                    "approved": True,
                    "digest": pending["payload"]["digest"],
                },
            }
        )
        frames = await watching.until(ended)
        assert frames[-1]["event"]["message"]["content"] == "Front: Billing: order 7 refunded"
        assert saved_notes(url) == 1


async def test_a_delegates_approval_given_on_the_other_worker_reaches_the_running_one(tmp_path):
    cluster = two_workers(
        "team-live", tmp_path, ZETT_ASSISTANTS=TEAM, ZETT_DEFAULT_ASSISTANT="front"
    )
    async with cluster as (one, two, url):
        session_id = str(uuid.uuid4())
        asking = await one.socket(session_id)
        approving = await two.socket(session_id)
        await asking.send({"type": "user_message", "content": "Refund 7"})
        asked = (await approving.until(approval_asked))[-1]["event"]
        await approving.send(
            {
                "type": "external_event",
                "name": "approval_response",
                "payload": {
                    "tool_call_id": "refund-1",
                    "approved": True,
                    "digest": asked["payload"]["digest"],
                },
            }
        )
        result = await approving.until(lambda f: f["type"] == "external_event_result")
        assert result[-1]["accepted_by"] == ["ConfirmationExtension"]
        frames = await asking.until(ended)
        assert frames[-1]["event"]["message"]["content"] == "Front: Billing: order 7 refunded"
        assert saved_notes(url) == 1


def scribe_streams(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "text_delta" and event.get("agent") == "scribe"


async def test_a_worker_killed_while_a_delegate_streams_the_other_one_finishes_the_answer(
    tmp_path,
):
    """Two workers: worker one runs the editor's run, whose scribe is streaming its report
    when worker one is killed. Worker two continues the run: the editor's ``ask_scribe``
    call runs again and the scribe goes on from its stored conversation (its report is
    written already: the tool is not run again), streams the report, and the editor
    answers with it, on the same request, with no interruption on the watching socket."""
    cluster = two_workers(
        "writers",
        tmp_path,
        ZETT_ASSISTANTS=WRITERS,
        ZETT_DEFAULT_ASSISTANT="editor",
        ZETT_LEASE_SECONDS="2",
    )
    async with cluster as (one, two, url):
        session_id = str(uuid.uuid4())
        asking = await one.socket(session_id)
        watching = await two.socket(session_id)
        await asking.send({"type": "user_message", "content": "A report, please"})
        before = await watching.until(scribe_streams)
        after = await kill_and_see_it_continued(one, watching, before)
        assert after[-1]["event"]["message"]["content"] == f"Editor: {REPORT}"
        assert saved_notes(url) == 1  # the scribe's tool ran once
        page = await two.socket(session_id)
        history = page.session_frame["history"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[2]["content"] == REPORT  # the whole report, once
        (run,) = page.session_frame["runs"]
        assert (run["status"], run["attempts"]) == ("completed", 2)


async def test_one_process_killed_while_a_delegate_streams_finishes_after_its_restart(tmp_path):
    worker = one_worker(
        "writers", tmp_path, ZETT_ASSISTANTS=WRITERS, ZETT_DEFAULT_ASSISTANT="editor"
    )
    async with worker as (server, url):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": "A report, please"})
        request_id = started_request(await client.until(scribe_streams))
        await server.crash_and_restart()  # nobody opens the chat: the run continues by itself
        assert await sqlite_run_status(url, request_id, "completed") == "completed"
        page = await server.socket(session_id)
        history = page.session_frame["history"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[-1]["content"] == f"Editor: {REPORT}"
        assert saved_notes(url) == 1
        (run,) = page.session_frame["runs"]
        assert (run["status"], run["attempts"]) == ("completed", 2)
