"""``manage.py zett_background``: a process that delivers webhooks and fires schedules.

    python manage.py zett_background [--no-schedules] [--no-webhooks]

Runs ``agent_app.background.host.BackgroundWork`` until SIGINT or SIGTERM. Any number of
these (and of the workers that run the same loops) may run at once: each webhook attempt
and each schedule's due time is claimed by exactly one. Runs a schedule starts run in
this process, as runs of their chats, so firing schedules needs ``REDIS_URL``, as several
web workers do: there the workers learn which process runs which run (its lease); without
it a web worker would take a run going on here for one whose process died.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_app import conf
from agent_app.background.host import BackgroundWork


class Command(BaseCommand):
    help = "Deliver webhooks and fire scheduled runs until stopped (SIGINT/SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-schedules", action="store_true", help="Do not fire schedules.")
        parser.add_argument("--no-webhooks", action="store_true", help="Do not send webhooks.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["no_schedules"] and not conf.ZETT_REDIS_URL:
            raise CommandError(
                "Firing schedules in a process of its own needs REDIS_URL: the runs it starts "
                "must be known to the web workers as running (their leases). Set REDIS_URL, "
                "or run it with --no-schedules to deliver webhooks only."
            )
        work = BackgroundWork(
            deliveries=not options["no_webhooks"], schedules=not options["no_schedules"]
        )
        asyncio.run(self._serve(work))

    async def _serve(self, work: BackgroundWork) -> None:
        from agent_app.sessions.registry import existing_live_sessions

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        work.start()
        self.stdout.write("zett_background: delivering webhooks and firing schedules", ending="\n")
        self.stdout.flush()
        await stop.wait()
        await work.stop()
        registry = existing_live_sessions()
        if registry is not None:  # runs started here: let them end as a shutdown ends them
            for live in registry:
                await live.stop_for_shutdown()
            await registry.close()
