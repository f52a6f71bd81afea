"""Runs without a page over real processes: a daphne worker runs a background run that
nobody watches, and a ``manage.py zett_background`` process delivers its webhooks.

One story, told once: a program POSTs a run that asks for an approval; ``run.waiting``
reaches a receiver that answers 500 first; the delivering process is SIGKILLed and a new
one sends the same message again (same ``webhook-id``, valid signature); the program
reads the run's state (``waiting``, the approval pending), approves it over AG-UI, and
``run.completed`` arrives with the answer, which the state shows too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.app.agui_support import resume_input
from tests.app.pageless.receiver import Receiver
from tests.app.pageless.test_webhooks import verify_by_hand
from tests.app.servers import ROOT, DaphneProcess, fresh_database, migrate, server_env
from tests.app.sse_client import collect, open_request

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout


def headers(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}


class Background:
    """A ``manage.py zett_background`` process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "zett_background", "--no-schedules"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


async def state_of(server: DaphneProcess, secret: str, chat: str, request_id: str) -> dict:
    response = await open_request(
        server.port, "GET", f"/api/chats/{chat}/runs/{request_id}/", headers(secret)
    )
    assert response.status == 200
    return await response.json()


async def test_a_background_run_waits_completes_and_its_webhooks_survive_a_kill(tmp_path):
    async with Receiver(statuses=[500]) as receiver:
        with fresh_database("postgres", tmp_path) as url:
            env = server_env(
                url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0", ZETT_WEBHOOK_ALLOW_PRIVATE="1"
            )
            migrate(env)
            create = "from django.contrib.auth import get_user_model; "
            create += "get_user_model().objects.create_user('ada', password='unused-pw')"
            manage(env, "shell", "-c", create)
            secret = manage(env, "zett_token", "create", "ada").strip()
            added = manage(
                env, "zett_webhook", "add", receiver.url, "--events", "run.waiting,run.completed"
            )
            hook_secret = added.split("Secret (verify signatures with it): ")[1].strip()
            server = DaphneProcess("pageless", env, migrate=False).start()
            first = Background(env)
            second: Background | None = None
            try:
                chat = str(uuid.uuid4())
                response = await open_request(
                    server.port,
                    "POST",
                    f"/api/chats/{chat}/runs/",
                    headers(secret),
                    json.dumps({"content": "save a note: buy milk"}).encode(),
                )
                assert response.status == 202
                started = await response.json()

                [refused] = await receiver.wait_for(1, within=60)  # answered 500
                first.kill()  # the worker that would retry it dies
                second = Background(env)
                _, again = await receiver.wait_for(2, within=60)
                assert again.headers["webhook-id"] == refused.headers["webhook-id"]
                for got in (refused, again):
                    verify_by_hand(hook_secret, got.headers, got.body)
                waiting = json.loads(again.body)
                assert waiting["type"] == "run.waiting"
                assert waiting["data"]["request_id"] == started["request_id"]

                state = await state_of(server, secret, chat, started["request_id"])
                assert state["status"] == "waiting"
                [pending] = state["pending"]
                assert pending["kind"] == "approval"

                resume = resume_input(chat, pending["tool_call_id"], {"approved": True})
                stream = await open_request(
                    server.port, "POST", "/api/ag-ui/demo/", headers(secret),
                    json.dumps(resume).encode(),
                )  # fmt: skip
                events = await collect(stream)
                assert events[-1].type == "RUN_FINISHED"

                *_, done = await receiver.wait_for(3, within=60)
                verify_by_hand(hook_secret, done.headers, done.body)
                completed = json.loads(done.body)
                assert completed["type"] == "run.completed"
                assert completed["data"]["request_id"] == started["request_id"]
                state = await state_of(server, secret, chat, started["request_id"])
                assert state["status"] == "completed"
                assert state["answer"] == completed["data"]["answer"] and state["answer"]
            finally:
                if second is not None:
                    second.stop()
                if first.process.poll() is None:
                    first.stop()
                server.stop()
