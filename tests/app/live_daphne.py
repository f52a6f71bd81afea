"""Serve the real ASGI application with Daphne in a process of its own: the one server the
tests (``tests.app.servers.launch_daphne``) and the benchmarks (``bench.serve.Server``) start.

Run as ``python tests/app/live_daphne.py [--port N] [--no-migrate] [--app module:attr]
[--quiet] [--root-path /prefix]`` from the repository root, with the environment that selects
the database (``DATABASE_URL``) and the model (``ZETT_MODEL``). It migrates that database (unless
``--no-migrate``: several workers on one database are migrated once, before they start),
binds 127.0.0.1 on ``--port`` or a port the OS picks, and prints ``LISTENING <port>`` once
the socket is bound: the test waits for that
line instead of guessing when the server is up.
Static files are served by Django's ASGI static handler, as ``runserver`` does. ``--app``
serves that ASGI application instead, as deployed (nothing migrated, no static handler:
a benchmark's site, or its bare Channels baseline); ``--quiet`` keeps autobahn's per-frame debug
styling out of the measurement; ``--root-path`` is daphne's (the site under a sub-path).

``ZETT_TEST_DIE_AFTER_CLAIM=1`` makes the process SIGKILL itself right after a reply for a
stored wait was claimed (committed), before anything else happens: a crash between
claiming a paused run's wait and starting its continuation, on purpose.
``ZETT_TEST_SPAN_FILE=<path>`` installs a global tracer provider that writes every span to
that file as one JSON line as it ends (``tests.app.telemetry_support``), for the tracing
tests' servers (with ``ZETT_OTEL=1``).
``ZETT_TEST_SEND_BUFFER=<bytes>`` gives every accepted socket a kernel send buffer that
small (``SO_SNDBUF``; loopback's otherwise grows to megabytes): what a client does not read
then stays in the server's own transport buffer, as on a busy link.

A process of its own, rather than a thread of the test process, because Twisted's reactor
runs once per process and a SQLite database is then simply a file both sides can open.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import sys
from pathlib import Path

READY_PREFIX = "LISTENING "


def main() -> None:
    # A crash (SIGSEGV in a C extension, at exit too) prints every thread's stack into the
    # server's log instead of leaving only an exit status of -11.
    faulthandler.enable()
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-migrate", action="store_true")
    parser.add_argument("--app", default="")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--root-path", default="")
    options = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")
    if options.quiet:
        import autobahn.util

        # What autobahn decides itself when click is absent (a deployed worker has no
        # click): otherwise it styles a debug line's arguments on every frame it sends.
        autobahn.util._HAS_CLICK = False

    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    class AnnouncingServer(Server):
        def listen_success(self, port):  # type: ignore[no-untyped-def]
            super().listen_success(port)
            print(f"{READY_PREFIX}{port.getHost().port}", flush=True)

    AnnouncingServer(
        application=_application(options.app, migrate=not options.no_migrate),
        endpoints=build_endpoint_description_strings(host="127.0.0.1", port=options.port),
        signal_handlers=True,
        verbosity=0 if options.quiet else 1,
        root_path=options.root_path,
    ).run()


def _application(spec: str, *, migrate: bool):  # type: ignore[no-untyped-def]
    """The ASGI application named by ``spec`` (``module:attr``), or the site with static
    files, its database migrated first."""
    if spec:
        module, _, attribute = spec.partition(":")
        return getattr(importlib.import_module(module), attribute)
    import django

    django.setup()

    from django.core.management import call_command

    if migrate:
        call_command("migrate", interactive=False, verbosity=0)

    if os.environ.get("ZETT_TEST_DIE_AFTER_CLAIM"):
        _die_after_claim()
    if os.environ.get("ZETT_TEST_SPAN_FILE"):
        from tests.app.telemetry_support import install_span_file

        install_span_file(os.environ["ZETT_TEST_SPAN_FILE"])
    if os.environ.get("ZETT_TEST_SEND_BUFFER"):
        _small_send_buffers(int(os.environ["ZETT_TEST_SEND_BUFFER"]))

    from channels.routing import get_default_application
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    return ASGIStaticFilesHandler(get_default_application())


def _die_after_claim() -> None:
    import signal

    from agent_app.durable import waits

    claim = waits.claim

    def claim_then_die(*args, **kwargs):  # type: ignore[no-untyped-def]
        verdict = claim(*args, **kwargs)
        if verdict.wait is not None:  # accepted
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
