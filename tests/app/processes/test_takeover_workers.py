"""A takeover across two real workers (daphne processes on one PostgreSQL and Redis).

The customer's answer streams on worker one; the member of staff is connected to worker
two. The takeover cancels the run on the other worker, and no socket on either worker
sees assistant text after ``taken_over``, wherever in the stream it lands.
"""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.app.servers import ROOT, DaphneProcess, two_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: Repetitions, each with the takeover at a random point of the answer.
ROUNDS = 100


def staff_cookie(env: dict[str, str]) -> str:
    """A member of staff in the workers' database, signed in: their session cookie."""
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from django.contrib.auth.models import Permission\n"
        "from django.test import Client\n"
        "user = get_user_model().objects.create_user('alice', password='unused-pw',"
        " first_name='Alice')\n"
        "user.user_permissions.add(Permission.objects.get(codename='staff_chat'))\n"
        "client = Client()\n"
        "client.force_login(user)\n"
        "print(client.cookies['sessionid'].value)\n"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return f"sessionid={done.stdout.strip().splitlines()[-1]}"


@pytest.fixture
async def workers(tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess, str]]:
    async with two_workers(
        "takeover",
        tmp_path,
        ZETT_MODEL="demo",
        ZETT_DEMO_PACE="0.005",
        ZETT_LEASE_SECONDS="2",
        ZETT_MAX_CHATS_PER_HOUR="1000",
    ) as (one, two, _):
        yield one, two, staff_cookie(one.env)


def is_text(frame: dict) -> bool:
    event = frame.get("event") or {}
    return frame["type"] == "agent_event" and event.get("type") == "text_delta"


async def rest_of(client) -> list[dict]:
    """What reaches ``client`` up to the answer of a ping sent now."""
    await client.send({"type": "ping"})
    return await client.until(lambda frame: frame["type"] == "pong")


async def test_takeover_on_another_worker_leaves_no_late_text(workers):
    one, two, cookie = workers
    randomness = random.Random(4040)
    late = 0
    for _ in range(ROUNDS):
        session_id = str(uuid.uuid4())
        customer = await one.socket(session_id)
        await customer.send({"type": "user_message", "content": "write a long answer"})
        await customer.until(lambda frame: frame["type"] == "run_started")
        watcher = await two.socket(session_id)  # the customer's second tab, on worker two
        staff = await two.socket(session_id, cookie=cookie)
        for _ in range(randomness.randrange(1, 30)):
            await customer.until(is_text)
        await staff.send({"type": "takeover"})
        for client in (customer, watcher, staff):
            frames = await client.until(lambda frame: frame["type"] == "taken_over")
            assert frames[-1]["staff"] == {"name": "Alice"}
            if client is customer:  # it landed in the middle of the answer
                assert "run_cancelled" in [frame["type"] for frame in frames]
            late += sum(map(is_text, await rest_of(client)))
        # The customer writes on worker one: stored, shown on both, no run.
        await customer.send({"type": "user_message", "content": "hello?"})
        for client in (customer, watcher, staff):
            shown = await client.until(lambda frame: frame["type"] != "pong")
            assert shown[-1]["type"] == "customer_message", shown
        # Staff write from worker two: every socket shows it, with their name.
        await staff.send({"type": "staff_message", "content": "Alice here."})
        for client in (customer, watcher, staff):
            said = await client.until(lambda frame: frame["type"] == "staff_message")
            assert said[-1]["staff"] == {"name": "Alice"}
        await staff.send({"type": "hand_back"})
        for client in (customer, watcher, staff):
            await client.until(lambda frame: frame["type"] == "handed_back")
        for client in (customer, watcher, staff):
            await client.close()
    assert late == 0


async def test_after_hand_back_the_assistant_answers_again_on_either_worker(workers):
    one, two, cookie = workers
    session_id = str(uuid.uuid4())
    customer = await one.socket(session_id)
    await customer.send({"type": "user_message", "content": "what is 1/3 + 1/6?"})
    await customer.until(lambda frame: (frame.get("event") or {}).get("type") == "run_completed")
    staff = await two.socket(session_id, cookie=cookie)
    await staff.send({"type": "takeover"})
    await customer.until(lambda frame: frame["type"] == "taken_over")
    await staff.send({"type": "hand_back"})
    await customer.until(lambda frame: frame["type"] == "handed_back")
    await customer.send({"type": "user_message", "content": "what is 1/3 + 1/6?"})
    frames = await customer.until(
        lambda frame: (frame.get("event") or {}).get("type") == "run_completed"
    )
    assert frames[0]["type"] == "run_started"
    assert "0.5" in frames[-1]["event"]["message"]["content"]
