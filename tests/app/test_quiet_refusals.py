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
