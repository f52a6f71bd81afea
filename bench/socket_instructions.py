"""Instructions of a short run on daphne, by thread: what the machine's load does not move.

    python -m bench.socket_instructions                      # this tree, 30 + 100 runs
    python -m bench.socket_instructions --tree /path/to/tree --runs 100 --keep /tmp/cg

One daphne worker (``tests/app/live_daphne.py``, the site with the socket benchmark's model
and a throw-away SQLite database, as ``bench.socket_ab`` serves it) runs under
``valgrind --tool=callgrind --separate-threads=yes``, instrumentation off. One socket runs
``--warmup`` runs of ``stream 1``; then instrumentation is switched on
(``callgrind_control -i on``) for ``--runs`` more, and off again. Printed: instructions per
run of each thread that did work, and of all of them. ``--bare`` counts the bare Channels
consumer (``bench.bare_channels``) instead, replaying the frames the site sent for one
such run, and ``--floor`` the durable floor (the bare consumer storing each run as the site
must, ``BENCH_STORE``). ``--keep DIR`` keeps the callgrind files there, for
``callgrind_annotate --inclusive=yes DIR/callgrind.out.<pid>-<thread>``.

The site's background loops (webhook deliveries, schedules, expiries) run per second, not
per run, and valgrind runs the worker some fifty times slower than it runs alone: on a
loaded machine they came to a quarter of the count. So after the runs
the worker is counted as long again with no run (a second dump), and that is taken out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.serve import (
    REPO,
    SITE_APP,
    browser_cookie,
    daphne_of,
    free_port,
    migrate,
    scratch_dir,
    site_env,
)
from bench.socket import BARE_APP, run_client
from bench.socket_client import Session

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def thread_counts(directory: Path, pid: int, part: int) -> dict[str, int]:
    """Instructions each thread's callgrind file of dump ``part`` counts (thread → count)."""
    counts = {}
    for path in sorted(directory.glob(f"callgrind.out.{pid}.{part}-*")):
        found = _TOTALS.findall(path.read_text(errors="replace"))
        if found:
            counts[path.name.rsplit("-", 1)[-1]] = int(found[-1])
    return counts


def control(pid: int, *options: str) -> None:
    """``callgrind_control`` on the worker: switch counting on or off, dump the counts."""
    subprocess.run(["callgrind_control", *options, str(pid)], check=True, capture_output=True)


def counted_worker(tree: Path, out: Path, name: str) -> tuple[Path, dict[str, str], list[str]]:
    """A throw-away SQLite database for a worker of ``tree``, the site's environment for
    it, and the valgrind command that counts the worker's threads apart into ``out``,
    instrumentation off until ``control`` switches it on."""
    database = Path(scratch_dir() or out) / f"{name}-{free_port()}.sqlite3"
    env = site_env(f"sqlite:///{database}", PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no"]
    valgrind += [f"--callgrind-out-file={out}/callgrind.out.%p", "--quiet"]
    return database, env, valgrind


async def drive(base: str, cookie: str | None, pid: int, warmup: int, runs: int) -> None:
    """The runs, counted (dump 1); then as long with no run, counted too (dump 2)."""
    session = await Session.open(base, 600.0, cookie)
    for _ in range(warmup):
        await session.run("stream 1")
    await asyncio.to_thread(control, pid, "-i", "on")
    started = time.monotonic()
    for _ in range(runs):
        await session.run("stream 1")
    await asyncio.to_thread(control, pid, "--dump=runs")
    await asyncio.sleep(time.monotonic() - started)
    await asyncio.to_thread(control, pid, "--dump=idle")
    await asyncio.to_thread(control, pid, "-i", "off")
    await session.close()


def measure(
    tree: Path, out: Path, warmup: int, runs: int, bare: bool, floor: bool = False
) -> tuple[dict[str, int], dict[str, int]]:
    """Instructions by thread of ``runs`` short runs on the site (or, ``bare``, on the
    bare consumer replaying the frames the site sent for one; ``floor``, on it storing each
    run), and of as long idle."""
    database, env, valgrind = counted_worker(tree, out, "zett-instr")
    try:
        migrate(env, tree)
        app = SITE_APP
        if bare:
            with daphne_of(tree, env, SITE_APP, out / "site.log") as (port, _):
                (line,) = run_client(
                    f"ws://127.0.0.1:{port}",
                    "record",
                    120,
                    deltas=1,
                    wait=30,
                    cookie=browser_cookie(port),
                )
            frames = out / "frames.json"
            frames.write_text(json.dumps({"stream 1": line["frames"]}))
            env, app = {**env, "BENCH_FRAMES": str(frames)}, BARE_APP
            if floor:
                env["BENCH_STORE"] = str(out / "floor.sqlite3")
        with daphne_of(tree, env, app, out / "server.log", valgrind) as (port, pid):
            cookie = None if bare else browser_cookie(port, timeout=300)
            asyncio.run(drive(f"ws://127.0.0.1:{port}", cookie, pid, warmup, runs))
    finally:
        database.unlink(missing_ok=True)
    return thread_counts(out, pid, 1), thread_counts(out, pid, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(REPO), help="the tree to serve (default: this)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--bare", action="store_true", help="the bare Channels consumer")
    parser.add_argument(
        "--floor", action="store_true", help="the durable floor: the bare consumer, storing runs"
    )
    parser.add_argument("--keep", help="a directory to keep the callgrind files in")
    parser.add_argument("--json", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    out = Path(args.keep or tempfile.mkdtemp(prefix="zett-instr-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        counts, idle = measure(
            Path(args.tree).resolve(),
            out,
            args.warmup,
            args.runs,
            args.bare or args.floor,
            args.floor,
        )
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    per_run = {
        thread: (count - idle.get(thread, 0)) / args.runs
        for thread, count in counts.items()
        if count
    }
    for thread, count in sorted(per_run.items(), key=lambda item: -item[1]):
        background = idle.get(thread, 0) / args.runs
        print(
            f"thread {thread}: {count / 1e6:.3f} M instructions a run "
            f"({background / 1e6:.3f} M of idle time's own taken out)"
        )
    print(f"all threads: {sum(per_run.values()) / 1e6:.3f} M instructions a run")
    if args.json:
        Path(args.json).write_text(json.dumps({"per_run": per_run, "idle": idle}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
