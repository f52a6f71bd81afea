"""200 real SIGKILLs at random points of runs with an ``atomic`` tool: each effect once.

``kill_points`` (a process that forks a worker child per step and SIGKILLs it at a random
moment of its work) drives chats whose runs call an ``atomic`` tool five times; every
killed run is continued from the database by the next child, as a worker starting up
does. Afterwards every run is completed, and each of its five notes is stored exactly
once: 0 duplicated, 0 lost. About 20 chats and 50 s on two busy cores.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.app.durable.kill_points import CALLS
from tests.app.servers import ROOT, fresh_database, migrate, server_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_two_hundred_sigkills_at_random_points_leave_each_atomic_effect_once(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(
            url,
            ZETT_MODEL="bench.crash_model:crash_model",
            ZETT_ASSISTANTS="bench.crash_model.Tally",
            ZETT_DEFAULT_ASSISTANT="tally",
            ZETT_RUN_ATTEMPTS="1000",
            ZETT_LOG_LEVEL="ERROR",
        )
        migrate(env)
        done = subprocess.run(
            [sys.executable, "-m", "tests.app.durable.kill_points", "200", "38"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["kills"] >= 200
    assert found["completed"] == found["chats"]
    assert (found["duplicated"], found["lost"]) == (0, 0)
    # The kills hit the run at many stages: before the first call, between calls (the
    # calls themselves among them), after the last while the answer streams.
    stages = set(found["kills_by_calls_done"])
    assert {"0", str(CALLS)} <= stages and len(stages) >= 4, found
