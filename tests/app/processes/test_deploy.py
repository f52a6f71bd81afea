"""What a deployment relies on, with real processes: graceful SIGTERM, health, static files
without DEBUG, and ``manage.py runworkers``."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis

from tests.app.servers import ROOT, DaphneProcess, fresh_database, server_env
from tests.app.services import REDIS_URL, require_service

try:  # WhiteNoise writes Brotli copies only when this optional package is installed
    import brotli
except ImportError:
    brotli = None

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def event_is(kind: str):
    return lambda frame: (frame.get("event") or {}).get("type") == kind


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def get_encoded(url: str, encoding: str) -> tuple[str | None, bytes]:
    """``url`` asked for with ``Accept-Encoding: encoding``: its Content-Encoding and bytes."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": encoding})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("Content-Encoding"), response.read()


def expect_compressed_scripts(base: str) -> None:
    """A script comes compressed when the browser asks (gzip; Brotli too when WhiteNoise
    could write it, with the optional ``brotli`` package), and decompresses to the file."""
    url = f"{base}/static/agent_app/mount.js"
    encoding, plain = get_encoded(url, "identity")
    assert encoding is None and b"export function mount" in plain
    encoding, packed = get_encoded(url, "gzip, deflate")
    assert encoding == "gzip" and gzip.decompress(packed) == plain and len(packed) < len(plain) / 2
    if brotli is not None:
        encoding, packed = get_encoded(url, "gzip, deflate, br")
        assert encoding == "br" and brotli.decompress(packed) == plain


def wait_for_exit(server: DaphneProcess) -> int:
    assert server.process is not None
    return server.process.wait(timeout=120)


async def test_sigterm_lets_a_run_finish_then_the_worker_exits(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.05", ZETT_SHUTDOWN_GRACE="60")
        server = DaphneProcess("sigterm-finish", env).start()
        try:
            client = await server.socket(str(uuid.uuid4()))
            await client.send({"type": "user_message", "content": "what is 1/3 + 1/6?"})
            await client.until(event_is("text_delta"))
            server.process.send_signal(signal.SIGTERM)
            frames = await client.until(
                lambda f: (
                    event_is("run_completed")(f)
                    or (f["type"].startswith("run_") and f["type"] != "run_started")
                )
            )
            assert event_is("run_completed")(frames[-1]), frames[-1]
            assert wait_for_exit(server) == 0
        finally:
            await server.close_clients()
            server.stop()


async def test_sigterm_after_the_grace_period_hands_a_working_run_over_and_pauses_a_waiting_one(
    tmp_path,
):
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url, ZETT_MODEL="demo", ZETT_DEMO_PACE="0.1", ZETT_SHUTDOWN_GRACE="0.5")
        server = DaphneProcess("sigterm-grace", env).start()
        try:
            working, waiting = str(uuid.uuid4()), str(uuid.uuid4())
            asker = await server.socket(waiting)
            await asker.send({"type": "user_message", "content": "save a note: milk"})
            await asker.until(lambda f: (f.get("event") or {}).get("name") == "approval_requested")
            talker = await server.socket(working)
            await talker.send({"type": "user_message", "content": "tell me a long story"})
            await talker.until(event_is("text_delta"))
            server.process.send_signal(signal.SIGTERM)
            paused = (await asker.until(lambda f: f["type"] == "run_paused"))[-1]
            assert [item["kind"] for item in paused["pending"]] == ["approval"]
            assert wait_for_exit(server) == 0
            await server.close_clients()
            server.start()
            back = await server.socket(waiting)
            assert [item["kind"] for item in back.session_frame["pending"]] == ["approval"]
            # The working run was handed over, not interrupted: the next process goes on.
            page = await server.socket(working)
            if page.session_frame["active_request_id"]:
                frames = await page.until(
                    lambda f: event_is("run_completed")(f) or f["type"] == "run_interrupted"
                )
                assert event_is("run_completed")(frames[-1]), frames[-1]
                page = await server.socket(working)
            (run,) = page.session_frame["runs"]
            assert (run["status"], run["attempts"]) == ("completed", 2)
            history = page.session_frame["history"]
            assert [m["role"] for m in history] == ["user", "assistant"]
            assert not history[1].get("partial")
        finally:
            await server.close_clients()
            server.stop()


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count >= 65535:
            continue
        try:
            sockets = []
            for port in range(first, first + count):
                candidate = socket.socket()
                sockets.append(candidate)
                candidate.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for candidate in sockets:
                candidate.close()


