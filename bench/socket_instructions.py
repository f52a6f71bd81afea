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
such run. ``--keep DIR`` keeps the callgrind files there, for
``callgrind_annotate --inclusive=yes DIR/callgrind.out.<pid>-<thread>``.

The counts follow the wall time a little: the site's background loops run per second,
not per run, and valgrind runs the worker some fifty times slower than it runs alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.serve import REPO, browser_cookie, free_port, scratch_dir, site_env
from bench.socket import BARE_APP, run_client
from bench.socket_client import Session

SITE_APP = "zett_site.asgi:application"

READY = "LISTENING "
_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def thread_counts(directory: Path, pid: int) -> dict[str, int]:
    """Instructions each thread's callgrind file counts (``-<n>`` suffix → count)."""
    counts = {}
    for path in sorted(directory.glob(f"callgrind.out.{pid}*")):
        found = _TOTALS.findall(path.read_text(errors="replace"))
        if found:
            counts[path.name.rsplit("-", 1)[-1]] = int(found[-1])
    return counts


def _instrument(pid: int, state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(pid)], check=True, capture_output=True)


async def drive(base: str, cookie: str | None, pid: int, warmup: int, runs: int) -> None:
    session = await Session.open(base, 600.0, cookie)
    for _ in range(warmup):
        await session.run("stream 1")
    await asyncio.to_thread(_instrument, pid, "on")
    for _ in range(runs):
        await session.run("stream 1")
    await asyncio.to_thread(_instrument, pid, "off")
    await session.close()


@contextlib.contextmanager
def served(
    tree: Path, env: dict[str, str], app: str, log: Path, valgrind: list[str]
) -> Iterator[tuple[int, int]]:
    """``(port, pid)`` of ``app`` on daphne (under ``valgrind`` when given), stopped on exit."""
    port = free_port()
    command = [*valgrind, sys.executable, str(tree / "tests/app/live_daphne.py")]
    command += ["--port", str(port), "--no-migrate", "--app", app, "--quiet"]
    with log.open("w") as errors:
        process = subprocess.Popen(
            command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith(READY):
                    break
            else:
                raise RuntimeError(f"the server did not start; see {log}")
            yield port, process.pid
        finally:
            process.terminate()
            process.wait(timeout=300)


def measure(tree: Path, out: Path, warmup: int, runs: int, bare: bool) -> dict[str, int]:
    """Instructions by thread of ``runs`` short runs on the site (or, ``bare``, on the
    bare consumer replaying the frames the site sent for one)."""
    database = Path(scratch_dir() or out) / f"zett-instr-{free_port()}.sqlite3"
    env = site_env(f"sqlite:///{database}", PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    valgrind = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no"]
    valgrind += [f"--callgrind-out-file={out}/callgrind.out.%p", "--quiet"]
    try:
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=tree,
            env=env,
            check=True,
            timeout=300,
        )
        app = SITE_APP
        if bare:
            with served(tree, env, SITE_APP, out / "site.log", []) as (port, _):
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
        with served(tree, env, app, out / "server.log", valgrind) as (port, pid):
            cookie = None if bare else browser_cookie(port, timeout=300)
            asyncio.run(drive(f"ws://127.0.0.1:{port}", cookie, pid, warmup, runs))
    finally:
        database.unlink(missing_ok=True)
    return thread_counts(out, pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(REPO), help="the tree to serve (default: this)")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--bare", action="store_true", help="the bare Channels consumer")
    parser.add_argument("--keep", help="a directory to keep the callgrind files in")
    parser.add_argument("--json", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    out = Path(args.keep or tempfile.mkdtemp(prefix="zett-instr-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        counts = measure(Path(args.tree).resolve(), out, args.warmup, args.runs, args.bare)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    per_run = {thread: count / args.runs for thread, count in counts.items() if count}
    for thread, count in sorted(per_run.items(), key=lambda item: -item[1]):
        print(f"thread {thread}: {count / 1e6:.3f} M instructions a run")
    print(f"all threads: {sum(per_run.values()) / 1e6:.3f} M instructions a run")
    if args.json:
        Path(args.json).write_text(json.dumps(per_run, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
