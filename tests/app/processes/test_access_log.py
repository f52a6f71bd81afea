"""daphne's access log, run as docs/deploy.md says (``daphne … zett_site.asgi:application``,
its default verbosity): a token put in a query string is refused and never written to the
log; the path is, with ``?[redacted]`` in place of the query."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from tests.app.servers import ROOT, START_TIMEOUT_S, fresh_database, migrate, server_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SECRET = "zett_not-for-the-log-7f3a9c"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_access_log_shows_no_query_string(tmp_path):
    with fresh_database("sqlite", tmp_path) as url:
        env = server_env(url)
        migrate(env)
        port = free_port()
        command = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "zett_site.asgi:application"]
        process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(
            target=lambda: [lines.put(line) for line in process.stdout], daemon=True
        )
        reader.start()
        output: list[str] = []

        def read_until(text: str) -> None:
            while True:
                line = lines.get(timeout=START_TIMEOUT_S)
                output.append(line)
                if text in line:
                    return

        try:
            read_until(f"Listening on TCP address 127.0.0.1:{port}")
            target = f"http://127.0.0.1:{port}/api/chats/?token={SECRET}&page=2"
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(target, timeout=60)
            assert refused.value.code == 401
            read_until("/api/chats/")
        finally:
            process.terminate()
            process.wait(timeout=60)
            reader.join(timeout=15)
        while not lines.empty():
            output.append(lines.get())
        logged = "".join(output)
        assert SECRET not in logged
        assert '"GET /api/chats/?[redacted]" 401' in logged, logged
