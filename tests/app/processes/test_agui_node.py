"""The stock AG-UI client under Node, against a live daphne server: ``@ag-ui/client`` 1.0
(installed into ``tests/app/agui_node`` by ``npm ci``) with the re-attach helper the app
ships (``agent_app/static/agent_app/agui-reattach.js``).

It runs a turn, answers an approval interrupt with the stock ``resume``, and drops a stream
mid-answer and re-attaches through the helper: the text read before and after the drop is
the whole answer, nothing lost and nothing repeated. A front desk's delegate streams its
work and asks for an approval inside the chat's run; the stock client takes every event
and answers the approval with ``resume``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.app.processes.test_agui_processes import make_token
from tests.app.servers import ROOT, DaphneProcess, fresh_database, migrate, server_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

NODE_PROJECT = ROOT / "tests" / "app" / "agui_node"
HELPER = ROOT / "agent_app" / "static" / "agent_app" / "agui-reattach.js"


@pytest.fixture(scope="module")
def node_project(tmp_path_factory) -> Path:
    """A folder with the driver, the shipped helper and the pinned ``@ag-ui/client``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed (.ci/run installs them)")
    if not (NODE_PROJECT / "node_modules" / "@ag-ui" / "client").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_PROJECT, check=True, timeout=300
        )
    work = tmp_path_factory.mktemp("agui-node")
    (work / "node_modules").symlink_to(NODE_PROJECT / "node_modules")
    shutil.copy(NODE_PROJECT / "package.json", work / "package.json")
    shutil.copy(NODE_PROJECT / "drive.mjs", work / "drive.mjs")
    shutil.copy(HELPER, work / "agui-reattach.js")
    return work


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with fresh_database("sqlite", tmp_path_factory.mktemp("agui-node-db")) as url:
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.05")
        migrate(env)
        server = DaphneProcess("agui-node", env, migrate=False).start()
        try:
            yield server, make_token(env, "ada")
        finally:
            server.stop()


def drive(
    node_project: Path, live, scenario: str, assistant: str = "demo"
) -> tuple[str, dict[str, Any]]:
    server, secret = live
    thread_id = str(uuid.uuid4())
    env = {
        **os.environ,
        "ZETT_URL": f"http://127.0.0.1:{server.port}",
        "ZETT_TOKEN": secret,
        "ZETT_THREAD": thread_id,
        "ZETT_ASSISTANT": assistant,
    }
    done = subprocess.run(
        ["node", "drive.mjs", scenario],
        cwd=node_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return thread_id, json.loads(done.stdout.strip().splitlines()[-1])


def test_the_stock_client_runs_and_answers_an_interrupt_with_resume(node_project, live):
    _, seen = drive(node_project, live, "interrupt")
    first, second = seen["first"], seen["second"]
    assert first["types"][0] == "RUN_STARTED" and first["types"][-1] == "RUN_FINISHED"
    (asked,) = first["interrupts"]
    assert asked["reason"] == "confirmation"
    assert second["types"][0] == "RUN_STARTED" and second["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in second["types"]
    assert second["interrupts"] == [] and second["errors"] == []
    assert seen["pending"] == 0
    assert second["text"]


def test_the_shipped_helper_re_attaches_and_nothing_is_lost_or_repeated(node_project, live):
    server, secret = live
    thread_id, seen = drive(node_project, live, "reattach")
    first, rest = seen["first"], seen["rest"]
    assert seen["droppedAt"] is not None  # the ids were kept
    assert first["text"] and rest["text"]
    assert rest["types"][0] == "RUN_STARTED" and rest["types"][-1] == "RUN_FINISHED"
    assert rest["errors"] == []
    answer = first["text"] + rest["text"]
    # The whole answer, as the chat's history stored it: nothing lost, nothing twice.
    stored = _stored_answer(server, secret, thread_id)
    assert answer == stored
    assert int(seen["lastEventId"]) > int(seen["droppedAt"])


def _stored_answer(server, secret: str, thread_id: str) -> str:
    """The text of the run's assistant messages as the chat's history lists them (the
    REST API): the words before its tool call, then its answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}/api/chats/{thread_id}/messages/",
        headers={"Authorization": f"Bearer {secret}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        listed = json.load(response)
    items = listed["messages"] if isinstance(listed, dict) else listed
    texts = [item.get("content") for item in items if item.get("role") == "assistant"]
    return "".join(text for text in texts if isinstance(text, str))


@pytest.fixture(scope="module")
def team_live(tmp_path_factory):
    """A server whose front desk delegates to billing (``tests.app.team_assistants``)."""
    team = "tests.app.team_assistants.FrontDesk,tests.app.team_assistants.Billing"
    with fresh_database("sqlite", tmp_path_factory.mktemp("agui-node-team")) as url:
        env = server_env(url, ZETT_ASSISTANTS=team, ZETT_DEFAULT_ASSISTANT="front")
        migrate(env)
        server = DaphneProcess("agui-node-team", env, migrate=False).start()
        try:
            yield server, make_token(env, "ada")
        finally:
            server.stop()


def test_the_stock_client_follows_a_delegate_and_answers_its_approval(node_project, team_live):
    _, seen = drive(node_project, team_live, "delegate", assistant="front")
    first, second = seen["first"], seen["second"]
    # The sub-run's events are CUSTOM zett.<type> events the stock client takes as they are.
    assert "CUSTOM:zett.tool_started" in first["types"]
    (asked,) = first["interrupts"]  # billing's approval, inside the ask_billing call
    assert asked["reason"] == "confirmation" and asked["toolCallId"] == "refund-1"
    assert first["errors"] == [] and second["errors"] == []
    assert second["types"][0] == "RUN_STARTED" and second["types"][-1] == "RUN_FINISHED"
    assert second["interrupts"] == [] and seen["pending"] == 0
    assert second["text"] == "Front: Billing: order 7 refunded"
