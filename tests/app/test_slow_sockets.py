"""A socket that never reads costs the server a bounded buffer, not the whole answer.

A real daphne process (kernel send buffers kept small, so what a client does not read
stays in daphne's own transport buffer), a raw client with a tiny receive buffer that
never reads, and a long answer streamed to its chat: the idle socket is dropped once more
than ``ZETT_WS_SEND_BUFFER_BYTES`` wait for it, with an INFO line, while the reading tab
gets the whole answer. On a loaded machine the reading tab may fall behind too: it then
does what the page does with close code 4408, reconnects with ``after_seq``, and still gets
every frame exactly once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosedError

from tests.app.raw_socket import RawSocket
from tests.app.servers import Client, DaphneProcess, fresh_database, server_env
from tests.app.test_closing_sockets import TINY_BUFFER, ended, noisy_lines

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: The close code of a socket that left too much unread (the page reconnects at once).
FELL_BEHIND = 4408

CAP = 64 * 1024
#: The server's kernel send buffer per socket: enough for a reading tab to keep up with.
KERNEL_BUFFER = 64 * 1024


async def read_to_the_end(server: DaphneProcess, session_id: str, reader: Client):
    """The run's answer as a tab sees it, reconnecting with ``after_seq`` when dropped for
    falling behind: the frames it read, how often it reconnected, and the answer's text
    (from the ``session`` frame's history when the run ended while it was away)."""
    frames: list[dict] = []
    reconnects = 0
    while True:
        try:
            frames += await reader.until(ended)
            return frames, reconnects, streamed_text(frames)
        except ConnectionClosedError as closed:
            assert closed.rcvd is not None and closed.rcvd.code == FELL_BEHIND, closed
            last = max((frame["seq"] for frame in frames if "seq" in frame), default=0)
            reconnects += 1
            reader = await server.socket(session_id, after_seq=last)
            if reader.session_frame["active_request_id"] is None:  # ended meanwhile
                (answer,) = [m for m in reader.session_frame["history"] if m["role"] == "assistant"]
                return frames, reconnects, answer["content"]


def streamed_text(frames: list[dict]) -> str:
    return "".join(
        frame["event"].get("delta") or ""
        for frame in frames
        if frame["type"] == "agent_event" and frame["event"]["type"] == "text_delta"
    )


@pytest.fixture
def server(tmp_path) -> Iterator[DaphneProcess]:
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL="tests.app.llm_doubles:KeywordModel",
            ZETT_TEST_SEND_BUFFER=str(KERNEL_BUFFER),
            ZETT_WS_SEND_BUFFER_BYTES=str(CAP),
        )
        process = DaphneProcess("slow", env).start()
        try:
            yield process
        finally:
            process.stop()


async def test_a_socket_that_never_reads_is_dropped_past_its_buffer_cap(server):
    session_id = str(uuid.uuid4())
    reader = await server.socket(session_id)
    idle = await RawSocket.open(server.port, session_id, server.cookie, receive_buffer=TINY_BUFFER)
    try:
        await reader.send({"type": "user_message", "content": "a long answer"})
        frames, reconnects, text = await read_to_the_end(server, session_id, reader)
        seqs = [frame["seq"] for frame in frames if frame["type"] == "agent_event"]
        assert seqs == sorted(set(seqs)), "a frame was repeated across a reconnect"
        assert text.split() == ["word"] * 5000, "the reading tab missed part of the answer"
        # The answer's frames (~100 bytes a word) are many times the cap.
        # Reading now, the idle socket finds far less than the answer, then its end.
        received, how = await idle.drain_to_end()
        assert how == "closed", f"the server kept the socket open ({len(received)} bytes read)"
        assert len(received) < 2 * KERNEL_BUFFER + 2 * CAP  # the kernel's, and the cap
    finally:
        idle.close()
        await server.close_clients()
    server.stop()
    log = server.log()
    assert noisy_lines(log) == [], log[-4000:]
    # The idle socket's line, and one for each time the reading tab fell behind.
    assert sum("bytes unread" in line for line in log.splitlines()) == 1 + reconnects, log[-4000:]
