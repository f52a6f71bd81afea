"""A question and an approval survive the process that asked them (real daphne, SIGKILL).

The run asks which city, then would ask to approve a note. The server is killed while the
question waits; a server started again on the same database (or, with Redis, the other
worker) shows both widgets; answering them continues the run, which saves the note exactly
once and finishes as one continuous conversation.
"""

from __future__ import annotations

import uuid

import pytest

from tests.app.processes.runs import completed_or_failed, is_custom, saved_notes
from tests.app.servers import DaphneProcess, one_worker, two_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "tests.app.durable_model:trip_planner"


async def answer_both_and_finish(client) -> list[dict]:
    """Answer the restored approval, then the question; return the continuation's frames."""
    pending = {item["kind"]: item for item in client.session_frame["pending"]}
    assert set(pending) == {"ask_user", "approval"}
    approval = pending["approval"]["payload"]
    assert approval["arguments"] == {"title": "Trip", "text": "Pack bags"}
    await client.send(
        {
            "type": "external_event",
            "name": "approval_response",
            "payload": {
                "tool_call_id": approval["tool_call_id"],
                "approved": True,
                "digest": approval["digest"],
            },
        }
    )
    result = await client.until(lambda f: f["type"] == "external_event_result")
    assert result[-1]["accepted_by"] == ["ConfirmationExtension"]
    started = await client.until(lambda f: f["type"] == "run_started")
    assert started[-1]["kind"] == "resume"
    await client.until(is_custom("ask_user"))  # the question is asked again, with its deadline
    await client.send(
        {
            "type": "external_event",
            "name": "ask_user_response",
            "payload": {"tool_call_id": "ask-city", "answer": "Rome"},
        }
    )
    return await client.until(completed_or_failed)


async def test_a_question_and_an_approval_survive_a_restart(tmp_path):
    async with one_worker("durable", tmp_path, ZETT_MODEL=MODEL) as (server, url):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": "Plan my trip"})
        await client.until(is_custom("ask_user"))
        await server.crash_and_restart()
        again = await server.socket(session_id)
        frames = await answer_both_and_finish(again)
        assert frames[-1]["event"]["message"]["content"].startswith("Going to Rome")
        assert saved_notes(url) == 1
        final = await server.socket(session_id)
        history = final.session_frame["history"]
        assert [m["role"] for m in history] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
        ]
        assert [run["status"] for run in final.session_frame["runs"]] == [
            "resumed",
            "completed",
        ]


async def ask_on_one_and_continue_on_two(one: DaphneProcess, two: DaphneProcess) -> str:
    """The run asks on worker one, which is killed; worker two settles it as paused, takes
    both answers and continues it to its end. Returns the session's id."""
    session_id = str(uuid.uuid4())
    asking = await one.socket(session_id)
    watching = await two.socket(session_id)
    await asking.send({"type": "user_message", "content": "Plan my trip"})
    await watching.until(is_custom("ask_user"))
    one.kill()
    paused = await watching.until(lambda f: f["type"] in ("run_paused", "run_interrupted"))
    assert paused[-1]["type"] == "run_paused"
    again = await two.socket(session_id)
    frames = await answer_both_and_finish(again)
    assert frames[-1]["event"]["message"]["content"].startswith("Going to Rome")
    return session_id


async def test_the_other_worker_takes_the_answers_after_the_first_one_died(tmp_path):
    cluster = two_workers("durable", tmp_path, ZETT_MODEL=MODEL, ZETT_LEASE_SECONDS="2")
    async with cluster as (one, two, url):
        await ask_on_one_and_continue_on_two(one, two)
        assert saved_notes(url) == 1
