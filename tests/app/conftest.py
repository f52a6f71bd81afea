"""Fixtures of the app tests: sockets on the real ASGI application, scripted models.

``sockets`` opens WebSocket connections through ``zett_site.asgi.application`` (origin
check, auth middleware, URL router, consumer: nothing is bypassed). Unless a test passes a
``cookie`` of its own (or ``cookie=""`` for none), every socket of a test carries the same
anonymous browser's session cookie: one visitor, as a real page would. At teardown it closes
every socket it opened and fails the test if an asyncio task outlived them: a run that was
not cancelled, a wait that never woke. Every receive has a timeout that only turns a hang
into a failure; no test waits for time to pass. ``answer_of``, ``events_of`` and ``rows``
read what a run left (its frames, its stored messages) for the modules that import them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from tests.leaks import fail_on_leaked_tasks

# The test process is no server: SIGTERM must stop it, not drain its test loops' runs.
settings.ZETT_GRACEFUL_SHUTDOWN = False

#: Upper bound for one frame to arrive; reaching it means the app hung.
RECEIVE_TIMEOUT = 10


class Socket:
    """A connected test client speaking the frame protocol."""

    def __init__(self, communicator: WebsocketCommunicator, session_id: str) -> None:
        self.communicator = communicator
        self.session_id = session_id
        self.closed = False
        self.connected = False
        self.session_frame: dict[str, Any] | None = None

    async def send(self, frame: dict[str, Any]) -> None:
        await self.communicator.send_to(text_data=json.dumps(frame))

    async def send_raw(self, text: str | None = None, data: bytes | None = None) -> None:
        await self.communicator.send_to(text_data=text, bytes_data=data)

    async def receive(self) -> dict[str, Any]:
        return json.loads(await self.communicator.receive_from(timeout=RECEIVE_TIMEOUT))

    async def expect(self, frame_type: str, **fields: Any) -> dict[str, Any]:
        """The next frame, which must be of ``frame_type`` with ``fields``."""
        frame = await self.receive()
        assert frame["type"] == frame_type, f"expected a {frame_type} frame, got {frame}"
        for key, value in fields.items():
            assert frame[key] == value, f"expected {key}={value!r} in {frame}"
        return frame

    async def expect_error(self, code: str) -> dict[str, Any]:
        frame = await self.expect("error", code=code)
        assert frame["message"].strip()
        return frame

    async def until(self, match: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Frames up to and including the first that ``match``es."""
        frames = []
        while True:
            frame = await self.receive()
            frames.append(frame)
            if match(frame):
                return frames

    async def until_event(self, event_type: str, name: str | None = None) -> list[dict]:
        """Frames up to the ``agent_event`` of ``event_type`` (and CUSTOM ``name``)."""

        def match(frame: dict[str, Any]) -> bool:
            if frame["type"] in ("run_failed", "run_cancelled") and event_type not in (
                "run_failed",
                "run_cancelled",
            ):
                raise AssertionError(f"the run ended before {event_type}: {frame}")
            if frame["type"] == event_type:
                return True
            return (
                frame["type"] == "agent_event"
                and frame["event"]["type"] == event_type
                and (name is None or frame["event"].get("name") == name)
            )

        return await self.until(match)

    async def run_to_completion(self) -> list[dict[str, Any]]:
        """Every frame of the running request up to its ``run_completed`` event."""
        return await self.until_event("run_completed")

    async def assert_quiet(self) -> None:
        """No frame is pending: a ping is answered by the very next frame."""
        await self.send({"type": "ping"})
        await self.expect("pong")

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.communicator.disconnect(timeout=RECEIVE_TIMEOUT)


# --- reading what a run left: its frames and its stored messages --------------------------


def answer_of(frames: list[dict]) -> str:
    """The answer of a run's frames, up to its ``run_completed``."""
    return frames[-1]["event"]["message"]["content"]


def events_of(frames: list[dict]) -> list[dict]:
    """The ``event`` of each ``agent_event`` frame."""
    return [frame["event"] for frame in frames if frame["type"] == "agent_event"]


async def rows(session_id: str) -> list[tuple[str, object]]:
    """(role, content) of a session's stored messages, in order."""
    from agent_app.models import ChatMessage

    return [
        (m.role, m.content)
        async for m in ChatMessage.objects.filter(session_id=session_id).order_by("position")
    ]


