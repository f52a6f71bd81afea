"""A revoked or expired API token ends what it opened, against real daphne processes.

A program holds a socket and two event streams (a run's POST stream and a re-attachment)
opened with its token; ``manage.py zett_token revoke`` runs in a process of its own. By the
time it has exited the socket is told ``forbidden`` and closed with 4401 and both streams
end with ``CUSTOM`` ``zett.stream_closed``; the run itself goes on (the chat's, not the
token's), and another token's socket stays open. A token that expires (its row updated by
hand) closes its socket within a second of the commit; with two workers on PostgreSQL and
Redis, a revocation written to the database closes the token's sockets on both within a
second.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
import websockets

from tests.app.processes.test_agui_processes import make_token
from tests.app.processes.test_request_refusals import MODEL, reattach, start_run
from tests.app.servers import (
    ROOT,
    DaphneProcess,
    fresh_database,
    migrate,
    server_env,
    two_workers,
)
from tests.app.sse_client import collect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: The promise, and room for a shared machine's scheduling.
WITHIN_SECONDS = 1.0


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[DaphneProcess, dict[str, str], str]]:
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_MODEL=MODEL)
        migrate(env)
        process = DaphneProcess("tokens", env, migrate=False).start()
        try:
            yield process, env, url.removeprefix("sqlite:///")
        finally:
            process.stop()


async def token_socket(server: DaphneProcess, secret: str):
    connection = await websockets.connect(
        server.ws_url(str(uuid.uuid4())),
        additional_headers={"Authorization": f"Bearer {secret}"},
        open_timeout=30,
    )
    assert json.loads(await asyncio.wait_for(connection.recv(), 30))["type"] == "session"
    return connection


async def closed_with(connection) -> tuple[int | None, list[dict]]:
    """The frames a socket gets until it closes, and its close code."""
    frames = []
    try:
        while True:
            frames.append(json.loads(await asyncio.wait_for(connection.recv(), 30)))
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None, frames


def revoke(env: dict[str, str], token_id: int) -> float:
    """``zett_token revoke`` in a process of its own; the time it returned."""
    subprocess.run(
        [sys.executable, "manage.py", "zett_token", "revoke", str(token_id)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return time.monotonic()


def newest_token(query) -> int:
    return query("SELECT MAX(id) FROM agent_app_apitoken")[0][0]


def sqlite_query(database: str):
    def query(sql: str, *args):
        with sqlite3.connect(database) as connection:
            return connection.execute(sql, args).fetchall()

    return query


async def test_revoking_a_token_closes_its_socket_and_streams_within_a_second(server):
    process, env, database = server
    query = sqlite_query(database)
    secret = await asyncio.to_thread(make_token, env, "ada")
    token_id = newest_token(query)
    other = await asyncio.to_thread(make_token, env, "bob")

    # The streams first: the first connection of a token starts the process's watch (in
    # a context of its own, not the request's).
    thread_id = str(uuid.uuid4())
    posted = await start_run(process, secret, thread_id, "slow 600 0.02")
    first = await collect(posted, until=lambda e: e.type == "TEXT_MESSAGE_CONTENT")
    again = await reattach(process, secret, thread_id, first[-1].id)
    assert again.status == 200
    socket = await token_socket(process, secret)
    bystander = await token_socket(process, other)

    socket_end = asyncio.create_task(closed_with(socket))
    streams_end = [asyncio.create_task(collect(stream)) for stream in (posted, again)]
    revoked_at = await asyncio.to_thread(revoke, env, token_id)
    code, frames = await socket_end
    socket_took = time.monotonic() - revoked_at
    endings = [await ending for ending in streams_end]
    streams_took = time.monotonic() - revoked_at

    assert code == 4401
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "forbidden"
    for events in endings:
        assert events[-1].type == "CUSTOM" and events[-1].data["name"] == "zett.stream_closed"
        assert events[-1].data["value"]["code"] == "unauthorized"
    assert socket_took < WITHIN_SECONDS and streams_took < WITHIN_SECONDS, (
        socket_took,
        streams_took,
    )
    # The token is refused from now on; the other token's socket is untouched.
    refused = await reattach(process, secret, thread_id, 0)
    assert refused.status == 401
    await refused.close()
    await bystander.send(json.dumps({"type": "ping"}))
    assert json.loads(await asyncio.wait_for(bystander.recv(), 30))["type"] == "pong"
    await bystander.close()
    assert "Traceback" not in process.log()


async def test_an_expiring_token_closes_its_socket(server):
    process, env, database = server
    query = sqlite_query(database)
    secret = await asyncio.to_thread(make_token, env, "cleo")
    token_id = newest_token(query)
    socket = await token_socket(process, secret)
    ending = asyncio.create_task(closed_with(socket))
    query(
        "UPDATE agent_app_apitoken SET expires_at = datetime('now', '-1 second') WHERE id = ?",
        token_id,
    )
    expired_at = time.monotonic()
    code, _ = await ending
    took = time.monotonic() - expired_at
    print(f"expired: the socket closed after {took:.2f} s")
    assert code == 4401 and took < WITHIN_SECONDS
    assert "Traceback" not in process.log()


async def test_a_revocation_closes_the_tokens_sockets_on_every_worker(tmp_path):
    async with two_workers("tokens", tmp_path, ZETT_MODEL=MODEL) as (one, two, url):
        env = server_env(url)
        secret = await asyncio.to_thread(make_token, env, "ada")
        with psycopg.connect(url) as connection:
            (token_id,) = connection.execute("SELECT MAX(id) FROM agent_app_apitoken").fetchone()
        sockets = [await token_socket(worker, secret) for worker in (one, two)]
        endings = [asyncio.create_task(closed_with(socket)) for socket in sockets]
        # Revoked the way the admin does it, timed from the commit.
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(
                "UPDATE agent_app_apitoken SET revoked = true WHERE id = %s", (token_id,)
            )
        revoked_at = time.monotonic()
        codes = [(await ending)[0] for ending in endings]
        took = time.monotonic() - revoked_at
        print(f"revoked: the sockets on both workers closed after {took:.2f} s")
        assert codes == [4401, 4401]
        assert took < WITHIN_SECONDS
        assert "Traceback" not in one.log() + two.log()
