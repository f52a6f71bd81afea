"""Refusals that must come before any work, against a real daphne process.

- A re-attachment whose ``Last-Event-ID`` is past everything the thread sent is 400 at
  once, and holds no stream slot: after the run, the chat's every slot opens again.
- A body over the endpoint's limit by its ``Content-Length`` is answered 413 before it is
  read (an upload declaring 2 GB, an AG-UI POST declaring 1 GB, a 60 MB upload sent whole:
  the server's memory does not grow by it), a chunked one once it grows past the limit;
  a body that stalls is answered 408.
- Requests without credentials (the JSON API, health, metrics) are answered without a
  session: no ``Set-Cookie``, no new row in the session table.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.app.processes.test_agui_processes import headers, make_token
from tests.app.servers import DaphneProcess, fresh_database, migrate, server_env
from tests.app.sse_client import collect, open_request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MODEL = "tests.app.security_models:wordy"
#: Slots of one chat (streams and sockets) on the test server.
CHAT_SLOTS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[DaphneProcess, str, str]]:
    """A daphne process, a token of a user of it, and the path of its SQLite database."""
    tmp_path = tmp_path_factory.mktemp("refusals")
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL=MODEL,
            ZETT_REQUEST_BODY_TIMEOUT="1.5",
            ZETT_WS_MAX_SOCKETS_PER_SESSION=str(CHAT_SLOTS),
        )
        migrate(env)
        process = DaphneProcess("refusals", env, migrate=False).start()
        try:
            yield process, make_token(env, "ada"), url.removeprefix("sqlite:///")
        finally:
            process.stop()


async def start_run(server: DaphneProcess, secret: str, thread_id: str, text: str):
    body = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "state": {},
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    response = await open_request(
        server.port, "POST", "/api/ag-ui/demo/", headers(secret), json.dumps(body).encode()
    )
    assert response.status == 200
    return response


async def reattach(server: DaphneProcess, secret: str, thread_id: str, last_id: int):
    path = f"/api/ag-ui/threads/{thread_id}/events"
    return await open_request(
        server.port, "GET", path, headers(secret, **{"Last-Event-ID": str(last_id)})
    )


async def test_a_reattach_past_the_run_is_refused_at_once_and_holds_no_slot(server):
    process, secret, _ = server
    thread_id = str(uuid.uuid4())
    posted = await start_run(process, secret, thread_id, "slow 150 0.02")
    seen = await collect(posted, until=lambda e: e.type == "TEXT_MESSAGE_CONTENT")

    began = time.monotonic()
    forged = await reattach(process, secret, thread_id, 1_000_000)
    answer = await forged.json()
    assert (forged.status, answer["code"]) == (400, "bad_input"), answer
    assert time.monotonic() - began < 5
    assert str(seen[-1].id) in answer["message"] or "past" in answer["message"]

    # A true id: the stream goes on from there and ends with the run.
    honest = await reattach(process, secret, thread_id, seen[-1].id)
    assert honest.status == 200
    rest = await collect(honest)
    assert rest[-1].type == "RUN_FINISHED"
    await collect(posted)

    # Every slot of the chat is free again: a new run's stream and two re-attachments.
    again = await start_run(process, secret, thread_id, "slow 40 0.05")
    first = await collect(again, until=lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    streams = [await reattach(process, secret, thread_id, first[-1].id) for _ in range(2)]
    assert [stream.status for stream in streams] == [200, 200]
    for stream in [again, *streams]:
        assert (await collect(stream))[-1].type == "RUN_FINISHED"
    assert "Traceback" not in process.log()


async def status_line_of(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status and the body of a response (``Connection: close``)."""
    data = await asyncio.wait_for(reader.read(), 20)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def declare_and_send(port: int, target: str, declared: int, sent: int, secret: str):
    """A POST declaring ``declared`` bytes that sends ``sent`` of them; the seconds until
    its answer, and the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Authorization: Bearer {secret}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {declared}\r\n\r\n"
    )
    began = time.monotonic()
    writer.write(head.encode() + b"x" * sent)
    await writer.drain()
    try:
        status, body = await status_line_of(reader)
    finally:
        writer.close()
    return time.monotonic() - began, status, json.loads(body)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_bodies_over_the_limit_are_refused_before_they_are_read(server):
    process, secret, _ = server
    upload = f"/s/{uuid.uuid4()}/attachments/"
    took, status, body = await declare_and_send(
        process.port, upload, 2 * 1024**3, 64 * 1024, secret
    )
    assert (status, body["code"]) == (413, "too_large") and took < 3, (took, body)
    took, status, body = await declare_and_send(
        process.port, "/api/ag-ui/demo/", 1024**3, 1024**2, secret
    )
    assert (status, body["code"]) == (413, "too_large") and took < 3, (took, body)
    # A body that stops coming: refused after ZETT_REQUEST_BODY_TIMEOUT (1.5 s here).
    took, status, body = await declare_and_send(process.port, "/api/ag-ui/demo/", 1000, 10, secret)
    assert (status, body["code"]) == (408, "timeout") and 1 < took < 10, (took, body)
    # Within the limit, the view reads it as usual.
    took, status, body = await declare_and_send(process.port, "/api/ag-ui/demo/", 9, 9, secret)
    assert (status, body["code"]) == (400, "bad_json")
    assert "Traceback" not in process.log()


async def test_a_60_mb_upload_is_refused_without_the_server_holding_it(server):
    process, secret, _ = server
    before = rss_kib(process.process.pid)
    size = 60 * 1024 * 1024
    reader, writer = await asyncio.open_connection("127.0.0.1", process.port)
    head = (
        f"POST /s/{uuid.uuid4()}/attachments/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {secret}\r\n"
        "Content-Type: multipart/form-data; boundary=zz\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    writer.write(head.encode())
    answer = asyncio.create_task(status_line_of(reader))
    sent = 0
    piece = b"z" * (256 * 1024)
    try:
        while sent < size and not answer.done():
            writer.write(piece)
            await writer.drain()
            sent += len(piece)
    except ConnectionError:
        pass
    status, body = await answer
    writer.close()
    assert (status, json.loads(body)["code"]) == (413, "too_large")
    grown = rss_kib(process.process.pid) - before
    assert grown < 10 * 1024, f"the server grew by {grown} KiB"


async def test_a_chunked_body_is_refused_once_it_grows_past_the_limit(server):
    process, secret, _ = server
    reader, writer = await asyncio.open_connection("127.0.0.1", process.port)
    size = 8 * 1024 * 1024  # one chunk, over the API's 2.5 MB
    writer.write(
        (
            "POST /api/ag-ui/demo/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Authorization: Bearer {secret}\r\nTransfer-Encoding: chunked\r\n\r\n"
            f"{size:x}\r\n"
        ).encode()
    )
    answer = asyncio.create_task(status_line_of(reader))
    sent, piece = 0, b"c" * (64 * 1024)
    try:
        while sent < size and not answer.done():
            writer.write(piece)
            await writer.drain()
            sent += len(piece)
    except ConnectionError:
        pass
    status, body = await answer
    writer.close()
    assert (status, json.loads(body)["code"]) == (413, "too_large")


def session_rows(database: str) -> int:
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT COUNT(*) FROM django_session").fetchone()[0]


async def test_requests_without_credentials_write_no_session(server):
    process, _, database = server
    before = session_rows(database)
    for _ in range(50):
        response = await open_request(process.port, "GET", "/api/chats/")
        assert response.status == 401
        assert "set-cookie" not in response.headers
        assert (await response.json())["code"] == "unauthorized"
    for path in ("/healthz", "/metrics"):
        response = await open_request(process.port, "GET", path)
        assert response.status in (200, 401, 403, 404)
        assert "set-cookie" not in response.headers
        await response.close()
    assert session_rows(database) == before
