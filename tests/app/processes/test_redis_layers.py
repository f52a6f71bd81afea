"""Both of channels_redis's layers carry zett's fan-out between two real daphne workers.

``RedisChannelLayer`` (the one of every Channels tutorial) reads a process's channels with a
blocking ``BZPOPMIN`` under one receive lock per process; ``RedisPubSubChannelLayer`` with
``SUBSCRIBE``. Signed-in sockets read the layer too (the per-user group that signing out
closes), next to each worker's own inbox: frames, forwarded replies and cancels must still
reach every socket on either layer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.processes.runs import is_custom
from tests.app.processes.test_agui_processes import make_token
from tests.app.servers import DaphneProcess, server_env, two_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(params=["pubsub", "core"])
async def cluster(request, tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess, str]]:
    async with two_workers(
        f"layer-{request.param}",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.02",
        ZETT_LEASE_SECONDS="2",
        ZETT_REDIS_CHANNEL_LAYER=request.param,
    ) as (one, two, database_url):
        yield one, two, make_token(server_env(database_url), "ada")


approval_asked = is_custom("approval_requested")


def numbered(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if "seq" in frame]


async def test_signed_in_sockets_on_two_workers_see_one_run(cluster):
    one, two, secret = cluster
    session_id = str(uuid.uuid4())
    first = await one.socket(session_id, token=secret)
    second = await two.socket(session_id, token=secret)

    await first.send({"type": "user_message", "content": "save a note: buy milk"})
    seen_one = await first.until(approval_asked)
    seen_two = await second.until(approval_asked)
    assert numbered(seen_one) == numbered(seen_two)

    # The approval goes through worker two to the run on worker one, and back.
    payload = seen_two[-1]["event"]["payload"]
    approval = {"tool_call_id": payload["tool_call_id"], "approved": True}
    await second.send({"type": "external_event", "name": "approval_response", "payload": approval})
    assert (await second.expect("external_event_result"))["accepted_by"]
    done_two = await second.until(lambda f: (f.get("event") or {}).get("type") == "run_completed")
    done_one = await first.until(lambda f: (f.get("event") or {}).get("type") == "run_completed")
    assert numbered(done_one) == numbered(done_two)

    # A second run, started on worker two, cancelled through worker one.
    await second.send({"type": "user_message", "content": "write a long answer"})
    await first.until(lambda f: (f.get("event") or {}).get("type") == "text_delta")
    await first.send({"type": "cancel"})
    await first.until(lambda f: f["type"] == "run_cancelled")
    await second.until(lambda f: f["type"] == "run_cancelled")
