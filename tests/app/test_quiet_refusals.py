"""What daphne is asked to serve and must refuse: quietly, in one INFO line, never a 500.

A real daphne process and raw handshakes: paths no route serves (an upper-case uuid, a uuid
without dashes, another path) are refused like a forbidden socket, and its log holds one
INFO line for each, no traceback.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from tests.app.raw_socket import handshake_status
from tests.app.servers import DaphneProcess, fresh_database, server_env
from tests.app.test_closing_sockets import noisy_lines

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def server(tmp_path) -> Iterator[DaphneProcess]:
    with fresh_database("sqlite", tmp_path) as url:
        process = DaphneProcess("refusals", server_env(url, ZETT_MODEL="demo")).start()
        try:
            yield process
        finally:
            process.stop()


async def test_an_unroutable_websocket_path_is_refused_quietly(server):
    session = uuid.uuid4()
    cookie = await asyncio.to_thread(server.browser_cookie)
    paths = [
        f"/ws/sessions/{str(session).upper()}/",
        f"/ws/sessions/{session.hex}/",
        "/ws/x/",
        "/ws/sessions/" + "a" * 5000 + "/",
    ]
    for path in paths:
        status = await handshake_status(server.port, path, cookie)
        assert status.split()[1] == "403", (path, status)
    # The route itself still works.
    ok = await handshake_status(server.port, f"/ws/sessions/{session}/", cookie)
    assert ok.split()[1] == "101", ok
    server.stop()
    log = server.log()
    assert noisy_lines(log) == [], log[-4000:]
    refused = [line for line in log.splitlines() if "unknown path" in line]
    assert len(refused) == len(paths), log[-4000:]
    assert max(len(line) for line in refused) < 400, refused  # a long path is shown cut


def raw_request(port: int, data: bytes) -> bytes:
    """Send ``data`` as it is; return all the server answered before closing."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


async def test_over_limit_requests_are_dropped_or_refused_before_the_application(server):
    """What docs/deploy.md says: daphne's HTTP parser (Twisted) ends them itself."""
    host = b"Host: 127.0.0.1\r\n"
    long_line = b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n" + host + b"\r\n"
    long_header = b"GET / HTTP/1.1\r\n" + host + b"X-A: " + b"a" * 20_000 + b"\r\n\r\n"
    headers = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(40))
    many_headers = b"GET / HTTP/1.1\r\n" + host + headers + b"\r\n"
    assert await asyncio.to_thread(raw_request, server.port, long_line) == b""
    assert await asyncio.to_thread(raw_request, server.port, long_header) == b""
    refused = await asyncio.to_thread(raw_request, server.port, many_headers)
    assert refused.startswith(b"HTTP/1.1 400 ")
    server.stop()
    assert noisy_lines(server.log()) == [], server.log()[-4000:]
