"""A reply is never lost to the socket that sent it closing, nor to a crash right after it.

Real daphne processes, a raw client that sends an approval and its close frame in one write
(a tab closed right after the click: the server's answer to it fails, before the server
has heard of the close), and a server that SIGKILLs itself between claiming a paused run's
wait and starting its continuation. Whatever happens to the replier, the approved tool runs
exactly once, the audit row holds its verdict, the other tabs hear ``reply_accepted``, and
the log stays quiet (nothing above INFO).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator

import pytest

from tests.app.raw_socket import RawSocket, close_frame, text_frame
from tests.app.servers import DaphneProcess, fresh_database, server_env

pytestmark = pytest.mark.timeout(300)

NOTE_REQUEST = "save a note: buy milk"
#: Long messages before it: a joining socket's ``session`` frame is large, so a socket that
#: reads nothing falls behind at once (the server's transport keeps what the kernel cannot).
FILLER = "Tell me about this. " + "lorem ipsum " * 2500
#: A receive buffer this small holds next to nothing of those frames.
TINY_BUFFER = 4096


def is_custom(name: str):
    return lambda f: (f.get("event") or {}).get("type") == "custom" and f["event"]["name"] == name


def ended(frame: dict) -> bool:
    event = frame.get("event") or {}
    return event.get("type") == "run_completed" or frame["type"] in ("run_failed", "error")


def approval(tool_call_id: str) -> dict:
    return {
        "type": "external_event",
        "name": "approval_response",
        "payload": {"tool_call_id": tool_call_id, "approved": True},
    }


def query(database: str, sql: str) -> list[tuple]:
    with sqlite3.connect(database.removeprefix("sqlite:///")) as connection:
        return connection.execute(sql).fetchall()


def noisy_lines(log: str) -> list[str]:
    words = ("Traceback", "WARNING", "ERROR", "CRITICAL", "Exception")
    return [line for line in log.splitlines() if any(word in line for word in words)]


@pytest.fixture
def database(tmp_path) -> Iterator[str]:
    with fresh_database("sqlite", tmp_path) as url:
        yield url


@pytest.fixture
def server(database) -> Iterator[DaphneProcess]:
    process = DaphneProcess(
        "closing",
        server_env(
            database, ZETT_MODEL="demo", ZETT_DEMO_PACE="0", ZETT_TEST_SEND_BUFFER=str(TINY_BUFFER)
        ),
    ).start()
    try:
        yield process
    finally:
        process.stop()


async def long_history(client) -> None:
    for _ in range(4):
        await client.send({"type": "user_message", "content": FILLER})
        frames = await client.until(ended)
        assert frames[-1]["event"]["type"] == "run_completed", frames[-1]


async def pause_a_note_approval(server: DaphneProcess, session_id: str) -> str:
    """Ask for a note, kill the server while its approval waits, restart: the run is paused."""
    client = await server.socket(session_id)
    await long_history(client)
    await client.send({"type": "user_message", "content": NOTE_REQUEST})
    asked = (await client.until(is_custom("approval_requested")))[-1]["event"]["payload"]
    server.kill()
    server.clients.clear()
    server.start()
    return asked["tool_call_id"]


async def test_an_approval_whose_tab_closes_at_once_still_continues_the_paused_run(
    server, database
):
    session_id = str(uuid.uuid4())
    call_id = await pause_a_note_approval(server, session_id)
    watcher = await server.socket(session_id)
    assert [item["tool_call_id"] for item in watcher.session_frame["pending"]] == [call_id]
    replier = await RawSocket.open(
        server.port, session_id, server.cookie, receive_buffer=TINY_BUFFER
    )
    try:
        await replier.first_byte()  # its large session frame is on its way, mostly queued
        await replier.send_frames(text_frame(approval(call_id)), close_frame())
        accepted = await watcher.until(lambda f: f["type"] == "reply_accepted")
        assert accepted[-1]["correlation_id"] == call_id
        started = await watcher.until(lambda f: f["type"] == "run_started")
        assert started[-1]["kind"] == "resume"
        frames = await watcher.until(ended)
        assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
    finally:
        replier.close()
        await server.close_clients()
    assert query(database, "SELECT COUNT(*) FROM agent_app_note") == [(1,)]
    assert query(database, "SELECT accepted_by FROM agent_app_externaleventrecord") == [
        ('["ConfirmationExtension"]',)
    ]
    server.stop()
    assert noisy_lines(server.log()) == [], server.log()[-4000:]


async def test_an_approval_whose_tab_closes_at_once_is_audited_and_announced_on_a_live_run(
    server, database
):
    session_id = str(uuid.uuid4())
    watcher = await server.socket(session_id)
    await long_history(watcher)
    await watcher.send({"type": "user_message", "content": NOTE_REQUEST})
    asked = (await watcher.until(is_custom("approval_requested")))[-1]["event"]["payload"]
    replier = await RawSocket.open(
        server.port, session_id, server.cookie, receive_buffer=TINY_BUFFER
    )
    try:
        await replier.first_byte()  # the run's large frames are on their way, mostly queued
        await replier.send_frames(text_frame(approval(asked["tool_call_id"])), close_frame())
        frames = await watcher.until(ended)
        assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
        assert [f["correlation_id"] for f in frames if f["type"] == "reply_accepted"] == [
            asked["tool_call_id"]
        ]
    finally:
        replier.close()
        await server.close_clients()
    assert query(database, "SELECT COUNT(*) FROM agent_app_note") == [(1,)]
    assert query(database, "SELECT accepted_by FROM agent_app_externaleventrecord") == [
        ('["ConfirmationExtension"]',)
    ]
    server.stop()
    assert noisy_lines(server.log()) == [], server.log()[-4000:]


async def test_a_crash_between_claiming_the_wait_and_continuing_loses_no_approval(server, database):
    session_id = str(uuid.uuid4())
    call_id = await pause_a_note_approval(server, session_id)
    server.stop()
    server.env = {**server.env, "ZETT_TEST_DIE_AFTER_CLAIM": "1"}
    server.start()
    replier = await server.socket(session_id)
    await replier.send(approval(call_id))
    assert server.process is not None
    assert await _exit_status(server) == -9  # it died right after the claim committed
    assert query(database, "SELECT status FROM agent_app_replywait") == [("answered",)]
    server.clients.clear()
    server.env = {k: v for k, v in server.env.items() if k != "ZETT_TEST_DIE_AFTER_CLAIM"}
    server.start()
    try:
        # The next socket finds the paused run with every answer known: it goes on, once.
        again = await server.socket(session_id)
        assert again.session_frame["pending"] == []
        started = await again.until(lambda f: f["type"] == "run_started")
        assert started[-1]["kind"] == "resume"
        frames = await again.until(ended)
        assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
        second = await server.socket(session_id)
        assert [run["status"] for run in second.session_frame["runs"]][-2:] == [
            "resumed",
            "completed",
        ]
    finally:
        await server.close_clients()
    assert query(database, "SELECT COUNT(*) FROM agent_app_note") == [(1,)]
    assert query(database, "SELECT COUNT(*) FROM agent_app_chatrun") == [(6,)]


async def _exit_status(server: DaphneProcess) -> int | None:
    import asyncio

    assert server.process is not None
    return await asyncio.to_thread(server.process.wait, 60)


async def test_frames_answered_to_a_closing_socket_log_nothing_above_info(server, database):
    session_id = str(uuid.uuid4())
    client = await server.socket(session_id)
    await long_history(client)
    closing = await RawSocket.open(
        server.port, session_id, server.cookie, receive_buffer=TINY_BUFFER
    )
    try:
        await closing.first_byte()  # its large session frame is on its way, mostly queued
        answered = [
            {"type": "history_before", "position": 10**6, "limit": 50},  # history_page
            {"type": "cancel"},  # error not_running
            {"type": "ping"},  # pong
            approval("no-such-call"),  # external_event_result, audited
        ]
        await closing.send_frames(*(text_frame(frame) for frame in answered), close_frame())
        # Frames are handled in order: once the last one's verdict is audited, all were.
        verdict = "SELECT accepted_by FROM agent_app_externaleventrecord"
        assert await until_true(lambda: query(database, verdict) == [("[]",)])
    finally:
        closing.close()
        await server.close_clients()
    server.stop()
    assert noisy_lines(server.log()) == [], server.log()[-4000:]


async def until_true(check, within: float = 30) -> bool:
    """Whether ``check()`` holds within ``within`` seconds (looked at every 20 ms)."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + within
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True
