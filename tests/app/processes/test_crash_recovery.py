"""Honest restarts: a real daphne process SIGKILLed mid-run, started again on its database.

Nothing in the killed process runs after the kill, so whatever the restarted server knows it
read from the database: the user's message (stored before the model was called), the run
row (still ``running``: continued at start-up, or ``paused`` if it waited for a reply), the
waits, and the ``seq`` high-water mark. Each scenario runs on SQLite and on
PostgreSQL, the offline demo model streaming slowly enough to be killed mid-answer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.servers import DaphneProcess, one_worker, provider_valid

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request, tmp_path) -> AsyncIterator[DaphneProcess]:
    worker = one_worker(
        f"crash-{request.param}",
        tmp_path,
        database=request.param,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.05",
    )
    async with worker as (process, _):
        yield process


def text_deltas(count: int):
    seen = 0

    def match(frame: dict) -> bool:
        nonlocal seen
        if frame.get("type") == "agent_event" and frame["event"]["type"] == "text_delta":
            seen += 1
        return seen >= count

    return match


def custom(name: str):
    def match(frame: dict) -> bool:
        event = frame.get("event") or {}
        return event.get("type") == "custom" and event.get("name") == name

    return match


async def answer_a_new_message(client, text: str) -> list[dict]:
    await client.send({"type": "user_message", "content": text})
    return await client.until(
        lambda f: (
            f.get("event", {}).get("type") == "run_completed"
            or f["type"] in ("run_failed", "error")
        )
    )


async def test_a_crash_mid_stream_keeps_the_message_and_the_run_goes_on_after_the_restart(
    server,
):
    session_id = str(uuid.uuid4())
    client = await server.socket(session_id)
    await client.send({"type": "user_message", "content": "tell me a long story, please"})
    await client.until(text_deltas(3))
    sent_before = client.last_seq
    await server.crash_and_restart()
    again = await server.socket(session_id)
    frame = again.session_frame
    assert frame["history"][0]["role"] == "user"
    assert frame["history"][0]["content"] == "tell me a long story, please"
    assert frame["last_seq"] >= sent_before
    if frame["active_request_id"]:  # still being continued: it ends as any run
        ended = await answer_until_end(again)
        assert ended[-1]["event"]["type"] == "run_completed", ended[-1]
        await again.close()
        again = await server.socket(session_id)
        frame = again.session_frame
    (run,) = frame["runs"]
    assert (run["status"], run["attempts"]) == ("completed", 2)
    assert [m["role"] for m in frame["history"]] == ["user", "assistant"]
    assert provider_valid(frame["history"], frame["pending"])
    frames = await answer_a_new_message(again, "what is 2 + 2?")
    assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
    assert min(f["seq"] for f in frames if "seq" in f) > sent_before
    await again.close()


async def answer_until_end(client) -> list[dict]:
    return await client.until(
        lambda f: (
            f.get("event", {}).get("type") == "run_completed"
            or f["type"] in ("run_failed", "run_interrupted", "error")
        )
    )


async def test_a_crash_while_an_approval_waits_pauses_the_run_with_its_widget(server):
    session_id = str(uuid.uuid4())
    client = await server.socket(session_id)
    await client.send({"type": "user_message", "content": "save a note: buy milk"})
    asked = (await client.until(custom("approval_requested")))[-1]["event"]["payload"]
    sent_before = client.last_seq
    await server.crash_and_restart()
    again = await server.socket(session_id)
    frame = again.session_frame
    assert frame["history"][0]["content"] == "save a note: buy milk"
    assert [run["status"] for run in frame["runs"]] == ["paused"]
    (pending,) = frame["pending"]
    assert pending["tool_call_id"] == asked["tool_call_id"]
    assert pending["kind"] == "approval"
    assert pending["payload"]["arguments"] == asked["arguments"]
    assert provider_valid(frame["history"], frame["pending"])
    # Moving on instead of answering drops the question and closes its call.
    frames = await answer_a_new_message(again, "what is 2 + 2?")
    assert frames[0]["type"] == "run_cancelled"
    assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
    assert min(f["seq"] for f in frames if "seq" in f) > sent_before
    await again.close()
    final = await server.socket(session_id)
    assert provider_valid(final.session_frame["history"], final.session_frame["pending"])
    assert [r["status"] for r in final.session_frame["runs"]] == ["cancelled", "completed"]
    await final.close()
