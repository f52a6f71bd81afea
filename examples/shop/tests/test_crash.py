"""An approval survives a SIGKILL of the server: the shop served by a real Daphne process,
killed while a refund waits for the customer's approval, then started again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket as sockets
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import websockets

SHOP = Path(__file__).resolve().parents[1]

SETUP = """
from django.contrib.auth.models import User
from shop.models import Order
from agent_app.guard.tokens import issue
alice = User.objects.create_user("alice", password="alice-pw-123")
Order.objects.create(number=7, customer=alice, item="Red shoes", total_cents=8990)
print(issue(alice, name="crash test")[1])
"""
REFUNDS = "from shop.models import Order; print(Order.objects.get(number=7).refunds)"


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=SHOP,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _free_port() -> int:
    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(env: dict[str, str], port: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    return subprocess.Popen(
        [*command, "myshop.asgi:application"],
        cwd=SHOP,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _serve(env: dict[str, str], port: int) -> subprocess.Popen:
    server = _start(env, port)
    for _ in range(300):  # up to 30 s for the process to listen
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return server
        except OSError:
            if server.poll() is not None:
                raise AssertionError(server.stderr.read()) from None
            await asyncio.sleep(0.1)
    server.kill()
    raise AssertionError("daphne did not start listening")


async def _frames_until(socket, kind: str) -> list[dict]:
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(socket.recv(), 20))
        frames.append(frame)
        seen = frame["event"]["type"] if frame["type"] == "agent_event" else frame["type"]
        if seen == kind:
            return frames


@pytest.mark.timeout(180)
async def test_an_approval_asked_before_a_sigkill_is_answered_after_it(tmp_path):
    env = {**os.environ, "SHOP_DATABASE": str(tmp_path / "shop.sqlite3")}
    _manage(env, "migrate", "--verbosity", "0")
    secret = _manage(env, "shell", "-c", SETUP).splitlines()[-1]
    headers = {"Authorization": f"Bearer {secret}"}
    port = _free_port()
    url = f"ws://127.0.0.1:{port}/ws/sessions/{uuid.uuid4()}/"

    server = await _serve(env, port)
    try:
        async with websockets.connect(url, additional_headers=headers) as socket:
            await _frames_until(socket, "session")
            await socket.send(json.dumps({"type": "user_message", "content": "refund 7"}))
            frames = await _frames_until(socket, "custom")
            asked = frames[-1]["event"]["payload"]
            assert frames[-1]["event"]["name"] == "approval_requested"
            server.send_signal(signal.SIGKILL)
            server.wait(10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    assert _manage(env, "shell", "-c", REFUNDS).splitlines()[-1] == "0"

    server = await _serve(env, port)
    try:
        async with websockets.connect(url, additional_headers=headers) as socket:
            (session,) = await _frames_until(socket, "session")
            (pending,) = session["pending"]
            assert pending["tool_call_id"] == asked["tool_call_id"]
            assert pending["payload"]["digest"] == asked["digest"]  # re-asked by Support
            reply = {
                "tool_call_id": asked["tool_call_id"],
                "approved": True,
                "digest": asked["digest"],
            }
            await socket.send(
                json.dumps(
                    {"type": "external_event", "name": "approval_response", "payload": reply}
                )
            )
            frames = await _frames_until(socket, "run_completed")
            text = "".join(
                f["event"].get("delta", "")
                for f in frames
                if f["type"] == "agent_event" and f["event"]["type"] == "text_delta"
            )
            assert "Refunded order 7" in text
    finally:
        server.terminate()
        server.wait(30)
    assert _manage(env, "shell", "-c", REFUNDS).splitlines()[-1] == "1"
