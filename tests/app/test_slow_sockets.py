"""A socket that never reads costs the server a bounded buffer, not the whole answer.

A real daphne process (kernel send buffers kept small, so what a client does not read
stays in daphne's own transport buffer), a raw client with a tiny receive buffer that
never reads, and a long answer streamed to its chat: the idle socket is dropped once more
than ``ZETT_WS_SEND_BUFFER_BYTES`` wait for it, with one INFO line, while the reading tab
gets the whole answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.app.raw_socket import RawSocket
from tests.app.servers import DaphneProcess, fresh_database, server_env
from tests.app.test_closing_sockets import TINY_BUFFER, ended, noisy_lines

pytestmark = pytest.mark.timeout(300)

CAP = 64 * 1024
#: The server's kernel send buffer per socket: enough for a reading tab to keep up with.
KERNEL_BUFFER = 64 * 1024


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
        frames = await reader.until(ended)
        assert frames[-1]["event"]["type"] == "run_completed", frames[-1]
        answer_bytes = sum(len(str(frame)) for frame in frames)
        assert answer_bytes > 8 * CAP  # the answer is far larger than the cap
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
    assert sum("bytes unread" in line for line in log.splitlines()) == 1, log[-4000:]
