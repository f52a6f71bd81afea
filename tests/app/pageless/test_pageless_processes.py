"""Runs without a page over real processes: a daphne worker runs a background run that
nobody watches, and a ``manage.py zett_background`` process delivers its webhooks.

Two stories. A program POSTs a run that asks for an approval; ``run.waiting``
reaches a receiver that answers 500 first; the delivering process is SIGKILLed and a new
one sends the same message again (same ``webhook-id``, valid signature); the program
reads the run's state (``waiting``, the approval pending), approves it over AG-UI, and
``run.completed`` arrives with the answer, which the state shows too. And two
``zett_background`` processes on PostgreSQL and Redis fire a due schedule once: one run,
as its owner, whose ``run.completed`` arrives and whose state a daphne worker answers.
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
from tests.app.services import REDIS_URL, require_service
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

    def __init__(self, env: dict[str, str], *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "zett_background", *(options or ["--no-schedules"])],
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


async def test_two_background_processes_fire_a_due_schedule_once_and_its_run_is_seen(tmp_path):
    """Two ``zett_background`` processes (schedules and webhooks) on PostgreSQL and Redis:
    the schedule's due time starts one run, as its owner, in a new chat; the run's
    ``run.completed`` reaches the receiver; a daphne worker answers its state."""
    import redis

    redis_url = require_service("Redis", REDIS_URL)
    store = redis.Redis.from_url(redis_url)
    store.flushdb()
    try:
        async with Receiver() as receiver:
            with fresh_database("postgres", tmp_path) as url:
                env = server_env(
                    url,
                    REDIS_URL=redis_url,
                    ZETT_MODEL="demo",
                    ZETT_DEMO_PACE="0",
                    ZETT_WEBHOOK_ALLOW_PRIVATE="1",
                )
                migrate(env)
                create = "from django.contrib.auth import get_user_model; "
                create += "get_user_model().objects.create_user('ada', password='unused-pw')"
                manage(env, "shell", "-c", create)
                secret = manage(env, "zett_token", "create", "ada").strip()
                manage(env, "zett_webhook", "add", receiver.url, "--events", "run.completed")
                manage(
                    env, "zett_schedule", "add", "--assistant", "demo", "--user", "ada",
                    "--cron", "0 0 1 1 *", "--timezone", "Europe/Berlin",
                    "--prompt", "what is 1/3 + 1/6?",
                )  # fmt: skip
                due_now = "from django.utils import timezone; from agent_app.models import "
                due_now += "ScheduledRun; ScheduledRun.objects.update(next_fire_at=timezone.now())"
                server = DaphneProcess("pageless-schedules", env, migrate=False).start()
                workers = [Background(env, "--verbosity", "1"), Background(env, "-v", "1")]
                try:
                    manage(env, "shell", "-c", due_now)
                    [got] = await receiver.wait_for(1, within=90)
                    completed = json.loads(got.body)["data"]
                    state = await state_of(
                        server, secret, completed["chat_id"], completed["request_id"]
                    )
                    assert state["status"] == "completed" and "0.5" in state["answer"]
                finally:
                    for worker in workers:
                        worker.stop()
                    server.stop()
                count = "from agent_app.models import ChatRun, ScheduledRun; "
                count += "row = ScheduledRun.objects.get(); "
                count += "print('RESULT', ChatRun.objects.count(), row.last_request_id, "
                count += "row.next_fire_at.isoformat())"
                printed = manage(env, "shell", "-c", count).splitlines()
                _, runs, last, upcoming = next(x for x in printed if x.startswith("RESULT")).split()
        assert (int(runs), last) == (1, completed["request_id"])
        # Moved to the next 1 January, 00:00 in Berlin (from the hand-set due time).
        assert upcoming.endswith("-12-31T23:00:00+00:00")
        assert len(receiver.requests) == 1
    finally:
        store.flushdb()
        store.close()
