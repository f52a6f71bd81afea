"""Runs outlive their worker, with real daphne processes SIGKILLed mid-run.

Nothing in a killed process runs after the kill, so whatever continues the run read it from
the database: the messages stored so far and the run row, still ``running``. With one
process and SQLite the next process continues the run at start-up, with no socket open;
with two workers on PostgreSQL and Redis the survivor continues it once the dead worker's
lease lapses, and every socket of the session sees ``run_continued`` and then the rest.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.servers import DaphneProcess, fresh_database, server_env, two_workers
from zett_agent.providers.demo_answers import LONG_ANSWER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LONG_PROMPT = "tell me a long story"


def event_is(kind: str):
    return lambda frame: (frame.get("event") or {}).get("type") == kind


def ended(frame: dict) -> bool:
    return event_is("run_completed")(frame) or frame["type"] in (
        "run_failed",
        "run_interrupted",
        "run_cancelled",
        "error",
    )


async def sqlite_run_status(path: str, request_id: str, wanted: str) -> str:
    """Wait (up to a minute) until the run row says ``wanted``, read straight from the
    database file; the last status read."""
    deadline = time.monotonic() + 60
    status = ""
    while time.monotonic() < deadline:
        with sqlite3.connect(path) as db:
            row = db.execute(
                "SELECT status FROM agent_app_chatrun WHERE request_id = ?", (request_id,)
            ).fetchone()
        status = row[0] if row else ""
        if status == wanted:
            return status
        await asyncio.sleep(0.1)
    return status


async def test_one_process_killed_mid_answer_continues_at_start_up_with_no_socket(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        path = url.removeprefix("sqlite:///")
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.02")
        server = DaphneProcess("continue-start-up", env).start()
        try:
            session_id = str(uuid.uuid4())
            client = await server.socket(session_id)
            await client.send({"type": "user_message", "content": LONG_PROMPT})
            frames = await client.until(event_is("text_delta"))
            request_id = next(f for f in frames if f["type"] == "run_started")["request_id"]
            await client.until(event_is("text_delta"))  # mid-answer
            server.kill()
            await server.close_clients()
            server.start()  # nobody opens the chat: the process continues it by itself
            assert await sqlite_run_status(path, request_id, "completed") == "completed"
            page = await server.socket(session_id)
            history = page.session_frame["history"]
            assert [m["role"] for m in history] == ["user", "assistant"]
            assert history[1]["content"] == LONG_ANSWER  # the whole answer, once
            (run,) = page.session_frame["runs"]
            assert (run["request_id"], run["status"], run["attempts"]) == (
                request_id,
                "completed",
                2,
            )
        finally:
            await server.close_clients()
            server.stop()


async def test_a_run_killed_on_every_attempt_ends_interrupted(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        path = url.removeprefix("sqlite:///")
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.05", ZETT_RUN_ATTEMPTS="2")
        server = DaphneProcess("continue-attempts", env).start()
        try:
            session_id = str(uuid.uuid4())
            client = await server.socket(session_id)
            await client.send({"type": "user_message", "content": LONG_PROMPT})
            frames = await client.until(event_is("text_delta"))
            request_id = next(f for f in frames if f["type"] == "run_started")["request_id"]
            server.kill()
            await server.close_clients()
            server.start()
            watcher = await server.socket(session_id)
            await watcher.until(event_is("text_delta"))  # the second attempt streams
            server.kill()
            await server.close_clients()
            server.start()
            assert await sqlite_run_status(path, request_id, "interrupted") == "interrupted"
            page = await server.socket(session_id)
            (run,) = page.session_frame["runs"]
            assert (run["status"], run["attempts"]) == ("interrupted", 2)
        finally:
            await server.close_clients()
            server.stop()


@pytest.fixture
async def workers(tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess]]:
    async with two_workers(
        "continue",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.03",
        ZETT_LEASE_SECONDS="2",
    ) as (one, two, _):
        yield one, two


@pytest.mark.parametrize("kill_at", ["text", "tool_result"])
async def test_the_other_worker_continues_a_killed_run_to_its_end(workers, kill_at):
    one, two = workers
    session_id = str(uuid.uuid4())
    owner = await one.socket(session_id)
    survivor = await two.socket(session_id)
    prompt = LONG_PROMPT if kill_at == "text" else "what is 1/3 + 1/6?"
    await owner.send({"type": "user_message", "content": prompt})
    point = event_is("text_delta") if kill_at == "text" else event_is("tool_completed")
    before = await survivor.until(point)
    request_id = next(f for f in before if f["type"] == "run_started")["request_id"]
    one.kill()
    after = await survivor.until(ended)
    kinds = [f["type"] for f in after]
    assert "run_interrupted" not in kinds
    continued = next(f for f in after if f["type"] == "run_continued")
    assert (continued["request_id"], continued["attempt"]) == (request_id, 2)
    assert event_is("run_completed")(after[-1]) and after[-1]["request_id"] == request_id
    seqs = [f["seq"] for f in before + after if "seq" in f]
    assert seqs == sorted(set(seqs))  # strictly increasing on the watching socket
    page = await two.socket(session_id)
    history = page.session_frame["history"]
    if kill_at == "text":
        assert [m["role"] for m in history] == ["user", "assistant"]
        assert history[1]["content"] == LONG_ANSWER
    else:
        roles = [m["role"] for m in history]
        assert roles == ["user", "assistant", "tool", "assistant"]  # the tool ran once
        assert "0.5" in history[-1]["content"]
    await owner.close()


async def test_sigterm_hands_a_long_answer_to_the_other_worker_well_within_the_lease(tmp_path):
    import signal

    async with two_workers(
        "handover",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.05",
        ZETT_LEASE_SECONDS="10",
        each=({"ZETT_SHUTDOWN_GRACE": "0.5"}, {}),
    ) as (one, two, _):
        session_id = str(uuid.uuid4())
        owner = await one.socket(session_id)
        survivor = await two.socket(session_id)
        await owner.send({"type": "user_message", "content": LONG_PROMPT})
        before = await survivor.until(event_is("text_delta"))
        request_id = next(f for f in before if f["type"] == "run_started")["request_id"]
        one.process.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        gap = await survivor.until(lambda f: f["type"] == "run_continued")
        # The grace period, then the handover: far sooner than the 10 s lease would lapse.
        assert time.monotonic() - stopped_at < 5
        assert "run_interrupted" not in [f["type"] for f in gap]
        assert gap[-1]["request_id"] == request_id
        after = await survivor.until(ended)
        assert event_is("run_completed")(after[-1]) and after[-1]["request_id"] == request_id
        page = await two.socket(session_id)
        history = page.session_frame["history"]
        assert [m["role"] for m in history] == ["user", "assistant"]
        assert history[1]["content"] == LONG_ANSWER


def note_titles(database_url: str) -> list[str]:
    import psycopg

    with psycopg.connect(database_url) as connection:
        rows = connection.execute("SELECT title FROM agent_app_note ORDER BY title").fetchall()
    return [title for (title,) in rows]


async def test_a_worker_killed_between_two_tool_calls_leaves_each_effect_once(tmp_path):
    """The run calls an ``atomic`` tool twice, then streams; worker one is killed once the
    first call's result is stored (between the two calls). Worker two continues the run:
    each call's row is stored once, and the answer is whole."""
    async with two_workers(
        "between",
        tmp_path,
        ZETT_MODEL="bench.crash_model:crash_model",
        ZETT_ASSISTANTS="bench.crash_model.Tally",
        ZETT_DEFAULT_ASSISTANT="tally",
        ZETT_LEASE_SECONDS="2",
    ) as (one, two, url):
        session_id = str(uuid.uuid4())
        owner = await one.socket(session_id)
        survivor = await two.socket(session_id)
        await owner.send({"type": "user_message", "content": "tally 2 30 20"})
        before = await survivor.until(event_is("tool_completed"))
        request_id = next(f for f in before if f["type"] == "run_started")["request_id"]
        one.kill()
        after = await survivor.until(ended)
        assert "run_interrupted" not in [f["type"] for f in after]
        assert any(f["type"] == "run_continued" for f in after)
        assert event_is("run_completed")(after[-1]) and after[-1]["request_id"] == request_id
        assert after[-1]["event"]["message"]["content"] == "x" * 30
        seqs = [f["seq"] for f in before + after if "seq" in f]
        assert seqs == sorted(set(seqs))
        assert note_titles(url) == [f"{request_id} 1", f"{request_id} 2"]  # each once
