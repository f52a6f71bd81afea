"""Telemetry across real worker processes (daphne, PostgreSQL, Redis, SIGKILL).

- A run asks a question on worker one, which is killed; worker two settles the run as
  paused, takes both answers and continues it. The continuation's span (in worker two's
  span file) links to the dead run's attempt span, which the dead worker had exported and
  stored with the run; the spans that ended before the kill are in worker one's file, in
  that same trace.
- Worker one is killed mid-answer; worker two continues the same run, and its span links
  to the first attempt's span, found in worker one's file.
- Two workers share ``PROMETHEUS_MULTIPROC_DIR``: ``/metrics`` on either shows the runs
  of both, and nobody reads it without the token; once one is killed, its runs still
  count and the socket it had open does not.

Each server writes its spans to a file of its own (``ZETT_TEST_SPAN_FILE``), line by line
as they end, so a killed process leaves what it had recorded.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
import uuid

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.app.processes.test_durable_waits import MODEL, ask_on_one_and_continue_on_two
from tests.app.servers import DaphneProcess, two_workers
from tests.app.telemetry_support import read_span_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def stored_runs(database_url: str) -> dict[str, str]:
    """``kind`` → ``trace_context`` of the runs stored."""
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "SELECT kind, trace_context FROM agent_app_chatrun ORDER BY started_at"
        ).fetchall()
    return dict(rows)


def ids(traceparent: str) -> tuple[str, str]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return trace_id, span_id


async def test_a_run_continued_by_another_worker_after_a_crash_links_to_the_dead_run(tmp_path):
    files = {name: tmp_path / f"spans-{name}.jsonl" for name in ("one", "two")}
    async with two_workers(
        "otel",
        tmp_path,
        each=(
            {"ZETT_TEST_SPAN_FILE": str(files["one"])},
            {"ZETT_TEST_SPAN_FILE": str(files["two"])},
        ),
        ZETT_MODEL=MODEL,
        ZETT_LEASE_SECONDS="2",
        ZETT_OTEL="1",
    ) as (one, two, url):
        session_id = await ask_on_one_and_continue_on_two(one, two)
        await two.close_clients()
        two.stop()  # every span it recorded is in its file
        runs = stored_runs(url)

    dead_trace, dead_span = ids(runs["message"])
    continued_trace, continued_attempt = ids(runs["resume"])
    before_kill = read_span_file(files["one"])
    # The dead run's row names the span of its attempt, exported as it began; the model
    # call that asked ended before the kill; the run's own span never did.
    (attempt,) = [span for span in before_kill if span["name"] == "attempt 1"]
    assert (attempt["trace_id"], attempt["span_id"]) == (dead_trace, dead_span)
    (chat,) = [span for span in before_kill if span["name"].startswith("chat")]
    assert (chat["trace_id"], chat["parent"]) == (dead_trace, attempt["parent"])
    assert not [span for span in before_kill if span["name"].startswith("invoke_agent")]

    after = read_span_file(files["two"])
    (run,) = [span for span in after if span["name"] == "invoke_agent demo"]
    continued_span = run["span_id"]
    assert run["trace_id"] == continued_trace
    assert run["links"] == [[dead_trace, dead_span]]  # it resolves: one's file has it
    (again,) = [span for span in after if span["name"] == "attempt 1"]
    assert (again["span_id"], again["parent"]) == (continued_attempt, continued_span)
    assert run["attributes"]["gen_ai.conversation.id"] == session_id
    assert run["attributes"]["zett.run.resumed"] is True
    tools = {span["name"]: span for span in after if span["name"].startswith("execute_tool")}
    assert {
        tools["execute_tool save_note"]["parent"],
        tools["execute_tool ask_user"]["parent"],
    } == {continued_span}
    waits = {span["name"]: span for span in after if span["name"].startswith("wait ")}
    # The approval was answered while the run was paused: a child of the run that waited.
    assert (waits["wait approval"]["trace_id"], waits["wait approval"]["parent"]) == (
        dead_trace,
        dead_span,
    )
    assert waits["wait approval"]["attributes"]["zett.wait.outcome"] == "approved"
    # The question was asked again by the continuation and answered there.
    assert waits["wait ask_user"]["parent"] == continued_attempt
    assert waits["wait ask_user"]["attributes"]["zett.wait.outcome"] == "answered"


async def test_a_run_killed_mid_answer_links_to_its_first_attempt_which_was_exported(tmp_path):
    """Worker one is SIGKILLed while it streams an answer; worker two continues the same
    run. Its new ``invoke_agent`` span links to the span of the first attempt, which worker
    one had exported when the attempt began (its run span it never ended)."""
    files = {name: tmp_path / f"spans-{name}.jsonl" for name in ("one", "two")}
    async with two_workers(
        "otel-kill",
        tmp_path,
        each=(
            {"ZETT_TEST_SPAN_FILE": str(files["one"])},
            {"ZETT_TEST_SPAN_FILE": str(files["two"])},
        ),
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.03",
        ZETT_LEASE_SECONDS="2",
        ZETT_OTEL="1",
    ) as (one, two, _):
        session_id = str(uuid.uuid4())
        owner = await one.socket(session_id)
        survivor = await two.socket(session_id)
        await owner.send({"type": "user_message", "content": "tell me a long story"})
        before = await survivor.until(lambda f: (f.get("event") or {}).get("type") == "text_delta")
        request_id = next(f for f in before if f["type"] == "run_started")["request_id"]
        one.kill()
        await survivor.until(lambda f: (f.get("event") or {}).get("type") == "run_completed")
        await two.close_clients()
        two.stop()

    before_kill = read_span_file(files["one"])
    (first,) = [span for span in before_kill if span["name"] == "attempt 1"]
    assert first["attributes"]["zett.request.id"] == request_id
    assert not [span for span in before_kill if span["name"].startswith("invoke_agent")]
    after = read_span_file(files["two"])
    (run,) = [span for span in after if span["name"] == "invoke_agent demo"]
    assert run["links"] == [[first["trace_id"], first["span_id"]]]
    (second,) = [span for span in after if span["name"] == "attempt 2"]
    assert second["parent"] == run["span_id"]
    assert run["attributes"]["gen_ai.conversation.id"] == session_id


def scrape(server: DaphneProcess, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    return 0.0


async def test_metrics_of_two_workers_add_up_and_need_the_token(tmp_path):
    samples_dir = tmp_path / "prometheus"
    samples_dir.mkdir()
    async with two_workers(
        "metrics",
        tmp_path,
        ZETT_DEMO_PACE="0",
        ZETT_METRICS_TOKEN="scrape-me",
        PROMETHEUS_MULTIPROC_DIR=str(samples_dir),
    ) as (one, two, _):
        chats = [await one.socket(str(uuid.uuid4())), await two.socket(str(uuid.uuid4()))]
        for chat in chats:
            await chat.send({"type": "user_message", "content": "what is 1/3 + 1/6?"})
        for chat in chats:
            await chat.until(lambda f: (f.get("event") or {}).get("type") == "run_completed")
        for server in (one, two):
            status, text = await asyncio.to_thread(scrape, server, "scrape-me")
            assert status == 200
            assert sample(text, "zett_runs_total", assistant="demo", outcome="completed") == 2
            assert sample(text, "zett_sockets_open") == 2  # one open on each worker
            assert (
                sample(
                    text,
                    "zett_tokens_total",
                    assistant="demo",
                    model="zett-demo",
                    kind="output",
                )
                > 0
            )
        assert (await asyncio.to_thread(scrape, one, None))[0] == 401
        assert (await asyncio.to_thread(scrape, two, "guess"))[0] == 403
        one.kill()  # its runs still count; the socket it had open does not
        status, text = await asyncio.to_thread(scrape, two, "scrape-me")
        assert sample(text, "zett_runs_total", assistant="demo", outcome="completed") == 2
        assert sample(text, "zett_sockets_open") == 1
