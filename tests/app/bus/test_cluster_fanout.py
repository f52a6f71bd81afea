"""The owner's fan-out (``RedisBus._flush``): frames mirrored to the replay stream and
published to the session's group in one Redis transaction, readable by any worker."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

from agent_app.bus.redis import RedisBus, group_name
from tests.app.services import REDIS_URL, require_service
from zett_site.settings import REDIS_SOCKET_TIMEOUT


def _frame(seq: int, marker: str = "") -> list:
    text = json.dumps({"type": "agent_event", "seq": seq, "event": {"type": "text_delta"}})
    return [seq, seq - 1, text, marker, "req-1"]


@pytest.fixture
async def cluster():
    url = require_service("Redis", REDIS_URL)
    cluster = RedisBus(None, url, f"test-{uuid.uuid4()}")  # type: ignore[arg-type]
    yield cluster
    await cluster.redis.aclose()


@pytest.mark.parametrize("backend", ["redis-pubsub", "in-memory"])
async def test_frames_reach_the_group_and_the_replay_stream_in_order(cluster, backend):
    if backend == "redis-pubsub":
        address = {"address": REDIS_URL, "socket_timeout": REDIS_SOCKET_TIMEOUT}
        layer = RedisPubSubChannelLayer(hosts=[address])
    else:
        layer = InMemoryChannelLayer()
    cluster.layer = layer
    session_id = str(uuid.uuid4())
    # The pub/sub layer's messages go out in the stream's transaction; others after it.
    in_transaction = cluster._group_channel(group_name(session_id)) is not None
    assert in_transaction == (backend == "redis-pubsub")
    other_worker = await layer.new_channel()
    await layer.group_add(group_name(session_id), other_worker)
    try:
        frames = [_frame(1, "start"), *(_frame(seq) for seq in range(2, 6))]
        for frame in frames:
            cluster.publish(session_id, frame)
        received = []
        while len(received) < len(frames):
            message = await asyncio.wait_for(layer.receive(other_worker), 10)
            # Whatever a worker hears of is in the replay stream already.
            stored = await cluster.replay(session_id, "req-1", None)
            assert len(stored) >= len(received) + len(message["frames"])
            assert message["type"] == "zett.frames"
            assert message["session"] == session_id and message["worker"] == cluster.worker
            received += message["frames"]
        await cluster.flushed(session_id)
        assert received == frames
        assert [seq for seq, _ in await cluster.replay(session_id, "req-1", 2)] == [3, 4, 5]
    finally:
        await layer.group_discard(group_name(session_id), other_worker)
        await cluster.redis.delete(f"zett:replay:{session_id}")
        await layer.flush()


async def test_closing_a_worker_on_the_core_layer_leaves_the_others_groups():
    """``RedisChannelLayer.flush`` deletes every key of the layer: a stopping worker must only
    close its connections, or every other worker loses its groups and queued messages."""
    from channels_redis.core import RedisChannelLayer

    url = require_service("Redis", REDIS_URL)
    hosts = [{"address": url, "socket_timeout": REDIS_SOCKET_TIMEOUT}]
    stopping = RedisBus(None, url, f"test-{uuid.uuid4()}")  # type: ignore[arg-type]
    stopping.layer = RedisChannelLayer(hosts=hosts, prefix=f"t{uuid.uuid4().hex[:8]}")
    other = RedisChannelLayer(hosts=hosts, prefix=stopping.layer.prefix)
    group = group_name(str(uuid.uuid4()))
    other_worker = await other.new_channel()
    await other.group_add(group, other_worker)
    await stopping.start()
    try:
        await stopping.close()
        await stopping.layer.group_send(group, {"type": "zett.frames", "frames": []})
        message = await asyncio.wait_for(other.receive(other_worker), 10)
        assert message["type"] == "zett.frames"
    finally:
        await other.flush()
        await stopping.layer.close_pools()
