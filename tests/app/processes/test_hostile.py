"""The hostile-input suite: generated frames against the real app, every one answered.

Two runs, both seeded (Hypothesis ``derandomize``; what else decides the frames drawn, and
why every frame type is named, is told in ``hostile``):

- **In process**, through Channels' ``WebsocketCommunicator`` on ``zett_site.asgi``:
  ``EXAMPLES`` sockets of ``FRAMES_PER_SOCKET`` frames each, each socket a different
  anonymous browser on a new chat, the scripted ``KeywordModel`` answering. For every
  socket: each frame is answered, the socket is never closed, and after it disconnects no
  live session, socket count or asyncio task (run, wait, stream) is left.
- **Over a real socket**, against one daphne subprocess (``live_daphne.py``): the same
  kind of frames (lone surrogates only as ``\\u`` escapes, which is all a UTF-8 socket can
  carry) on several sockets; afterwards every chat they used comes back idle (no run left
  behind to answer ``busy``), and the server logged no warning, error or traceback.

Each run prints its numbers (``-s`` shows them; they are also in the test's report), which
docs/security.md quotes.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.request import Request, urlopen

import pytest
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app.processes.hostile import Exchange, SocketClosed, Tally, frames
from tests.app.servers import ARTIFACTS, launch_daphne
from tests.leaks import leaked_tasks
from tests.progress import say

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[3]
#: Sockets (Hypothesis examples) and frames per socket of the in-process run.
EXAMPLES = 125
FRAMES_PER_SOCKET = 80
#: Sockets and frames per socket of the daphne run.
DAPHNE_SOCKETS = 6
DAPHNE_FRAMES_PER_SOCKET = 200
#: Bound on one answer arriving: reaching it means a frame went unanswered.
ANSWER_TIMEOUT = 10


@pytest.fixture
def hostile_settings(settings):
    """The scripted model, and limits lifted: this suite is about what a frame does."""
    settings.ZETT_MODEL = "tests.app.llm_doubles:KeywordModel"
    settings.ZETT_WS_RATE_LIMIT = {"burst": 10**9, "per_second": 10**9}
    settings.ZETT_MAX_CHATS_PER_HOUR = 10**6
    return settings


def report(request: pytest.FixtureRequest, line: str) -> None:
    """Print the run's numbers past pytest's output capture (and keep them in the report)."""
    request.node.user_properties.append(("hostile", line))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + line, flush=True)


# --- in process ----------------------------------------------------------------------------


async def one_socket(sent: list[str | bytes], tally: Tally) -> None:
    """One anonymous browser on a new chat sends ``sent``; nothing may outlive it."""
    from agent_app.guard.limits import limiter
    from agent_app.protocol.refusals import NotRunning
    from agent_app.sessions.registry import live_sessions
    from tests.app.conftest import new_browser_cookie
    from zett_site.asgi import application

    before = set(asyncio.all_tasks())
    cookie = await new_browser_cookie()
    communicator = WebsocketCommunicator(
        application,
        f"/ws/sessions/{uuid.uuid4()}/",
        headers=[(b"origin", b"http://testserver"), (b"cookie", cookie.encode())],
    )
    connected, _ = await communicator.connect(timeout=ANSWER_TIMEOUT)
    assert connected
    tally.sockets += 1

    async def send(frame: str | bytes) -> None:
        # ``send_input``, not ``send_to``: that one refuses the empty frames attackers send.
        key = "bytes" if isinstance(frame, bytes) else "text"
        await communicator.send_input({"type": "websocket.receive", key: frame})

    async def receive() -> dict:
        output = await communicator.receive_output(timeout=ANSWER_TIMEOUT)
        if output["type"] != "websocket.send":
            tally.sockets_closed += 1
            raise SocketClosed(f"the server closed the socket: {output}")
        return json.loads(output["text"])

    exchange = Exchange(send, receive, tally)
    assert (await receive())["type"] == "session"
    try:
        for frame in sent:
            await exchange.frame(frame)
        assert not communicator.future.done(), "the application ended"
    finally:
        await communicator.disconnect(timeout=ANSWER_TIMEOUT)
    # The socket is gone from its session; a run it started goes on (runs are the
    # session's): stop it, and then nothing may be left.
    for live in live_sessions():
        assert live.sockets == [], "a socket stayed joined to its session"
        try:
            await live.cancel()
        except NotRunning:
            pass
        await live.wait_for_run()
    assert len(live_sessions()) == 0, "a live session outlived its socket and its run"
    assert limiter().open_sockets() == 0, "a socket is still counted"
    # Dropping the idle session unsubscribed it in a task of the registry's own: await the
    # registry's cleanup, as every test's end does (``stop_live_runs``), then check.
    await live_sessions().close()
    leaked = leaked_tasks(before)
    assert not leaked, f"tasks outlived the socket: {leaked}"


def test_thousands_of_generated_hostile_frames_are_each_answered_and_leave_nothing(
    hostile_settings, request
):
    tally = Tally()

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(frames(), min_size=FRAMES_PER_SOCKET, max_size=FRAMES_PER_SOCKET))
    def hostile_socket(sent: list[str | bytes]) -> None:
        asyncio.run(one_socket(sent, tally))
        if tally.sockets % 25 == 0:
            say(request, f"hostile frames: {tally.sockets} sockets, {tally.frames} frames")

    hostile_socket()
    report(request, tally.line("ASGI app, in process"))
    assert tally.frames >= 10_000
    assert tally.answered == tally.frames
    assert tally.sockets_closed == 0
    assert tally.runs_started > 100  # the frames met real runs and waits, not just errors


def test_a_request_for_a_person_is_answered_by_the_handoff_not_by_the_run_it_stops(
    hostile_settings,
):
    """``request_human`` while a run waits for an approval: the run's ``run_cancelled``
    goes out first, and the ``handoff_requested`` after it is the frame's answer."""
    tally = Tally()
    sent = [
        {"type": "user_message", "content": "note: buy milk"},
        {"type": "request_human"},
        {"type": "ping"},
    ]
    asyncio.run(one_socket([json.dumps(frame) for frame in sent], tally))
    assert tally.codes == {"run_started": 1, "handoff_requested": 1, "pong": 1}


