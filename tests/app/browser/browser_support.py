"""Shared helpers of the browser tests (``tests/app/browser/test_browser*.py``); their fixtures are
in ``browser_fixtures.py``, which every browser test file loads as a plugin, so all of them
share the live servers for the whole run:

- ``daphne_server``: the app as users run it by default, on the offline demo model, whose
  flows are the product's own (it really calls the calculator, asks through ``ask_user``,
  asks for approval before ``save_note`` writes a row);
- ``scripted_server``: the scripted LLM of ``browser_model.py``, for what the demo never
  does (reasoning, cut-offs, failures, code, a stream that stalls until stopped);
- ``tight_server``: the demo model with a reply deadline of a few seconds and a ``session``
  frame of a few messages, for countdowns, expiry and paging.

``RestartableServer`` is a server a test crashes (SIGKILL) and starts again on the same
database and port; ``transcript_snapshot`` reads the conversation as a reader sees it, to
compare a page before and after a reload.

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
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.app.servers import ARTIFACTS, TEST_SHUTDOWN_GRACE, Launched, launch_daphne

ROOT = Path(__file__).resolve().parents[3]
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
CHAT_URL = re.compile(r"/s/[0-9a-f-]{36}/$")
SOCKET_URL = re.compile(r"/ws/sessions/")

#: Seconds a question or approval waits on ``tight_server``.
TIGHT_REPLY_TIMEOUT = 6
#: Messages in the ``session`` frame on ``tight_server``.
TIGHT_HISTORY_PAGE = 4

WIDE = {"width": 1280, "height": 820}
#: Seconds a host-page tool waits for a page on the ``widget_host`` server.
WIDGET_TOOL_TIMEOUT = 3
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


def _server_env(database: Path, model: str, extra: dict[str, str]) -> dict[str, str]:
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
        ZETT_SHUTDOWN_GRACE=TEST_SHUTDOWN_GRACE,
    )
    env.update(extra)
    return env


@contextmanager
def serve(
    work: Path, name: str, model: str, env: dict[str, str] | None = None, *args: str
) -> Iterator[LiveServer]:
    """Run ``live_daphne.py`` on a fresh SQLite file with ``model`` (and ``env`` on top of
    the test environment, ``args`` on its command line); stop it on exit."""
    database = work / f"{name}.sqlite3"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTIFACTS / f"{name}-server.log"
    launched = launch_daphne(_server_env(database, model, env or {}), log_path, *args, name=name)
    try:
        yield LiveServer(url=f"http://127.0.0.1:{launched.port}", database=database, log=log_path)
    finally:
        launched.stop()


class RestartableServer(LiveServer):
    """A live server a test can crash (SIGKILL: no cleanup at all, as in an OOM kill) and
    start again on the same database and port, so open pages reconnect to it."""

    def __init__(self, work: Path, name: str, model: str, env: dict[str, str] | None = None):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        database = work / f"{name}.sqlite3"
        super().__init__(url="", database=database, log=ARTIFACTS / f"{name}-server-0.log")
        self.name = name
        self.env = _server_env(database, model, env or {})
        self.port = 0
        self.starts = 0
        self.launched: Launched | None = None

    def start(self) -> None:
        self.starts += 1
        self.log = ARTIFACTS / f"{self.name}-server-{self.starts}.log"
        args = ("--port", str(self.port)) if self.port else ()
        self.launched = launch_daphne(self.env, self.log, *args, name=self.name)
        self.port = self.launched.port
        self.url = f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        assert self.launched is not None
        self.launched.kill()

    def stop(self) -> None:
        if self.launched is not None:
            self.launched.stop()


# --- the browser ---------------------------------------------------------------------------


@dataclass
class PageProbe:
    """JavaScript errors and WebSocket frames the page produced during one test."""

    errors: list[str] = field(default_factory=list)
    frames: list[dict] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    #: Texts of errors the test causes on purpose, dropped whenever they are logged.
    forgiven: list[str] = field(default_factory=list)

    def forgive(self, text: str) -> None:
        """Drop the logged errors that contain ``text`` (ones the test caused on purpose),
        those logged already and those the browser reports later (its console messages
        reach the test asynchronously, sometimes after the step that caused them)."""
        self.forgiven.append(text)
        self.errors[:] = self.unforgiven()

    def unforgiven(self) -> list[str]:
        """The logged errors no ``forgive`` covers."""
        return [e for e in self.errors if not any(text in e for text in self.forgiven)]

    def frames_of(self, event_type: str) -> list[dict]:
        return [
            frame
            for frame in self.frames
            if frame.get("type") == "agent_event" and frame["event"]["type"] == event_type
        ]


def reconnect_now(page: Page) -> None:
    """Skip the page's backoff wait, as the browser's ``online`` event does (pressing Retry
    now races the page's own next attempt, which hides the button)."""
    page.evaluate("window.dispatchEvent(new Event('online'))")


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


#: What a reader sees in the conversation, one line per block, without times: user
#: messages, steers (and their state), answers (stopped or not), reasoning, tool cards
#: (name and state), widgets (state, question, outcome), notes and answer footers.
SNAPSHOT = """() => {
  const text = (node) => (node ? node.textContent.replace(/\\s+/g, " ").trim() : "");
  const lines = [];
  for (const item of document.querySelectorAll("#transcript > :not(.transcript__head)")) {
    if (item.matches(".msg--user")) {
      lines.push(`user: ${text(item.querySelector(".msg__body"))}`);
      continue;
    }
    if (!item.matches(".turn")) {
      lines.push(`other: ${text(item)}`);
      continue;
    }
    for (const block of item.children) {
      if (block.matches(".msg--steer")) {
        const tag = text(block.querySelector(".msg__tag"));
        const body = text(block.querySelector(".msg__body"));
        lines.push(`steer [${block.dataset.steer}] ${tag}: ${body}`);
      } else if (block.matches(".msg--assistant")) {
        const stopped = block.classList.contains("is-stopped") ? " (stopped)" : "";
        lines.push(`answer${stopped}: ${text(block)}`);
      } else if (block.matches(".reasoning")) {
        lines.push(`reasoning: ${text(block.querySelector(".reasoning__body"))}`);
      } else if (block.matches(".tool-card")) {
        const name = text(block.querySelector(".tool-card__name"));
        lines.push(`tool ${name} [${block.dataset.state}]`);
      } else if (block.matches(".widget")) {
        const question = text(block.querySelector(".widget__question"));
        const outcome = text(block.querySelector(".widget__status"));
        lines.push(`widget [${block.dataset.state}] ${question} -> ${outcome}`);
      } else if (block.matches(".note")) {
        lines.push(`note: ${text(block)}`);
      } else if (block.matches(".turn__meta")) {
        const copy = block.querySelector(".copy-button") ? "copy " : "";
        lines.push(`footer: ${copy}${text(block.querySelector(".turn__usage"))}`);
      } else {
        lines.push(`other: ${text(block)}`);
      }
    }
  }
  return lines;
}"""


def transcript_snapshot(page: Page) -> list[str]:
    """The conversation as a reader sees it (``SNAPSHOT``), to compare before and after a
    reload."""
    return page.evaluate(SNAPSHOT)


def wait_for_value(page: Page, expression: str, expected: object) -> None:
    """Wait until ``expression`` evaluates to ``expected`` in the page.

    Not ``page.wait_for_function``: that evaluates its predicate with ``eval`` inside the
    page, which the page's Content-Security-Policy forbids; ``page.evaluate`` is not.
    """
    deadline = time.monotonic() + WAIT_MS / 1000
    while (value := page.evaluate(expression)) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"{expression} is {value!r}, not {expected!r}")
        page.wait_for_timeout(20)


