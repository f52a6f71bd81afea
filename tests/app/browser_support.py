"""Shared helpers of the browser tests (``tests/app/test_browser*.py``); their fixtures are
in ``browser_fixtures.py``, which every browser test file loads as a plugin, so all of them
share two live servers for the whole run:

- ``daphne_server``: the app as users run it by default, on the offline demo model, whose
  flows are the product's own (it really calls the calculator, asks through ``ask_user``,
  asks for approval before ``save_note`` writes a row);
- ``scripted_server``: the scripted LLM of ``browser_model.py``, for what the demo never
  does (reasoning, cut-offs, failures, code, a stream that stalls until stopped).

Each server (``live_daphne.py``) runs in its own process on a fresh SQLite file. The browser
is Debian's ``chromium`` driven by Playwright; without it the tests skip locally and fail
under CI (``CI=true``), where ``.ci/run`` installs it.

``page`` takes an indirect parameter: a viewport and a colour scheme. ``EVERY_LAYOUT``
parametrizes a test over 1280 px and 375 px, light and dark. ``SocketGate`` stands between
the page and the server's socket, to drop the link, keep it down, rewrite frames the page
receives or answer a frame in the server's place.

Every wait is on a condition (Playwright's ``expect`` and locators), never a sleep.
Screenshots of each test's last state land in ``tests/app/artifacts/``.
"""

from __future__ import annotations

import json
import os
import queue
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
AXE_SCRIPT = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Generous, because two cores run the server, the browser and pytest at once. A bound on
#: waiting for a condition, not a pause.
WAIT_MS = 20_000
SERVER_START_TIMEOUT_S = 120
CHAT_URL = re.compile(r"/s/[0-9a-f-]{36}/$")
SOCKET_URL = re.compile(r"/ws/sessions/")

WIDE = {"width": 1280, "height": 820}
NARROW = {"width": 375, "height": 740}
LAYOUTS = {
    "wide-light": {**WIDE, "color_scheme": "light"},
    "wide-dark": {**WIDE, "color_scheme": "dark"},
    "narrow-light": {**NARROW, "color_scheme": "light"},
    "narrow-dark": {**NARROW, "color_scheme": "dark"},
}
#: Run a test at 1280 px and 375 px, in light and dark mode.
EVERY_LAYOUT = pytest.mark.parametrize(
    "page", list(LAYOUTS.values()), ids=list(LAYOUTS), indirect=True
)


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; the browser test must run in CI", pytrace=False)
    pytest.skip(reason)


try:
    from playwright.sync_api import Page, WebSocketRoute, expect
except ImportError:  # pragma: no cover - depends on the machine; the fixtures skip then
    pass
else:
    expect.set_options(timeout=WAIT_MS)


# --- the live servers ----------------------------------------------------------------------


@dataclass
class LiveServer:
    """A Daphne process serving the app, and the SQLite file it writes."""

    url: str
    database: Path
    log: Path

    def rows(self, sql: str, *params: object) -> list[tuple]:
        """Query the server's database read-only: what the app really stored."""
        with closing(sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)) as connection:
            return connection.execute(sql, params).fetchall()


def _read_lines(stream, lines: queue.Queue, log_path: Path) -> None:
    with log_path.open("w") as log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.put(line)
    lines.put(None)


@contextmanager
def serve(work: Path, name: str, model: str) -> Iterator[LiveServer]:
    """Run ``live_daphne.py`` on a fresh SQLite file with ``model``; stop it on exit."""
    database = work / f"{name}.sqlite3"
    ARTIFACTS.mkdir(exist_ok=True)
    log_path = ARTIFACTS / f"{name}-server.log"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        DATABASE_URL=f"sqlite:///{database}",
        DJANGO_SETTINGS_MODULE="zett_site.settings",
        DJANGO_DEBUG="1",
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        ZETT_MODEL=model,
        ZETT_DEMO_PACE="0",
        PYTHONUNBUFFERED="1",
    )
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("live_daphne.py"))],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(
        target=_read_lines, args=(process.stdout, lines, log_path), daemon=True
    )
    reader.start()
    try:
        port = _wait_for_port(lines, log_path)
        yield LiveServer(url=f"http://127.0.0.1:{port}", database=database, log=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=15)


def _wait_for_port(lines: queue.Queue, log_path: Path) -> int:
    while True:
        try:
            line = lines.get(timeout=SERVER_START_TIMEOUT_S)
        except queue.Empty:
            raise RuntimeError(
                f"Daphne did not report its port within {SERVER_START_TIMEOUT_S} s"
            ) from None
        if line is None:
            raise RuntimeError(f"Daphne exited before listening; see {log_path}")
        if line.startswith("LISTENING "):
            return int(line.split()[1])


