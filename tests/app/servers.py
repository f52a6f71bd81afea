"""Real daphne processes for the tests that kill, restart and multiply servers.

``DaphneProcess`` runs ``live_daphne.py`` with an environment of the test's choosing (its
database, channel layer, model) and waits for its ``LISTENING <port>`` line, never for
time. ``kill()`` is SIGKILL — the process gets no chance to clean up, as in a crash or an
OOM kill — and ``start()`` again brings up a new process on the same database. Each
process's output goes to ``tests/app/artifacts/<name>-<n>.log`` for a failing test to read.

``socket()`` opens a real WebSocket client connection (the ``websockets`` library) to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
#: Generous: two cores may be running two servers, the tests and a browser at once.
START_TIMEOUT_S = 120
RECEIVE_TIMEOUT_S = 30


@contextmanager
def fresh_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty database of ``kind`` (``sqlite`` or ``postgres``) for one test."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'server.sqlite3'}"
        return
    import psycopg

    from tests.app.services import POSTGRES_URL, require_service

    url = require_service("PostgreSQL", POSTGRES_URL)
    name = f"zett_test_{uuid.uuid4().hex[:12]}"
    admin = urlsplit(url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(env: dict[str, str]) -> None:
    """Migrate the database ``env`` names once, before several workers start on it."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=START_TIMEOUT_S,
    )


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a test server: this one, minus what selects services, plus those."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "ZETT_MODEL"}
    }
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="zett_site.settings",
        DJANGO_DEBUG="1",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
        ZETT_LOG_LEVEL="INFO",
    )
    env.update(extra)
    return env


@dataclass
class DaphneProcess:
    """One daphne worker process that a test can start, kill and start again."""

    name: str
    env: dict[str, str]
    migrate: bool = True
    port: int = 0
    process: subprocess.Popen[str] | None = None
    starts: int = 0
    clients: list[Client] = field(default_factory=list)
    #: The anonymous browser the test's sockets belong to (one, shared by the workers
    #: of a cluster, whose sessions live in the database).
    cookie: str | None = None
    _reader: threading.Thread | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return ARTIFACTS / f"{self.name}-{self.starts}.log"

    def start(self) -> DaphneProcess:
        """Start the process and wait until it listens."""
        ARTIFACTS.mkdir(exist_ok=True)
        self.starts += 1
        command = [sys.executable, str(Path(__file__).with_name("live_daphne.py"))]
        if not self.migrate:
            command.append("--no-migrate")
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(
            target=_copy_lines, args=(self.process.stdout, lines, self.log_path), daemon=True
        )
        self._reader.start()
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.kill()
                raise RuntimeError(f"{self.name} did not listen; see {self.log_path}") from None
            if line is None:
                raise RuntimeError(f"{self.name} exited before listening; see {self.log_path}")
            if line.startswith("LISTENING "):
                self.port = int(line.split()[1])
                return self

    def kill(self) -> None:
        """SIGKILL: a crash, with no cleanup at all."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        self._reap()

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM, then wait for the process to exit; returns its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return self._reap()

    def _reap(self) -> int | None:
        if self.process is None:
            return None
        status = self.process.wait()
        if self._reader is not None:
            self._reader.join(timeout=15)
        return status

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def ws_url(self, session_id: str, after_seq: int | None = None) -> str:
        query = "" if after_seq is None else f"?after_seq={after_seq}"
        return f"ws://127.0.0.1:{self.port}/ws/sessions/{session_id}/{query}"

    def browser_cookie(self) -> str:
        """The session cookie a first page visit gives an anonymous browser (``sessionid=…``)."""
        response = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=60)
        cookies = SimpleCookie()
        for header in response.headers.get_all("Set-Cookie") or ():
            cookies.load(header)
        return f"sessionid={cookies['sessionid'].value}"

    async def socket(
        self, session_id: str, after_seq: int | None = None, *, cookie: str | None = None
    ) -> Client:
        """A client of ``session_id`` for the test's browser (``cookie``: another one)."""
        if cookie is None:
            if self.cookie is None:
                self.cookie = await asyncio.to_thread(self.browser_cookie)
            cookie = self.cookie
        connection = await websockets.connect(
            self.ws_url(session_id, after_seq),
            max_size=2**21,
            open_timeout=RECEIVE_TIMEOUT_S,
            additional_headers={"Cookie": cookie},
        )
        client = Client(connection)
        self.clients.append(client)
        client.session_frame = await client.expect("session")
        return client

    async def close_clients(self) -> None:
        """Close every client this process handed out (a test's teardown)."""
        for client in self.clients:
            await client.close()
        self.clients.clear()


def _copy_lines(stream: Any, lines: queue.Queue[str | None], log_path: Path) -> None:
    with log_path.open("w") as log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.put(line)
    lines.put(None)


class Client:
    """A real WebSocket client speaking the frame protocol."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.session_frame: dict[str, Any] = {}
        self.frames: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(frame))

    async def receive(self) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.connection.recv(), RECEIVE_TIMEOUT_S)
        frame = json.loads(raw)
        self.frames.append(frame)
        return frame

    async def expect(self, frame_type: str) -> dict[str, Any]:
        frame = await self.receive()
        assert frame["type"] == frame_type, f"expected {frame_type}, got {frame}"
        return frame

    async def until(self, match) -> list[dict[str, Any]]:
        frames = []
        while True:
            frame = await self.receive()
            frames.append(frame)
            if match(frame):
                return frames

    async def close(self) -> None:
        await self.connection.close()

    @property
    def last_seq(self) -> int:
        return max((frame["seq"] for frame in self.frames if "seq" in frame), default=0)


def provider_valid(history: list[dict[str, Any]], pending: list[dict[str, Any]]) -> bool:
    """Whether every tool call in ``history`` has its result (paused calls excepted)."""
    waiting = {item["tool_call_id"] for item in pending}
    open_calls: set[str] = set()
    for item in history:
        if item["role"] == "tool":
            open_calls.discard(item["tool_call_id"])
            continue
        if open_calls - waiting:
            return False
        open_calls = {call["id"] for call in item.get("tool_calls") or ()}
    return not (open_calls - waiting)
