"""What webhooks cost a run's end, and how soon a receiver hears of it.

    python -m bench.webhooks            # about a minute
    python -m bench.webhooks --smoke    # a few runs, every check, no target judged

A run's end (``agent_app.durable.runs.end_run``: the run's row, its answer and the
session in one transaction) now also queues its ``run.completed`` message in that
transaction (``agent_app.webhooks.events.emit``). The benchmark stores runs with
``begin_run`` and ends them with ``end_run`` in batches that alternate between no webhook
and one active webhook listening for ``run.completed`` (so drift in the machine's load
falls on both alike), and reports the time of ``end_run`` with and without: p50, p99 and
their differences, and the difference in this process's CPU time (which the machine's
load does not move). Target: the webhook adds at most 5 ms to the p99 of a run's end.

Then, with a ``Deliverer`` running and a real HTTP receiver on 127.0.0.1, it measures
from ``end_run``'s return to the receiver holding the signed request (p50, p99).

Databases: SQLite (a throw-away file) and PostgreSQL (a database made for the run and
dropped after it, ``--postgres``); each runs in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.serve import DEFAULT_POSTGRES, postgres_database, scratch_dir

REPO = Path(__file__).resolve().parent.parent
TARGET_ADDED_P99_MS = 5.0
BATCH = 50


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _end_times(runs: int) -> dict[str, list[float]]:
    """Milliseconds of ``end_run`` without and with a listening webhook."""
    from agent_app.durable.runs import begin_run, end_run
    from agent_app.durable.store import RowMeta
    from agent_app.models import RunStatus, Webhook
    from agent_app.webhooks.events import forget_listeners
    from zett_agent.messages import AssistantMessage

    hook = Webhook.objects.create(url="http://127.0.0.1:9/bench", events=["run.completed"])
    times: dict[str, list[float]] = {"off": [], "on": [], "cpu_off": [], "cpu_on": []}
    for batch in range(max(2, runs // BATCH)):
        listening = batch % 2 == 1
        Webhook.objects.filter(pk=hook.pk).update(active=listening)
        forget_listeners()  # as saving it would (an update sends no signal)
        for _ in range(BATCH):
            session_id, request_id = str(uuid.uuid4()), str(uuid.uuid4())
            begin_run(session_id, request_id, content="How many orders came in?", worker="bench")
            answer = AssistantMessage("Yesterday 42 orders came in, 3 of them refunded.")
            started, cpu = time.perf_counter(), time.thread_time()
            end_run(
                session_id,
                request_id,
                RunStatus.COMPLETED,
                last_seq=5,
                usage={"input_tokens": 812, "output_tokens": 164},
                rows=[(answer, RowMeta())],
            )
            times["on" if listening else "off"].append((time.perf_counter() - started) * 1000)
            times["cpu_on" if listening else "cpu_off"].append((time.thread_time() - cpu) * 1000)
    return times


async def _delivery_times(count: int) -> list[float]:
    """Milliseconds from ``end_run``'s return to the receiver holding the request."""
    from channels.db import database_sync_to_async

    from agent_app.durable.runs import begin_run, end_run
    from agent_app.models import RunStatus, Webhook
    from agent_app.webhooks.delivery import Deliverer

    arrived: asyncio.Queue[float] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        arrived.put_nowait(time.perf_counter())
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    await database_sync_to_async(Webhook.objects.all().delete)()
    await database_sync_to_async(Webhook.objects.create)(
        url=f"http://127.0.0.1:{port}/hook", events=["run.completed"]
    )
    deliverer = Deliverer()
    deliverer.start()

    def one_run() -> float:
        session_id, request_id = str(uuid.uuid4()), str(uuid.uuid4())
        begin_run(session_id, request_id, content="Ping", worker="bench")
        end_run(session_id, request_id, RunStatus.COMPLETED, last_seq=3)
        return time.perf_counter()

    times = []
    try:
        for _ in range(count):
            ended = await database_sync_to_async(one_run)()
            received = await asyncio.wait_for(arrived.get(), 30)
            times.append((received - ended) * 1000)
    finally:
        await deliverer.stop()
        server.close()
        await server.wait_closed()
    return times


def child(runs: int, deliveries: int) -> None:
    """One database's measurements (``DATABASE_URL``), printed as JSON."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    times = _end_times(runs)
    delivered = asyncio.run(_delivery_times(deliveries))
    print(json.dumps({"end_run": times, "delivery": delivered}))


def measure(database_url: str, runs: int, deliveries: int) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "zett_site.settings",
        "ZETT_WEBHOOK_ALLOW_PRIVATE": "1",
        "ZETT_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.webhooks", "--child", str(runs), str(deliveries)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    off, on = raw["end_run"]["off"], raw["end_run"]["on"]
    return {
        "runs": len(off) + len(on),
        "end_run_ms": {
            "no webhook": {"p50": percentile(off, 0.5), "p99": percentile(off, 0.99)},
            "one webhook": {"p50": percentile(on, 0.5), "p99": percentile(on, 0.99)},
        },
        "added_p50_ms": statistics.median(on) - statistics.median(off),
        "added_cpu_p50_ms": statistics.median(raw["end_run"]["cpu_on"])
        - statistics.median(raw["end_run"]["cpu_off"]),
        "added_p99_ms": percentile(on, 0.99) - percentile(off, 0.99),
        "delivery_ms": {
            "p50": percentile(raw["delivery"], 0.5),
            "p99": percentile(raw["delivery"], 0.99),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    runs, deliveries = (100, 10) if args.smoke else (2000, 200)
    results: dict[str, Any] = {}
    for database in args.databases.split(","):
        if database == "sqlite":
            with tempfile.TemporaryDirectory(dir=scratch_dir()) as folder:
                results["sqlite"] = measure(f"sqlite:///{folder}/bench.sqlite3", runs, deliveries)
        else:
            with postgres_database(args.postgres) as url:
                results["postgres"] = measure(url, runs, deliveries)
    for name, result in results.items():
        timing = result["end_run_ms"]
        print(
            f"{name}: end_run p50/p99 {timing['no webhook']['p50']:.2f}/"
            f"{timing['no webhook']['p99']:.2f} ms without a webhook, "
            f"{timing['one webhook']['p50']:.2f}/{timing['one webhook']['p99']:.2f} ms with one "
            f"(added p50 {result['added_p50_ms']:+.2f} ms, p99 {result['added_p99_ms']:+.2f} ms, "
            f"target <= {TARGET_ADDED_P99_MS}; this process's CPU p50 "
            f"{result['added_cpu_p50_ms']:+.2f} ms); "
            f"end → receiver p50/p99 {result['delivery_ms']['p50']:.1f}/"
            f"{result['delivery_ms']['p99']:.1f} ms"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if not args.smoke:
        worst = max(result["added_p99_ms"] for result in results.values())
        if worst > TARGET_ADDED_P99_MS:
            raise SystemExit(f"A webhook adds {worst:.2f} ms to the p99 of a run's end")


if __name__ == "__main__":
    main()