# --- the browser ---------------------------------------------------------------------------


@dataclass
class PageProbe:
    """JavaScript errors and WebSocket frames the page produced during one test."""

    errors: list[str] = field(default_factory=list)
    frames: list[dict] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def frames_of(self, event_type: str) -> list[dict]:
        return [
            frame
            for frame in self.frames
            if frame.get("type") == "agent_event" and frame["event"]["type"] == event_type
        ]


def is_narrow(page: Page) -> bool:
    return page.viewport_size["width"] < 600


# --- acting as a user ----------------------------------------------------------------------


def open_new_chat(page: Page, server: LiveServer) -> str:
    """Start a chat from the list page, as a user would; return its session id."""
    page.goto(f"{server.url}/")
    new_chat = page.get_by_role("button", name="New chat").or_(
        page.get_by_role("link", name="New chat")
    )
    new_chat.first.click()
    expect(page).to_have_url(CHAT_URL)
    expect(page.locator("#connection-label")).to_have_text("Connected")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def composer(page: Page):
    return page.locator("#composer-input")


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def last_answer(page: Page):
    return page.locator(".msg--assistant").last


def expect_idle(page: Page) -> None:
    """The run is over: the composer sends again and Stop is gone."""
    expect(page.locator("#send-button")).to_have_text("Send")
    expect(page.locator("#stop-button")).to_be_hidden()


def open_sidebar(page: Page):
    """The chat list, opened first when it is a drawer (narrow screens)."""
    sidebar = page.get_by_role("navigation", name="Chats")
    if is_narrow(page):
        page.get_by_role("button", name="Chats").click()
    expect(sidebar).to_be_visible()
    return sidebar


# --- the socket ----------------------------------------------------------------------------

#: Keeps a handle on every WebSocket the page opens, so a test can drop the link the way a
#: flaky network would, without touching the server.
TRACK_SOCKETS = """
window.zettSockets = [];
const NativeWebSocket = window.WebSocket;
window.WebSocket = class extends NativeWebSocket {
  constructor(...args) {
    super(...args);
    window.zettSockets.push(this);
  }
};
"""


def drop_socket(page: Page) -> None:
    page.evaluate("window.zettSockets.at(-1).close()")


Frame = dict[str, Any]


class SocketGate:
    """Routes the page's chat sockets through the test, to the real server.

    - ``block()`` / ``unblock()``: while blocked, every new socket is closed at once, as
      when the server cannot be reached; ``drop()`` closes the current one.
    - ``rewrite``: called with each frame the server sends; returns the frame the page
      gets (changed or not), or None to withhold it.
    - ``answer``: called with each frame the page sends; a frame it returns goes back to
      the page in the server's place and the page's frame is not forwarded.
    """

    def __init__(self, page: Page) -> None:
        self.blocked = False
        self.current: WebSocketRoute | None = None
        self.sent: list[Frame] = []
        self.rewrite: Callable[[Frame], Frame | None] = lambda frame: frame
        self.answer: Callable[[Frame], Frame | None] = lambda frame: None
        page.route_web_socket(SOCKET_URL, self._route)

    def block(self) -> None:
        self.blocked = True

    def unblock(self) -> None:
        self.blocked = False

    def drop(self) -> None:
        assert self.current is not None, "no socket to drop"
        self.current.close(code=1001, reason="dropped by the test")

    def _route(self, socket: WebSocketRoute) -> None:
        if self.blocked:
            socket.close(code=1001, reason="blocked by the test")
            return
        server = socket.connect_to_server()
        self.current = socket
        socket.on_message(lambda message: self._from_page(socket, server, message))
        server.on_message(lambda message: self._from_server(socket, message))

    def _from_page(self, socket: WebSocketRoute, server: WebSocketRoute, message) -> None:
        frame = json.loads(message)
        self.sent.append(frame)
        reply = self.answer(frame)
        if reply is None:
            server.send(message)
        else:
            socket.send(json.dumps(reply))

    def _from_server(self, socket: WebSocketRoute, message) -> None:
        frame = self.rewrite(json.loads(message))
        if frame is not None:
            socket.send(json.dumps(frame))


# --- accessibility -------------------------------------------------------------------------


def axe_violations(page: Page, impacts: tuple[str, ...] = ("serious", "critical")) -> list[dict]:
    """Run the vendored axe-core on the page; the violations of the given impacts."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_SCRIPT.read_text())
    result = page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations.map((v) => ({
            id: v.id,
            impact: v.impact,
            help: v.help,
            nodes: v.nodes.map((n) => ({ target: n.target, summary: n.failureSummary })),
          }));
        }"""
    )
    return [violation for violation in result if violation["impact"] in impacts]
