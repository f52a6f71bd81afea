"""A worker process for the schedule race test: claims due times on a simulated clock.

    python -m tests.app.pageless.schedule_worker <first due> <count> <go file> <index> <workers>

``<first due>`` is an ISO time. Prints ``ready`` once connected, waits until ``<go file>``
exists (the test makes it when every worker is ready, so all start at once), then for each
of the ``count`` minutes from the first due time claims what is due one second after it,
and prints each due time it won, one ISO time a line. The database is ``DATABASE_URL``'s.

Every minute starts on a line of its own: worker ``<index>`` of ``<workers>`` marks that it
reached the minute (a file beside the go file) and claims once every worker has. So the
workers claim each due time at the same moment, and one that started a few claims late
cannot lose every due time to one that started first.
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
    index, workers = int(sys.argv[4]), int(sys.argv[5])
    claim_due(first - timedelta(days=1))  # connected, and nothing is due yet
    print("ready", flush=True)
    wait_for(go)  # a start line for every worker, without a shared clock
    for minute in range(count):
        (go.parent / f"at-{minute}-{index}").touch()
        for other in range(workers):
            wait_for(go.parent / f"at-{minute}-{other}")
        now = first + timedelta(minutes=minute, seconds=1)
        for fire in claim_due(now):
            print(fire.due.isoformat(), flush=True)


def wait_for(path: Path) -> None:
    """Until ``path`` exists: another process makes it, so there is nothing to await."""
    while not path.exists():
        time.sleep(0.001)


if __name__ == "__main__":
    main()
