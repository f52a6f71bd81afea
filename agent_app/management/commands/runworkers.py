"""``manage.py runworkers``: several daphne workers on consecutive ports, to try scale-out.

    python manage.py runworkers --workers 2 --port 8001

starts ``--workers`` daphne processes serving ``zett_site.asgi:application`` on ports
``--port``, ``--port + 1`` …, after migrating the database once. Put any load balancer in
front of them (no sticky sessions needed; docs/deploy.md), or open the ports directly. More
than one worker needs ``REDIS_URL`` (their runs, frames and leases meet there) and a
database every worker reaches (PostgreSQL; SQLite is one process's). SIGINT or SIGTERM is
passed on to every worker, each of which drains gracefully (``agent_app.process.shutdown``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app import conf


class Command(BaseCommand):
    help = "Start N daphne workers on consecutive ports (scale-out needs REDIS_URL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workers", type=int, default=2, help="How many (default 2).")
        parser.add_argument("--port", type=int, default=8001, help="The first port (8001).")
        parser.add_argument("--host", default="127.0.0.1", help="Address to bind (127.0.0.1).")
        parser.add_argument(
            "--skip-migrate", action="store_true", help="Do not migrate before starting."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workers, first_port, host = options["workers"], options["port"], options["host"]
        if workers < 1:
            raise CommandError(f"--workers must be at least 1, got {workers}")
        if workers > 1 and not conf.ZETT_REDIS_URL:
            raise CommandError(
                "Several workers need REDIS_URL: their runs, frames and leases meet in Redis. "
                "Set it (e.g. REDIS_URL=redis://127.0.0.1:6379/0), or use --workers 1."
            )
        engine = settings.DATABASES["default"]["ENGINE"]
        if workers > 1 and engine.endswith("sqlite3"):
            self.stderr.write(
                "Warning: SQLite serves one process well; use PostgreSQL (DATABASE_URL) for "
                "several workers."
            )
        if not options["skip_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    host,
                    "-p",
                    str(first_port + index),
                    "zett_site.asgi:application",
                ]
            )
            for index in range(workers)
        ]
        for index in range(workers):
            self.stdout.write(f"worker {index + 1}: http://{host}:{first_port + index}/")

        def stop(number: int, frame: Any) -> None:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        while any(process.poll() is None for process in processes):
            time.sleep(0.2)
        failed = [p.returncode for p in processes if p.returncode not in (0, -signal.SIGTERM)]
        if failed:
            raise CommandError(f"A worker exited with status {failed[0]}")