def wait_until_listening(ports: set[int], process: subprocess.Popen) -> list[str]:
    """Read the workers' output until each port's daphne says it listens."""
    lines = []
    waiting = {f"Listening on TCP address 127.0.0.1:{port}" for port in ports}
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        waiting = {expected for expected in waiting if expected not in line}
        if not waiting:
            return lines
    raise AssertionError("runworkers exited before its workers listened:\n" + "".join(lines))


@pytest.mark.parametrize("mode", ["default", "production"])
def test_runworkers_serves_the_page_and_its_static_files_and_health_on_each_worker(tmp_path, mode):
    """In its default (DEBUG) mode straight from the apps, with nothing collected; in
    production (no DEBUG, a secret key) from ``collectstatic``'s STATIC_ROOT."""
    redis_url = require_service("Redis", REDIS_URL)
    static_root = tmp_path / "static"
    with fresh_database("postgres", tmp_path) as url:
        env = server_env(url, REDIS_URL=redis_url, DJANGO_STATIC_ROOT=str(static_root))
        if mode == "default":
            for name in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY"):
                env.pop(name, None)
        else:
            env.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="deploy-test-" + uuid.uuid4().hex)
            subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"],
                cwd=ROOT,
                env=env,
                check=True,
                timeout=300,
            )
        first = free_ports(2)
        workers = subprocess.Popen(
            [sys.executable, "manage.py", "runworkers", "--workers", "2", "--port", str(first)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_until_listening({first, first + 1}, workers)
            for port in (first, first + 1):
                status, body = get(f"http://127.0.0.1:{port}/healthz")
                assert status == 200, body
                assert json.loads(body) == {
                    "status": "ok",
                    "database": True,
                    "redis": True,
                    "accepting": True,
                }
                status, script = get(f"http://127.0.0.1:{port}/static/agent_app/chat.js")
                assert status == 200 and b"import" in script
                status, page = get(f"http://127.0.0.1:{port}/")
                assert status == 200, page
                assets = re.findall(rb'(?:href|src)="(/static/[^"]+)"', page)
                assert len(assets) >= 2, page
                for asset in assets:
                    status, _ = get(f"http://127.0.0.1:{port}{asset.decode()}")
                    assert status == 200, asset
            if mode == "production":
                expect_compressed_scripts(f"http://127.0.0.1:{first}")
            status, _ = get(f"http://127.0.0.1:{first}/static/agent_app/no-such-file.js")
            assert status == 404
        finally:
            workers.send_signal(signal.SIGTERM)
            output = workers.communicate(timeout=120)[0]
        assert workers.returncode == 0, output
        redis.Redis.from_url(redis_url).close()


def test_runworkers_refuses_several_workers_without_redis():
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    result = subprocess.run(
        [sys.executable, "manage.py", "runworkers", "--workers", "2", "--skip-migrate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "REDIS_URL" in result.stderr


def test_the_health_check_says_when_the_database_is_unreachable(tmp_path):
    env = server_env(f"sqlite:///{Path(tmp_path) / 'missing' / 'db.sqlite3'}")
    script = (
        "import django, os; django.setup();"
        "from django.test import Client;"
        "r = Client().get('/healthz', HTTP_HOST='localhost');"
        "print(r.status_code, r.content.decode())"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    status, body = result.stdout.split(" ", 1)
    assert status == "503" and json.loads(body)["database"] is False
