"""Fixtures of the shop's tests: users with orders, sockets on the shop's ASGI app.

With ``SHOP_REQUIRE_INSTALLED=1`` (the zett suite sets it) the tests refuse to run on a
zett that is not installed as a package: ``agent_app`` must come from site-packages.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client


def pytest_configure(config: Any) -> None:
    if os.environ.get("SHOP_REQUIRE_INSTALLED") == "1":
        import agent_app
        import zett_agent

        for package in (agent_app, zett_agent):
            assert "site-packages" in package.__file__, f"{package.__name__} is not installed"


@pytest.fixture
def people(django_user_model):
    """A customer (alice, order 7) and a staff member with shop.view_order (bob)."""
    from django.contrib.auth.models import Permission
    from shop.models import Order

    alice = django_user_model.objects.create_user("alice", password="alice-pw-123")
    bob = django_user_model.objects.create_user("bob", password="bob-pw-123")
    bob.user_permissions.add(Permission.objects.get(codename="view_order"))
    Order.objects.create(number=7, customer=alice, item="Red shoes", total_cents=8990)
    Order.objects.create(number=8, customer=bob, item="Boots", total_cents=12000)
    return alice, bob


class Socket:
    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator

    async def send(self, frame: dict) -> None:
        await self.communicator.send_to(text_data=json.dumps(frame))

    async def receive(self) -> dict:
        return json.loads(await self.communicator.receive_from(timeout=10))

    async def until(self, *types: str) -> list[dict]:
        frames = []
        while True:
            frame = await self.receive()
            frames.append(frame)
            kind = frame["event"]["type"] if frame["type"] == "agent_event" else frame["type"]
            if kind in types:
                return frames


def answer(frames: list[dict]) -> str:
    return "".join(
        f["event"]["delta"]
        for f in frames
        if f["type"] == "agent_event" and f["event"]["type"] == "text_delta"
    )


@pytest.fixture
async def connect():
    """``await connect(session_id, user=None, headers=()) -> Socket`` (past its session frame)."""
    from myshop.asgi import application

    opened: list[WebsocketCommunicator] = []

    async def open_socket(session_id: str, user: Any = None, headers=()) -> Socket:
        headers = list(headers)
        if user is not None:

            def cookie() -> str:
                client = Client()
                client.force_login(user)
                return f"sessionid={client.cookies['sessionid'].value}"

            headers.append((b"cookie", (await sync_to_async(cookie)()).encode()))
        communicator = WebsocketCommunicator(
            application, f"/ws/sessions/{session_id}/", headers=headers
        )
        opened.append(communicator)
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        socket = Socket(communicator)
        first = await socket.receive()
        socket.first = first
        return socket

    yield open_socket
    for communicator in opened:
        await communicator.disconnect()
