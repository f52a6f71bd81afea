"""Serve the real ASGI application with Daphne, for the browser test, in a process of its own.

Run as ``python tests/app/live_daphne.py [--port N] [--no-migrate]`` from the repository
root, with the environment that selects the database (``DATABASE_URL``) and the model
(``ZETT_MODEL``). It migrates that database (unless ``--no-migrate``: several workers on one
database are migrated once, before they start), binds 127.0.0.1 on ``--port`` or a port the
OS picks, and prints ``LISTENING <port>`` once the socket is bound: the test waits for that
line instead of guessing when the server is up.
Static files are served by Django's ASGI static handler, as ``runserver`` does.

``ZETT_TEST_DIE_AFTER_CLAIM=1`` makes the process SIGKILL itself right after a reply for a
stored wait was claimed (committed), before anything else happens: a crash between
claiming a paused run's wait and starting its continuation, on purpose.
``ZETT_TEST_SEND_BUFFER=<bytes>`` gives every accepted socket a kernel send buffer that
small (``SO_SNDBUF``; loopback's otherwise grows to megabytes): what a client does not read
then stays in the server's own transport buffer, as on a busy link.

A process of its own, rather than a thread of the test process, because Twisted's reactor
runs once per process and a SQLite database is then simply a file both sides can open.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

READY_PREFIX = "LISTENING "


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-migrate", action="store_true")
    options = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")

    import django

    django.setup()

    from django.core.management import call_command

    if not options.no_migrate:
        call_command("migrate", interactive=False, verbosity=0)

    if os.environ.get("ZETT_TEST_DIE_AFTER_CLAIM"):
        _die_after_claim()
    if os.environ.get("ZETT_TEST_SEND_BUFFER"):
        _small_send_buffers(int(os.environ["ZETT_TEST_SEND_BUFFER"]))

    from channels.routing import get_default_application
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    class AnnouncingServer(Server):
        def listen_success(self, port):  # type: ignore[no-untyped-def]
            super().listen_success(port)
            print(f"{READY_PREFIX}{port.getHost().port}", flush=True)

    AnnouncingServer(
        application=ASGIStaticFilesHandler(get_default_application()),
        endpoints=build_endpoint_description_strings(host="127.0.0.1", port=options.port),
        signal_handlers=True,
    ).run()


def _die_after_claim() -> None:
    import signal

    from agent_app import waits

    claim = waits.claim

    def claim_then_die(*args, **kwargs):  # type: ignore[no-untyped-def]
        verdict = claim(*args, **kwargs)
        if verdict.reason is None:
            os.kill(os.getpid(), signal.SIGKILL)
        return verdict

    waits.claim = claim_then_die


def _small_send_buffers(size: int) -> None:
    import socket

    from twisted.internet import tcp

    accept = tcp.Server.__init__

    def small_buffer(self, sock, *args, **kwargs):  # type: ignore[no-untyped-def]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        accept(self, sock, *args, **kwargs)

    tcp.Server.__init__ = small_buffer


if __name__ == "__main__":
    main()
