"""``manage.py zett_background``: a process that delivers webhooks and fires schedules.

    python manage.py zett_background [--no-schedules] [--no-webhooks]

Runs ``agent_app.background.host.BackgroundWork`` until SIGINT or SIGTERM. Any number of
these (and of the workers that run the same loops) may run at once: each webhook attempt
and each schedule's due time is claimed by exactly one. Runs a schedule starts run in
this process, as runs of their chats: with ``REDIS_URL`` the chat pages on every worker
see them live (without it, the chats show them once they are stored).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agent_app.background.host import BackgroundWork


class Command(BaseCommand):
    help = "Deliver webhooks and fire scheduled runs until stopped (SIGINT/SIGTERM)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-schedules", action="store_true", help="Do not fire schedules.")
        parser.add_argument("--no-webhooks", action="store_true", help="Do not send webhooks.")

    def handle(self, *args: Any, **options: Any) -> None:
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
