"""The AG-UI endpoints over real daphne processes: one worker, then two on Redis+PostgreSQL.

A POST streams its run as it is produced (the client drops the link mid-answer and the run
is still going); the client re-attaches on the other worker with ``Last-Event-ID`` and
gets the rest, nothing lost, nothing repeated; a browser's socket and an SSE client watch
one run; an approval interrupt is resumed after a SIGKILL of the worker that asked it;
bad requests get the documented errors. ``ag-ui-validate`` checks the streams live (its
timing and keep-alive rules too) through ``tests.app.sse_client.fetcher``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from ag_ui_validate.transport import TransportOptions, validate_endpoint

from agent_app.agui.encoder import RunEncoder
from tests.app.agui_support import check_events, resume_input, run_input, validate_stream
from tests.app.servers import (
    ROOT,
    DaphneProcess,
    fresh_database,
    migrate,
    server_env,
    two_workers,
)
from tests.app.sse_client import collect, fetcher, open_request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LEASE_SECONDS = "2"


def make_token(env: dict[str, str], username: str) -> str:
    """A user of the server's database and the secret of a token of theirs."""
    create = (
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({username!r}, password='unused-pw')"
    )
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "shell", "-c", create], cwd=ROOT, env=env, check=True, timeout=120)
    done = subprocess.run(
        [*manage, "zett_token", "create", username],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def headers(secret: str, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/json", **more}


async def post(server: DaphneProcess, secret: str, body: dict):
    return await open_request(
        server.port, "POST", "/api/ag-ui/demo/", headers(secret), json.dumps(body).encode()
    )


def text_of(events) -> str:
    return "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")


@pytest.fixture
def single(tmp_path) -> Iterator[tuple[DaphneProcess, str]]:
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.01")
        migrate(env)
        server = DaphneProcess("agui-single", env, migrate=False).start()
        try:
            yield server, make_token(env, "ada")
        finally:
            server.stop()


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess, str]]:
    async with two_workers(
        "agui", tmp_path, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.03", ZETT_LEASE_SECONDS=LEASE_SECONDS
    ) as (one, two, database_url):
        yield one, two, make_token(server_env(database_url), "ada")


async def test_a_post_streams_as_produced_and_passes_the_live_validator(single):
    server, secret = single
    thread_id = str(uuid.uuid4())
    options = TransportOptions(
        headers={"Authorization": f"Bearer {secret}"},
        input=run_input(thread_id, "what is 1/3 + 1/6?"),
        fetch_impl=fetcher(server.port),
        timeout_ms=60_000,
    )
    result = await validate_endpoint(f"http://127.0.0.1:{server.port}/api/ag-ui/demo/", options)
    findings = [(d.rule, d.message) for d in result.report.diagnostics if d.severity == "error"]
    assert result.status == 200 and result.event_count > 5 and not findings, findings

    # Bad input, over the real server.
    async def refusal(response) -> tuple[int, str]:
        return response.status, (await response.json())["code"]

    malformed = await open_request(
        server.port, "POST", "/api/ag-ui/demo/", headers(secret), b"{not json"
    )
    assert await refusal(malformed) == (400, "bad_json")
    unknown = await open_request(
        server.port,
        "POST",
        "/api/ag-ui/nobody/",
        headers(secret),
        json.dumps(run_input(str(uuid.uuid4()))).encode(),
    )
    assert await refusal(unknown) == (404, "unknown_assistant")
    no_token = await open_request(
        server.port, "GET", f"/api/ag-ui/threads/{thread_id}/events", {"Authorization": "Bearer x"}
    )
    assert await refusal(no_token) == (401, "unauthorized")


async def test_a_dropped_stream_re_attaches_on_the_other_worker(cluster):
    one, two, secret = cluster
    thread_id = str(uuid.uuid4())
    first = await post(one, secret, run_input(thread_id, "write a long answer"))
    assert first.status == 200
    assert first.headers["content-type"] == "text/event-stream"
    seen = []
    async for event in first.events():
        seen.append(event)
        if sum(e.type == "TEXT_MESSAGE_CONTENT" for e in seen) >= 6:
            break
    first.abort()  # the link drops mid-answer; the run goes on
    last_id = max(e.id for e in seen if e.id is not None)
    again = await open_request(
        two.port,
        "GET",
        f"/api/ag-ui/threads/{thread_id}/events",
        headers(secret, **{"Last-Event-ID": str(last_id)}),
    )
    assert again.status == 200
    rest = await collect(again)
    # It was streamed as produced: the run was still going when the link dropped.
    assert rest[0].type == "RUN_STARTED" and rest[0].data["runId"] == seen[0].data["runId"]
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["outcome"] == {"type": "success"}
    ids = [e.id for e in seen + rest if e.id is not None]
    assert ids == sorted(set(ids))
    check_events(seen + rest)
    await validate_stream(again.text())
    # Nothing lost, nothing repeated: the text is the answer zett stored.
    history = await open_request(
        one.port, "GET", f"/api/chats/{thread_id}/messages/", headers(secret)
    )
    stored = (await history.json())["messages"][-1]["content"]
    assert text_of(seen) + text_of(rest) == stored


