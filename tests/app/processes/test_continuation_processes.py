"""Runs outlive their worker, with real daphne processes SIGKILLed mid-run.

Nothing in a killed process runs after the kill, so whatever continues the run read it from
the database: the messages stored so far and the run row, still ``running``. With one
process and SQLite the next process continues the run at start-up, with no socket open;
with two workers on PostgreSQL and Redis the survivor continues it once the dead worker's
lease lapses, and every socket of the session sees ``run_continued`` and then the rest.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.processes.runs import (
    ended,
    event_is,
    kill_and_see_it_continued,
    sqlite_run_status,
    started_request,
)
from tests.app.servers import DaphneProcess, one_worker, two_workers
from zett_agent.providers.demo_answers import LONG_ANSWER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LONG_PROMPT = "tell me a long story"


async def test_one_process_killed_mid_answer_continues_at_start_up_with_no_socket(tmp_path):
    worker = one_worker("continue-start-up", tmp_path, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.02")
    async with worker as (server, url):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": LONG_PROMPT})
        request_id = started_request(await client.until(event_is("text_delta")))
        await client.until(event_is("text_delta"))  # mid-answer
        await server.crash_and_restart()  # nobody opens the chat: it continues by itself
        assert await sqlite_run_status(url, request_id, "completed") == "completed"
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


async def test_a_run_killed_on_every_attempt_ends_interrupted(tmp_path):
    worker = one_worker(
        "continue-attempts",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.05",
        ZETT_RUN_ATTEMPTS="2",
    )
    async with worker as (server, url):
        session_id = str(uuid.uuid4())
        client = await server.socket(session_id)
        await client.send({"type": "user_message", "content": LONG_PROMPT})
        request_id = started_request(await client.until(event_is("text_delta")))
        await server.crash_and_restart()
        watcher = await server.socket(session_id)
        await watcher.until(event_is("text_delta"))  # the second attempt streams
        await server.crash_and_restart()
        assert await sqlite_run_status(url, request_id, "interrupted") == "interrupted"
        page = await server.socket(session_id)
        (run,) = page.session_frame["runs"]
        assert (run["status"], run["attempts"]) == ("interrupted", 2)


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
    await kill_and_see_it_continued(one, survivor, await survivor.until(point))
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
        request_id = started_request(before)
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
        request_id = started_request(before)
        one.kill()
        after = await survivor.until(ended)
        assert "run_interrupted" not in [f["type"] for f in after]
        assert any(f["type"] == "run_continued" for f in after)
        assert event_is("run_completed")(after[-1]) and after[-1]["request_id"] == request_id
        assert after[-1]["event"]["message"]["content"] == "x" * 30
        seqs = [f["seq"] for f in before + after if "seq" in f]
        assert seqs == sorted(set(seqs))
        assert note_titles(url) == [f"{request_id} 1", f"{request_id} 2"]  # each once