def expect_connected(page: Page) -> None:
    expect(page.locator("#connection-label")).to_have_text("Connected")


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
      the page in the server's place and the page's frame is not forwarded
      (``SocketGate.SWALLOW``: nothing goes back, nothing is forwarded).
    - ``drop_after``: frame types whose first sending drops the link right after the frame
      went on to the server (as when a network dies mid-conversation).
    - ``hold(*types)``: frames of these types are kept back until ``release()``.
    - ``sent`` and ``seen``: every frame the page sent, every frame the server sent.
    """

    SWALLOW: Any = object()

    def __init__(self, page: Page) -> None:
        self.drop_after: set[str] = set()
        self.blocked = False
        self.current: WebSocketRoute | None = None
        self.sent: list[Frame] = []
        self.seen: list[Frame] = []
        self.holding: set[str] = set()
        self.held: list[Frame] = []
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

    def hold(self, *types: str) -> None:
        self.holding = set(types)

    def release(self) -> None:
        """Send the held frames to the page, in order, and hold nothing more."""
        assert self.current is not None, "no socket to release frames to"
        self.holding = set()
        held, self.held = self.held, []
        for frame in held:
            self.current.send(json.dumps(frame))

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
        if reply is self.SWALLOW:
            return
        if reply is not None:
            socket.send(json.dumps(reply))
            return
        server.send(message)
        if frame.get("type") in self.drop_after:
            self.drop_after.discard(frame["type"])
            socket.close(code=1001, reason="dropped by the test")

    def _from_server(self, socket: WebSocketRoute, message) -> None:
        self.seen.append(json.loads(message))
        frame = self.rewrite(json.loads(message))
        if frame is not None and frame.get("type") in self.holding:
            self.held.append(frame)
        elif frame is not None:
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