async def test_one_run_is_watched_by_a_socket_and_an_sse_client(cluster):
    one, two, secret = cluster
    thread_id = str(uuid.uuid4())
    socket = await two.socket(thread_id, token=secret)  # the page, on the other worker
    stream = await post(one, secret, run_input(thread_id, "what is 1/3 + 1/6?"))
    events = await collect(stream)
    frames = await socket.until(lambda f: (f.get("event") or {}).get("type") == "run_completed")
    numbered = [frame for frame in frames if "seq" in frame]
    assert numbered[0]["type"] == "run_started"
    assert numbered[0]["request_id"] == events[0].data["runId"]
    encoded = RunEncoder(thread_id).encode_all(numbered)
    # A new run's stream also opens with the thread's MESSAGES_SNAPSHOT (no id: it is read
    # from the database, not a frame of the run), right after RUN_STARTED.
    assert events[1].type == "MESSAGES_SNAPSHOT" and events[1].id is None
    streamed = [event for event in events if event.type != "MESSAGES_SNAPSHOT"]
    assert [(e.id, e.data) for e in encoded] == [(e.id, e.data) for e in streamed]
    await validate_stream(stream.text())

    # And the other way round: a run started on the page, followed over SSE elsewhere.
    await socket.send({"type": "user_message", "content": "write a long answer"})
    started = await socket.until(lambda f: f["type"] == "run_started")
    follow = await open_request(
        one.port,
        "GET",
        f"/api/ag-ui/threads/{thread_id}/events",
        headers(secret, **{"Last-Event-ID": str(started[-1]["seq"] - 1)}),
    )
    followed = await collect(follow)
    frames = started + await socket.until(
        lambda f: (f.get("event") or {}).get("type") == "run_completed"
    )
    encoded = RunEncoder(thread_id).encode_all([f for f in frames if "seq" in f])
    assert [(e.id, e.data) for e in encoded] == [(e.id, e.data) for e in followed]
    check_events(followed)


async def test_an_approval_interrupt_is_resumed_after_the_worker_was_killed(cluster):
    one, two, secret = cluster
    thread_id = str(uuid.uuid4())
    asked = await collect(await post(one, secret, run_input(thread_id, "save a note: buy milk")))
    finished = asked[-1]
    assert finished.type == "RUN_FINISHED"
    (interrupt,) = finished.data["outcome"]["interrupts"]
    assert interrupt["reason"] == "confirmation"
    run_id = finished.data["runId"]

    one.kill()  # SIGKILL while the approval waits
    # Once the dead worker's lease runs out, the other worker settles the run as paused.
    watcher = await two.socket(thread_id, token=secret)
    if not watcher.session_frame["pending"]:
        await watcher.until(lambda f: f["type"] == "run_paused")
    resume = resume_input(thread_id, interrupt["id"], {"approved": True})
    resumed = await post(two, secret, resume)
    assert resumed.status == 200
    rest = await collect(resumed)
    started = rest[0]
    kinds = [e.data.get("name", e.type) for e in rest]
    assert started.type == "RUN_STARTED" and started.data["parentRunId"] == run_id, rest
    assert "TOOL_CALL_RESULT" in kinds, rest
    result = next(e for e in rest if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == interrupt["toolCallId"]
    assert result.data["metadata"]["zett"]["reply"] == {"kind": "approval", "approved": True}
    assert rest[-1].type == "RUN_FINISHED" and rest[-1].data["outcome"] == {"type": "success"}
    check_events(rest)
    await validate_stream(resumed.text(), allow={"AGUI207"})
    # Answered exactly once: the same resume again is refused in the stream.
    again = await collect(await post(two, secret, resume))
    assert [e.type for e in again] == ["RUN_STARTED", "RUN_ERROR"]
    assert again[-1].data["code"] == "interrupt_answered"