# --- over a real socket --------------------------------------------------------------------


class Daphne:
    """``live_daphne.py`` on a fresh SQLite file, its output kept for the log check."""

    def __init__(self, work: Path) -> None:
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "REDIS_URL", "ZETT_LIMITS_REDIS_URL"}
        }
        env.update(
            DATABASE_URL=f"sqlite:///{work / 'hostile.sqlite3'}",
            DJANGO_SETTINGS_MODULE="zett_site.settings",
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY="hostile-suite-" + uuid.uuid4().hex,
            DJANGO_ALLOWED_HOSTS="127.0.0.1",
            ZETT_MODEL="tests.app.llm_doubles:KeywordModel",
            ZETT_WS_RATE_BURST="1000000000",
            ZETT_WS_RATE_PER_SECOND="1000000000",
            ZETT_MAX_CHATS_PER_HOUR="1000000",
            PYTHONUNBUFFERED="1",
        )
        self.launched = launch_daphne(env, ARTIFACTS / "hostile-daphne.log", name="hostile")
        self.port = self.launched.port

    def browser_cookie(self) -> str:
        """Visit the list page as a browser does: its answer sets the session cookie."""
        with urlopen(Request(f"http://127.0.0.1:{self.port}/"), timeout=30) as response:
            cookie = SimpleCookie()
            for header in response.headers.get_all("Set-Cookie") or []:
                cookie.load(header)
        return f"sessionid={cookie['sessionid'].value}"

    def stop(self) -> str:
        self.launched.stop(timeout=30)
        return self.launched.output()


