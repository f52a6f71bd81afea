"""Daphne's shutdown step as ``daphne_exit`` mends it: a connection that has no application
any more (an HTTP request that ended within the last second) does not keep the sockets'
applications from being cancelled, and the returned Deferred fires once they have ended.

The real server's exit (status 0, not SIGSEGV) is tested in
``tests/app/processes/test_deploy.py``; this runs the step on a stand-in for daphne's
``Server`` (its ``connections`` dict, as daphne keeps it).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agent_app.sessions.daphne_exit import cancel_applications


async def test_sockets_are_cancelled_past_a_connection_without_an_application():
    finished = asyncio.ensure_future(asyncio.sleep(0))
    await finished
    socket = asyncio.ensure_future(asyncio.Event().wait())
    cleaned_up = asyncio.Event()

    async def consumer() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned_up.set()

    other_socket = asyncio.ensure_future(consumer())
    await asyncio.sleep(0)  # both sockets' applications are waiting
    server = SimpleNamespace(
        connections={
            "request that ended": {"connected": 1.0, "disconnected": 2.0},
            "request being reaped": {"application_instance": finished, "connected": 1.0},
            "socket": {"application_instance": socket, "connected": 1.0},
            "other socket": {"application_instance": other_socket, "connected": 1.0},
        }
    )

    ended = cancel_applications(server)

    await asyncio.wait_for(ended.asFuture(asyncio.get_running_loop()), timeout=10)
    assert socket.cancelled() and other_socket.cancelled()
    assert cleaned_up.is_set()