@pytest.fixture(autouse=True)
def _async_tests_leak_no_tasks(request):
    """Every async test of this folder runs under ``no_leaked_tasks``."""
    if request.node.get_closest_marker("asyncio") is not None:
        request.getfixturevalue("no_leaked_tasks")


@pytest.fixture
async def no_leaked_tasks():
    """Fail an async test that leaves asyncio tasks running (a run, a wait, a stream)."""
    before = set(asyncio.all_tasks())
    yield
    await fail_on_leaked_tasks(before)


@pytest.fixture(autouse=True, scope="session")
def expected_services():
    """In the services run (``test_services``), prove the settings really use them."""
    if os.environ.get("ZETT_EXPECT_SERVICES") == "1":
        from django.conf import settings

        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
        backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
        assert backend == "channels_redis.pubsub.RedisPubSubChannelLayer"
        assert settings.ZETT_REDIS_URL  # the cluster path is the one under test


@pytest.fixture
def use_model():
    """Make sessions that go live from now on use ``model`` (a scripted LLM).

    Through the constructor seam: the loop's registry builds each agent with
    ``build_agent(session_id, model=model)``; no setting is involved.
    """

    def install(model: Any) -> Any:
        from agent_app.agents.factory import build_agent
        from agent_app.sessions.registry import live_sessions

        live_sessions().factory = functools.partial(build_agent, model=model)
        return model

    return install


def _make_browser() -> tuple[str, str]:
    from django.contrib.sessions.backends.db import SessionStore

    from agent_app.guard.access import BROWSER_KEY_FIELD

    session = SessionStore()
    key = session[BROWSER_KEY_FIELD] = uuid.uuid4().hex
    session.create()
    return f"sessionid={session.session_key}", key


async def new_browser() -> tuple[str, str]:
    """``(session cookie, browser key)`` of a fresh anonymous browser, as a page visit sets."""
    return await sync_to_async(_make_browser)()


async def new_browser_cookie() -> str:
    """The session cookie of a fresh anonymous browser, as a page visit would have set it."""
    return (await new_browser())[0]


@pytest.fixture
def browser_cookie():
    """``await browser_cookie() -> "sessionid=…"``: another anonymous browser."""
    return new_browser_cookie


@pytest.fixture
async def sockets():
    """``await sockets(session_id=None, origin=..., cookie=..., after_seq=None) -> Socket``."""
    from zett_site.asgi import application

    before = set(asyncio.all_tasks())
    opened: list[Socket] = []
    browser: list[str] = []

    async def connect(
        session_id: str | None = None,
        *,
        origin: str = "http://testserver",
        cookie: str | None = None,
        expect_session: bool = True,
        headers: list[tuple[bytes, bytes]] | None = None,
        after_seq: int | None = None,
    ) -> Socket:
        session_id = session_id or str(uuid.uuid4())
        query = "" if after_seq is None else f"?after_seq={after_seq}"
        if cookie is None:
            if not browser:
                browser.append(await new_browser_cookie())
            cookie = browser[0]
        headers = list(headers or [])
        if origin:
            headers.append((b"origin", origin.encode()))
        if cookie:
            headers.append((b"cookie", cookie.encode()))
        communicator = WebsocketCommunicator(
            application, f"/ws/sessions/{session_id}/{query}", headers=headers
        )
        socket = Socket(communicator, session_id)
        opened.append(socket)
        connected, _ = await communicator.connect(timeout=RECEIVE_TIMEOUT)
        if not connected:
            return socket  # still closed at teardown: the refusing app awaits its disconnect
        socket.connected = True
        if expect_session:
            socket.session_frame = await socket.expect("session", session_id=session_id)
        return socket

    yield connect
    for socket in opened:
        await socket.close()
    await stop_live_runs()
    await fail_on_leaked_tasks(before)


async def stop_live_runs() -> None:
    """Cancel the runs still going at a test's end (runs outlive sockets by design)."""
    from agent_app.protocol.refusals import NotRunning
    from agent_app.sessions.registry import live_sessions

    registry = live_sessions()
    for live in registry:
        try:
            await live.cancel()
        except NotRunning:
            pass
        await live.wait_for_run()
    await registry.close()


@pytest.fixture
def login_cookie(django_user_model):
    """``await login_cookie(username) -> (user, "sessionid=…")`` for a signed-in socket."""

    @sync_to_async
    def login(username: str):
        user = django_user_model.objects.create_user(username=username, password="unused-pw")
        client = Client()
        client.force_login(user)
        return user, f"sessionid={client.cookies['sessionid'].value}"

    return login
