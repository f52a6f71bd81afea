"""The app on the services of a real deployment: PostgreSQL and the Redis channel layer.

The socket, persistence and demo suites run again in a child pytest whose settings come
from ``DATABASE_URL`` and ``REDIS_URL``, exactly as a deployment configures them (settings
are read once per process, so a child process is the honest way to switch). The child's
conftest asserts that it really runs on PostgreSQL and Redis (``ZETT_EXPECT_SERVICES``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from tests.app.services import POSTGRES_URL, REDIS_URL, require_service
from tests.progress import say
from zett_site.settings import REDIS_SOCKET_TIMEOUT

ROOT = Path(__file__).resolve().parents[3]
SUITES = [
    "tests/app/test_consumer.py",
    "tests/app/durable/test_persistence.py",
    "tests/app/test_demo_model.py",
    "tests/app/sessions/test_resume.py",
    "tests/app/sessions/test_nothing_lost.py",
    # Security: audit rows and refused text on PostgreSQL, budgets and sign-out over Redis.
    "tests/app/guard/test_access.py",
    "tests/app/test_attacks.py",
    "tests/app/guard/test_limits.py",
    # Chat management: the search's icontains queries on PostgreSQL's JSON text.
    "tests/app/test_chat_management.py",
    # The single-statement writes: RETURNING ids, JSON and time columns on PostgreSQL.
    "tests/app/durable/test_statements.py",
    "tests/app/durable/test_begin_run.py",
    # Deleted chats and users: the creation records on PostgreSQL, the user group over Redis.
    "tests/app/test_deleted_chats.py",
    # Attachments: uuid lookups, quota sums and files removed on commit, on PostgreSQL.
    "tests/app/test_attachments_upload.py",
    "tests/app/test_attachments_chat.py",
    # Sub-runs: their rows, their waits and a continuation on PostgreSQL, replies over Redis.
    "tests/app/test_teamwork.py",
]


async def test_the_redis_channel_layer_delivers_group_messages():
    url = require_service("Redis", REDIS_URL)
    layer = RedisPubSubChannelLayer(
        hosts=[{"address": url, "socket_timeout": REDIS_SOCKET_TIMEOUT}]
    )
    channel = await layer.new_channel()
    try:
        await layer.group_add("zett-services-check", channel)
        await layer.group_send("zett-services-check", {"type": "chat.ping", "n": 1})
        assert await asyncio.wait_for(layer.receive(channel), 10) == {"type": "chat.ping", "n": 1}
    finally:
        await layer.group_discard("zett-services-check", channel)
        await layer.flush()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_socket_and_persistence_suites_pass_on_postgresql_and_redis(request):
    database_url = require_service("PostgreSQL", POSTGRES_URL)
    redis_url = require_service("Redis", REDIS_URL)
    # A database name of this run's own: pytest-django creates "test_<name>", and two
    # runs sharing one (another developer's suite on the same server) would drop each
    # other's database.
    base, _, _ = database_url.rpartition("/")
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/zett_services_{os.getpid()}",
        "REDIS_URL": redis_url,
        "ZETT_EXPECT_SERVICES": "1",
    }
    # The child's progress lines ("....  [ 40%]") reach the terminal as they come.
    lines = []
    with subprocess.Popen(
        [sys.executable, "-m", "pytest", *SUITES, "-q", "-p", "no:cacheprovider", "--no-header"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            lines.append(line)
            if line.rstrip().endswith("%]"):
                say(request, f"on PostgreSQL and Redis: {line.strip()}")
        returncode = child.wait(timeout=900)
    output = "".join(lines)
    summary = output.strip().splitlines()[-1:] or [""]
    assert returncode == 0, output[-9000:]
    assert "passed" in summary[0] and "skipped" not in summary[0], summary