async def daphne_sockets(server: Daphne, batches: list[list[str | bytes]], tally: Tally) -> None:
    from websockets.asyncio.client import connect

    base = f"ws://127.0.0.1:{server.port}"
    origin = f"http://127.0.0.1:{server.port}"
    chats = []
    for sent in batches:
        cookie = await asyncio.to_thread(server.browser_cookie)
        session_id = str(uuid.uuid4())
        chats.append((cookie, session_id))
        async with connect(
            f"{base}/ws/sessions/{session_id}/",
            origin=origin,
            additional_headers={"Cookie": cookie},
            max_size=None,
            ping_interval=None,
        ) as socket:
            tally.sockets += 1

            async def receive(socket=socket) -> dict:
                try:
                    text = await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT)
                except Exception as error:
                    tally.sockets_closed += 1
                    raise SocketClosed(f"no answer or a closed socket: {error!r}") from error
                return json.loads(text)

            exchange = Exchange(socket.send, receive, tally)
            assert (await receive())["type"] == "session"
            for frame in sent:
                await exchange.frame(frame)
    # Ordinary disconnects: in the middle of a streaming answer, and while a run waits.
    for content, until in (("a long answer", "text_delta"), ("note: x", "custom")):
        cookie = await asyncio.to_thread(server.browser_cookie)
        session_id = str(uuid.uuid4())
        chats.append((cookie, session_id))
        async with connect(
            f"{base}/ws/sessions/{session_id}/",
            origin=origin,
            additional_headers={"Cookie": cookie},
            max_size=None,
        ) as socket:
            await socket.send(json.dumps({"type": "user_message", "content": content}))
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT))
                if frame.get("event", {}).get("type") == until:
                    break
    # Runs are the chats', not the sockets': each went on without its socket. The long
    # answer finishes by itself; the approval still waits, and Stop ends it. Either way
    # nothing stays busy.
    for cookie, session_id in chats:
        async with connect(
            f"{base}/ws/sessions/{session_id}/",
            origin=origin,
            additional_headers={"Cookie": cookie},
            max_size=None,
        ) as socket:
            first = json.loads(await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT))
            assert first["type"] == "session", first
            stopped = completed = False
            while first["active_request_id"] is not None:
                frame = json.loads(await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT))
                event = frame.get("event", {})
                if event.get("type") == "custom" and not stopped:
                    await socket.send(json.dumps({"type": "cancel"}))
                    stopped = True
                completed = event.get("type") == "run_completed"
                if completed or frame["type"] == "run_cancelled":
                    break
            await socket.send(json.dumps({"type": "user_message", "content": "hello"}))
            started = json.loads(await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT))
            if stopped and completed and started.get("code") == "not_running":
                # The run ended by itself right after its custom event, before the Stop
                # arrived: this is the Stop's answer, and the message's comes next.
                started = json.loads(await asyncio.wait_for(socket.recv(), ANSWER_TIMEOUT))
            assert started["type"] == "run_started", f"the chat stayed busy: {started}"


def test_hostile_frames_over_a_real_socket_to_daphne(tmp_path, request):
    drawn: list[list[str | bytes]] = []

    # Hypothesis's first example is its simplest (all frames alike): one more, skipped.
    @settings(
        max_examples=DAPHNE_SOCKETS + 1,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        st.lists(
            frames(ascii_only=True, failing=False),
            min_size=DAPHNE_FRAMES_PER_SOCKET,
            max_size=DAPHNE_FRAMES_PER_SOCKET,
        )
    )
    def draw(batch: list[str | bytes]) -> None:
        drawn.append(batch)

    draw()
    tally = Tally()
    server = Daphne(tmp_path)
    try:
        asyncio.run(daphne_sockets(server, drawn[-DAPHNE_SOCKETS:], tally))
    finally:
        log = server.stop()
    report(request, tally.line("daphne, real socket"))
    assert tally.frames == DAPHNE_SOCKETS * DAPHNE_FRAMES_PER_SOCKET
    assert tally.answered == tally.frames
    assert tally.sockets_closed == 0
    noisy = [
        line
        for line in log.splitlines()
        if any(word in line for word in ("Traceback", "WARNING", "ERROR", "Exception"))
    ]
    assert noisy == [], log[-5000:]
