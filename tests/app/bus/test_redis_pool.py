"""Redis under a burst: more commands in flight than a pool holds connections
(agent_app.bus.pool), for the frame budgets and for the cluster's own client."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agent_app.bus.pool import MAX_CONNECTIONS
from agent_app.bus.redis import RedisBus
from agent_app.guard.limits import REDIS_PREFIX, Limiter
from tests.app.services import REDIS_URL, require_service

#: Well over redis-py's default of 100 connections, and over ours.
BURST = 300


async def test_a_burst_of_frames_is_budgeted_in_redis_none_falls_back(settings, caplog):
    settings.ZETT_LIMITS_REDIS_URL = require_service("Redis", REDIS_URL)
    settings.ZETT_WS_RATE_LIMIT = {"burst": 1000, "per_second": 0.001}
    person = f"browser:test-{uuid.uuid4()}"
    limiter = Limiter()
    try:
        verdicts = await asyncio.gather(*(limiter.take_frame(person) for _ in range(BURST)))
        tokens = float(await limiter._redis.hget(REDIS_PREFIX + person, "tokens"))
        pool = limiter._redis.connection_pool
        opened = len(pool._available_connections) + len(pool._in_use_connections)
    finally:
        await limiter._redis.delete(REDIS_PREFIX + person)
        await limiter.aclose()
    assert verdicts == [True] * BURST
    assert "fall back" not in caplog.text
    assert tokens == pytest.approx(1000 - BURST, abs=0.5)  # every frame was counted in Redis
    assert opened <= MAX_CONNECTIONS


async def test_the_cluster_client_queues_commands_beyond_its_connections():
    cluster = RedisBus(None, require_service("Redis", REDIS_URL), f"test-{uuid.uuid4()}")  # type: ignore[arg-type]
    key = f"zett:test:{uuid.uuid4()}"
    try:
        counts = await asyncio.gather(*(cluster.redis.incr(key) for _ in range(BURST)))
        pool = cluster.redis.connection_pool
        opened = len(pool._available_connections) + len(pool._in_use_connections)
        await cluster.redis.delete(key)
    finally:
        await cluster.redis.aclose()
    assert sorted(counts) == list(range(1, BURST + 1))
    assert opened <= MAX_CONNECTIONS
