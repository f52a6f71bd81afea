"""Real daphne processes: the one launcher of the tests (browser, processes, hostile input).

``launch_daphne`` starts ``live_daphne.py`` and returns once it printed ``LISTENING <port>``
(a ``Launched`` process, its output copied to a log file and kept in memory).
``DaphneProcess`` runs ``live_daphne.py`` with an environment of the test's choosing (its
database, channel layer, model) and waits for its ``LISTENING <port>`` line, never for
time. ``kill()`` is SIGKILL — the process gets no chance to clean up, as in a crash or an
OOM kill — and ``start()`` again brings up a new process on the same database. Each
process's output goes to ``tests/app/artifacts/[<worker>/]<name>-<n>.log`` for a failing test
to read.

``crash_and_restart()`` is both, as a supervisor restarts a crashed worker.

``socket()`` opens a real WebSocket client connection (the ``websockets`` library) to it.
``one_worker`` gives one of them on a new database; ``two_workers`` a cluster: two of them
on one PostgreSQL database and one Redis.
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
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection

from tests.parallel import worker_id

ROOT = Path(__file__).resolve().parents[2]
#: Logs and screenshots; a subfolder per xdist worker (``tests/parallel.py``), whose
#: servers of the same name would otherwise write the same files.
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / worker_id()
#: Generous: two cores may be running two servers, the tests and a browser at once.
START_TIMEOUT_S = 120
RECEIVE_TIMEOUT_S = 30
#: Seconds a test server stopped with SIGTERM lets its runs finish (a test of the drain sets
#: its own): a stop at a test's end need not wait the deployed default for a run that waits
#: on a question nobody will answer.
TEST_SHUTDOWN_GRACE = "1"
#: The line ``live_daphne.py`` prints once it listens.
READY_PREFIX = "LISTENING "


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
        ZETT_SHUTDOWN_GRACE=TEST_SHUTDOWN_GRACE,
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
    _launched: Launched | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return ARTIFACTS / f"{self.name}-{self.starts}.log"

    def start(self) -> DaphneProcess:
        """Start the process and wait until it listens."""
        self.starts += 1
        args = () if self.migrate else ("--no-migrate",)
        self._launched = launch_daphne(self.env, self.log_path, *args, name=self.name)
        self.process, self.port = self._launched.process, self._launched.port
        return self

    def kill(self) -> None:
        """SIGKILL: a crash, with no cleanup at all."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        self._reap()

    async def crash_and_restart(self) -> DaphneProcess:
        """SIGKILL, let go of the dead process's clients, start a new process on the same
        database and wait until it listens (what a supervisor does after a crash)."""
        self.kill()
        await self.close_clients()
        return self.start()

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
        if self._launched is not None:
            self._launched.reader.join(timeout=15)
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
        self,
        session_id: str,
        after_seq: int | None = None,
        *,
        cookie: str | None = None,
        token: str | None = None,
    ) -> Client:
        """A client of ``session_id`` for the test's browser (``cookie``: another one), or,
        with an API ``token``'s secret, a program's socket of its user (no cookie)."""
        if token is not None:
            headers = {"Authorization": f"Bearer {token}"}
        else:
            if cookie is None:
                if self.cookie is None:
                    self.cookie = await asyncio.to_thread(self.browser_cookie)
                cookie = self.cookie
            headers = {"Cookie": cookie}
        connection = await websockets.connect(
            self.ws_url(session_id, after_seq),
            max_size=2**21,
            open_timeout=RECEIVE_TIMEOUT_S,
            additional_headers=headers,
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


@asynccontextmanager
async def one_worker(
    name: str, tmp_path: Path, *, database: str = "sqlite", **settings: str
) -> AsyncIterator[tuple[DaphneProcess, str]]:
    """One worker ``name`` on a new database of ``database``'s kind (it migrates it at
    start-up), ``settings`` in its environment: ``(server, database_url)``. Its clients are
    closed and it is stopped on the way out."""
    with fresh_database(database, tmp_path) as database_url:
        server = DaphneProcess(name, server_env(database_url, **settings)).start()
        try:
            yield server, database_url
        finally:
            await server.close_clients()
            server.stop()


@asynccontextmanager
async def two_workers(
    name: str,
    tmp_path: Path,
    *,
    each: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
    **settings: str,
) -> AsyncIterator[tuple[DaphneProcess, DaphneProcess, str]]:
    """Two workers ``<name>-one`` and ``<name>-two`` on a new PostgreSQL database (migrated
    once) and the test Redis (flushed before and after), one browser's cookie on both:
    ``(one, two, database_url)``. ``settings`` go to both, ``each`` to one of them.

    Both are stopped on the way out; a test that reads what they left (their database,
    their files) once they are gone may stop them first (``stop()`` twice is harmless)."""
    import redis

    from tests.app.services import REDIS_URL, require_service

    redis_url = require_service("Redis", REDIS_URL)
    store = redis.Redis.from_url(redis_url)
    store.flushdb()
    workers: list[DaphneProcess] = []
    try:
        with fresh_database("postgres", tmp_path) as database_url:
            env = server_env(database_url, REDIS_URL=redis_url, **settings)
            migrate(env)
            try:
                for suffix, extra in zip(("one", "two"), each, strict=True):
                    worker = DaphneProcess(f"{name}-{suffix}", {**env, **extra}, migrate=False)
                    workers.append(worker)
                    worker.start()
                one, two = workers
                one.cookie = two.cookie = one.browser_cookie()  # one browser, on both workers
                yield one, two, database_url
            finally:
                for worker in workers:
                    await worker.close_clients()
                for worker in workers:
                    worker.stop()
    finally:
        store.flushdb()
        store.close()


@dataclass(eq=False)
class Launched:
    """A started ``live_daphne.py``: the process, its port and its output."""

    process: subprocess.Popen[str]
    port: int
    log_path: Path
    reader: threading.Thread
    #: Every line the process printed so far.
    lines: list[str]

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; its exit status once its output is read."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return self.kill()

    def kill(self) -> int:
        """SIGKILL: a crash, with no cleanup at all."""
        if self.process.poll() is None:
            self.process.kill()
        status = self.process.wait()
        self.reader.join(timeout=15)
        return status

    def output(self) -> str:
        return "".join(self.lines)


def launch_daphne(
    env: dict[str, str], log_path: Path, *args: str, name: str = "daphne"
) -> Launched:
    """Start ``live_daphne.py`` (``args``: ``--port N``, ``--no-migrate``) with ``env``; return
    once it listens. Its output goes to ``log_path`` and ``Launched.lines``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("live_daphne.py")), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    ready: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(
        target=_copy_lines, args=(process.stdout, lines, ready, log_path), daemon=True
    )
    reader.start()
    while True:
        try:
            line = ready.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            process.kill()
            process.wait()
            raise RuntimeError(f"{name} did not listen; see {log_path}") from None
        if line is None:
            process.wait()
            raise RuntimeError(
                f"{name} exited before listening; see {log_path}:\n" + "".join(lines)
            )
        if line.startswith(READY_PREFIX):
            return Launched(process, int(line.split()[1]), log_path, reader, lines)


def _copy_lines(
    stream: Any, lines: list[str], ready: queue.Queue[str | None], log_path: Path
) -> None:
    with log_path.open("w") as log:
        for line in stream:
            log.write(line)
            log.flush()
            lines.append(line)
            if line.startswith(READY_PREFIX):
                ready.put(line)
    ready.put(None)


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
