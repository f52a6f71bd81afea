"""Token budgets across two real daphne workers on one PostgreSQL and one Redis.

One browser opens 20 chats, ten on each worker, and sends all 20 messages at once against
a budget of five calls: the workers decide on the same ``TokenUsage`` row, so exactly five
calls are made between them and the other fifteen messages are refused.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.app.browser.browser_model import USAGE
from tests.app.servers import DaphneProcess, two_workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODEL = "tests.app.browser.browser_model:browser_script_model"
CALLS = 5


@pytest.fixture
async def workers(tmp_path) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess, str]]:
    async with two_workers(
        "budgets",
        tmp_path,
        ZETT_MODEL=MODEL,
        ZETT_TOKEN_BUDGETS=json.dumps({"anonymous": CALLS * USAGE.total_tokens}),
    ) as cluster:
        yield cluster


def ended(frame: dict) -> bool:
    event = frame.get("event") or {}
    return frame["type"] in ("error", "run_failed") or event.get("type") == "run_completed"


async def test_two_workers_share_one_budget_exactly(workers):
    one, two, database_url = workers
    sockets = [await (one, two)[n % 2].socket(str(uuid.uuid4())) for n in range(20)]
    for socket in sockets:
        assert (await socket.expect("budget"))["remaining"] == CALLS * USAGE.total_tokens

    await asyncio.gather(
        *(
            socket.send({"type": "user_message", "content": f"hi {n}"})
            for n, socket in enumerate(sockets)
        )
    )
    ends = [(await socket.until(ended))[-1] for socket in sockets]

    answered = [end for end in ends if end["type"] == "agent_event"]
    refused = [end for end in ends if end["type"] != "agent_event"]
    assert len(answered) == CALLS, ends
    assert {(end["type"], end.get("code")) for end in refused} == {("error", "budget_exceeded")}
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "SELECT input_tokens + output_tokens, calls, in_flight, reserved_tokens, refusals"
            " FROM agent_app_tokenusage"
        ).fetchall()
        runs = connection.execute("SELECT status, count(*) FROM agent_app_chatrun GROUP BY status")
        assert dict(runs.fetchall()) == {"completed": CALLS}
    assert rows == [(CALLS * USAGE.total_tokens, CALLS, 0, 0, 20 - CALLS)]
