"""Lease renewal of a worker that holds many runs, over a slow link to Redis.

A renewal round must not take longer than a lease lives: renewed one by one, a worker
holding a few hundred runs took seconds per round on a loaded machine, and the last leases
of a round expired before their turn (their runs were cut off and taken over by the other
worker). The link here adds a fixed delay to everything it carries, as a busy network or
a starved process does; the delay is the simulated latency, not a wait for something.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from agent_app.bus.redis import RedisBus
from tests.app.services import REDIS_URL, require_service

#: Runs one worker holds, the latency of each trip over the link, and the lease's life
#: (renewed every third of it): one by one, the round would take HELD trips, some 6 s,
#: twice a lease. The lease is long enough that the test's own reads, on a loaded
#: machine, fit in the third of it that the check leaves.
HELD = 300
LATENCY_S = 0.02
LEASE_SECONDS = 3.0


class Lost:
    """A bus listener that only records the leases the bus reports lost."""

    def __init__(self) -> None:
        self.sessions: list[str] = []
        self.changed = asyncio.Event()

    async def lease_lost(self, session_id: str, request_id: str) -> None:
        self.sessions.append(session_id)
        self.changed.set()

    async def session_frames(self, session_id: str, frames: list) -> None:
        raise AssertionError("no frames in this test")

    async def owner_request(self, session_id: str, message: dict) -> None:
        raise AssertionError("no requests in this test")


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            await asyncio.sleep(LATENCY_S)
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def slow_link(url: str) -> AsyncIterator[str]:
    """A TCP relay to the Redis of ``url`` that delays every chunk; yields its URL."""
    target = urlsplit(url)
    pumps: set[asyncio.Task[None]] = set()

    async def relay(client_reader, client_writer) -> None:
        server_reader, server_writer = await asyncio.open_connection(
            target.hostname, target.port or 6379
        )
        for reader, writer in ((client_reader, server_writer), (server_reader, client_writer)):
            task = asyncio.create_task(_pump(reader, writer))
            pumps.add(task)
            task.add_done_callback(pumps.discard)

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield urlunsplit(target._replace(netloc=f"127.0.0.1:{port}"))
    finally:
        server.close()
        for task in list(pumps):
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await server.wait_closed()


async def test_many_leases_are_renewed_within_a_round_over_a_slow_link(settings):
    url = require_service("Redis", REDIS_URL)
    settings.ZETT_LEASE_SECONDS = LEASE_SECONDS
    lost = Lost()
    sessions = [f"test-lease-{uuid.uuid4()}" for _ in range(HELD)]
    async with slow_link(url) as link:
        bus = RedisBus(lost, link, f"test-{uuid.uuid4()}")  # type: ignore[arg-type]
        try:
            leases = await asyncio.gather(*(bus.acquire(s, f"run-{s}") for s in sessions))
            assert all(lease is not None for lease in leases)
            # Another worker took the last one over: the next round must notice it, and
            # it is checked last, after every other lease of that round.
            taken = sessions[-1]
            await bus.redis.set(f"zett:lease:{taken}", "someone else")
            await asyncio.wait_for(lost.changed.wait(), timeout=30)
            ttls = await asyncio.gather(*(bus.ttl(s) for s in sessions[:-1]))
        finally:
            await bus.redis.delete(*(f"zett:lease:{s}" for s in sessions))
            await bus.close()
    assert lost.sessions == [taken]
    # Renewed in the round that found the lost one: more than two thirds of a lease left.
    assert min(ttls) > LEASE_SECONDS * 1000 * 2 / 3, sorted(ttls)[:5]
