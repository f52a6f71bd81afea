"""The servers of the socket benchmarks: daphne workers, their databases, a browser's cookie.

Shared by ``bench.socket``, ``bench.history``, ``bench.resume_stress`` and
``bench.cluster_stress``. A server is ``daphne`` in a subprocess on a free ``127.0.0.1``
port, serving the real site (``zett_site.asgi``) with the benchmark's zero-latency model
(``bench.zett_model:socket_model``) and the per-person limits lifted (one benchmark client
is one browser holding hundreds of sockets and sending thousands of frames a second).

- one worker: a throw-away SQLite file, in ``/dev/shm`` when the machine has it;
- several workers: a PostgreSQL database created for the run and dropped after it, and
  Redis (database 11 unless ``--redis`` says otherwise), flushed before and after.

Everything started here is stopped by the context manager that started it, and every wait
has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlsplit

from tests.app.servers import Launched, launch_daphne

__all__ = [
    "DEFAULT_POSTGRES",
    "DEFAULT_REDIS",
    "REPO",
    "Server",
    "browser_cookie",
    "cpu_seconds_of",
    "dbtool",
    "flushed_redis",
    "free_port",
    "load_average",
    "migrate",
    "postgres_database",
    "rss_of",
    "scratch_dir",
    "site_env",
]

REPO = Path(__file__).resolve().parent.parent
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SITE_APP = "zett_site.asgi:application"
#: What ``tests/app/live_daphne.py`` prints once it listens.
READY = "LISTENING "
DEFAULT_POSTGRES = os.environ.get(
    "BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
#: Limits per person, lifted: one client process is one browser with many sockets.
LIFTED_LIMITS = {
    "ZETT_WS_RATE_BURST": "1000000000",
    "ZETT_WS_RATE_PER_SECOND": "1000000000",
    "ZETT_WS_MAX_SOCKETS_PER_PERSON": "100000",
    "ZETT_WS_MAX_SOCKETS_PER_SESSION": "100000",
    "ZETT_MAX_CHATS_PER_HOUR": "100000000",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def daphne_of(
    tree: Path, env: dict[str, str], app: str, log: Path, prefix: Sequence[str] = ()
) -> Iterator[tuple[int, int]]:
    """``(port, pid)`` of ``app`` of ``tree`` on daphne (run under ``prefix``, a valgrind
    command say), ready for connections; stopped on exit (killed when it does not stop)."""
    port = free_port()
    command = [*prefix, sys.executable, str(tree / "tests/app/live_daphne.py")]
    command += ["--port", str(port), "--no-migrate", "--app", app, "--quiet"]
    with log.open("w") as errors:
        process = subprocess.Popen(
            command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith(READY):
                    break
            else:
                raise RuntimeError(f"the server did not start; see {log}")
            pin_server(process.pid)
            yield port, process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=300 if prefix else 30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def pin_server(pid: int) -> None:
    """Pin every thread of server ``pid`` to the CPUs ``ZETT_BENCH_SERVER_CPUS`` lists
    (``0`` or ``0,1``), when it is set: threads started later inherit it from theirs."""
    cpus = os.environ.get("ZETT_BENCH_SERVER_CPUS")
    if not cpus:
        return
    chosen = {int(cpu) for cpu in cpus.split(",")}
    for task in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(task), chosen)


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def cpu_seconds_of(pid: int) -> float:
    """CPU time of ``pid`` so far, in seconds (nanosecond resolution), threads that have
    ended included.

    Read from the kernel's CPU-time clock of the whole process (``clock_getcpuclockid``'s
    clock id, ``CPUCLOCK_SCHED``): it keeps counting the run time of threads that ended, such
    as the thread Django starts for each HTTP request, which a sum over
    ``/proc/<pid>/task/*`` would miss. ``/proc/<pid>/stat`` counts in clock ticks (10 ms),
    too coarse for a few hundred milliseconds of work: the fallback only.
    """
    try:
        return time.clock_gettime_ns(_process_clock(pid)) / 1e9
    except OSError:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _process_clock(pid: int) -> int:
    """The clock id of ``pid``'s process-wide CPU time (Linux: ``MAKE_PROCESS_CPUCLOCK``)."""
    return ((~pid) << 3) | 2


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def scratch_dir() -> str | None:
    """``/dev/shm`` when writable: a throw-away SQLite file there pays no disk fsyncs."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def site_env(database_url: str, *, redis_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a benchmark server (and of ``manage.py`` on its database)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "DATABASE_URL", "ZETT_LIMITS_REDIS_URL", "ZETT_MODEL"}
    }
    env.update(
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="zett_site.settings",
        # The same key for every worker of a run: they share the browsers' sessions.
        DJANGO_SECRET_KEY="bench-only-" + uuid.uuid4().hex,
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=database_url,
        ZETT_MODEL="bench.zett_model:socket_model",
        ZETT_LOG_LEVEL="WARNING",
        ZETT_SHUTDOWN_GRACE="5",
        **LIFTED_LIMITS,
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    env.update(extra)
    return env


def migrate(env: dict[str, str], tree: Path = REPO) -> None:
    """Migrate the database ``env`` names with ``tree``'s migrations, once, before its
    workers start."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=tree,
        env=env,
        check=True,
        timeout=300,
    )


@contextlib.contextmanager
def postgres_database(server_url: str = DEFAULT_POSTGRES) -> Iterator[str]:
    """A new, empty PostgreSQL database for one run; dropped afterwards, whatever happens."""
    import psycopg

    name = f"zett_bench_{uuid.uuid4().hex[:12]}"
    admin = urlsplit(server_url)._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlsplit(server_url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def flushed_redis(url: str = DEFAULT_REDIS) -> Iterator[str]:
    """Redis database ``url`` emptied before and after the run (it must be ours alone)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        client.flushdb()
        yield url
    finally:
        with contextlib.suppress(redis.RedisError):
            client.flushdb()
        client.close()


def browser_cookie(port: int, timeout: float = 30.0) -> str:
    """``sessionid=…``: what a first page visit gives an anonymous browser."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as response:
        cookies = SimpleCookie()
        for header in response.headers.get_all("Set-Cookie") or ():
            cookies.load(header)
    return f"sessionid={cookies['sessionid'].value}"


class Server:
    """``daphne`` serving one ASGI app on a free loopback port, stopped on exit."""

    def __init__(self, env: dict[str, str], workdir: Path, label: str, app: str = SITE_APP) -> None:
        self.app = app
        self.env = env
        self.label = label
        self.port = free_port()
        self.log_path = workdir / f"{label}-{self.port}.log"
        self.process: subprocess.Popen[str] | None = None
        self.launched: Launched | None = None

    @property
    def base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def rss(self) -> int:
        return rss_of(self.pid)

    @property
    def cpu_seconds(self) -> float:
        return cpu_seconds_of(self.pid)

    def __enter__(self) -> Server:
        # The tests' launcher and server script (``tests/app/live_daphne.py``): ``--quiet``
        # serves the app as deployed, without click's per-frame styling.
        self.launched = launch_daphne(
            self.env,
            self.log_path,
            "--port",
            str(self.port),
            "--no-migrate",
            "--app",
            self.app,
            "--quiet",
            name=self.label,
        )
        self.process = self.launched.process
        pin_server(self.process.pid)
        return self

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log)"

    def log_problems(self) -> list[str]:
        """Lines of the server's log that report a problem (warnings, errors, tracebacks)."""
        pattern = re.compile(r"WARNING|ERROR|CRITICAL|Traceback|Exception")
        return [line for line in self.log_text().splitlines() if pattern.search(line)]

    def __exit__(self, *exc_info: object) -> None:
        launched, self.launched = self.launched, None
        self.process = None
        if launched is not None:
            launched.stop(timeout=20)


def dbtool(env: dict[str, str], *args: str, timeout: float = 600.0) -> dict:
    """Run ``bench.dbtool`` on the database of ``env``; its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.dbtool", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.dbtool {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)
