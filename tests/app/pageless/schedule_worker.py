"""A worker process for the schedule race test: claims due times on a simulated clock.

    python -m tests.app.pageless.schedule_worker <first due, ISO> <count> <go file>

Prints ``ready`` once connected, waits until ``<go file>`` exists (the test makes it
when every worker is ready, so all start at once), then for each of the
``count`` minutes from the first due time claims what is due one second after it, and
prints each due time it won, one ISO time a line. The database is ``DATABASE_URL``'s.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zett_site.settings")
    import django

    django.setup()
    from agent_app.schedules.firing import claim_due

    first, count, go = datetime.fromisoformat(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    claim_due(first - timedelta(days=1))  # connected, and nothing is due yet
    print("ready", flush=True)
    while not go.exists():  # a start line for every worker, without a shared clock
        time.sleep(0.005)
    for minute in range(count):
        now = first + timedelta(minutes=minute, seconds=1)
        for fire in claim_due(now):
            print(fire.due.isoformat(), flush=True)


if __name__ == "__main__":
    main()
