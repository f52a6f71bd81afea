"""Instructions of the AG-UI stream and of the socket on daphne, per frame and per run.

    python -m bench.sse_instructions                          # this tree, ~2 min
    python -m bench.sse_instructions --tree PATH --runs 10 --keep /tmp/cg --json out.json

What ``bench.sse`` times, counted: one daphne worker (the site with its model and a
throw-away SQLite database, as ``bench.sse`` serves it) runs under ``valgrind
--tool=callgrind --separate-threads=yes``, instrumentation off until the measured runs.
The runs are ``bench.sse``'s own, both ways (over one socket; as one new ``POST`` each),
``--runs`` of them at two lengths (``--short`` and ``--long`` deltas), each batch counted
in a dump of its own; then the worker is counted as long again with no run, and its
background loops (which run per second, not per run, and valgrind slows the worker some
fifty times) are taken out of each batch at that rate. The socket's batch shares one
connection, as ``bench.sse``'s repetitions do; its opening is part of its runs' cost.

Printed: per path and length, instructions a run by thread; then per path what one more
frame costs (the difference of the two lengths over the frames between them), what a
run costs whatever its length, and at the long length per frame (``bench.sse``'s
figure in instructions, which no load moves). Instructions are not CPU time: a thread
trip's kernel work, cache misses and a cold code path's low rate are not in them
(docs/benchmarks.md, "The AG-UI event stream against the socket").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from bench.serve import REPO, SITE_APP, daphne_of, migrate
from bench.socket_instructions import control, counted_worker, thread_counts
from bench.sse import Plan, issue_token, socket_runs, sse_runs

#: The batches, in the order they are run and dumped (dump numbers 1-4), then the idle one.
BATCHES = (("sse", "long"), ("sse", "short"), ("socket", "long"), ("socket", "short"))
RUNNERS = {"sse": sse_runs, "socket": socket_runs}


async def drive(port: int, secret: str, pid: int, lengths: dict[str, int], runs: int) -> dict:
    """Each batch counted in a dump of its own, then as long idle: (seconds, frames) each."""
    for deltas in lengths.values():  # warm both paths at both lengths, uncounted
        for runner in RUNNERS.values():
            await runner(port, secret, Plan(deltas, 1, 1), 2)
    spent: dict[str, tuple[float, int]] = {}
    await asyncio.to_thread(control, pid, "-i", "on")
    for path, length in BATCHES:
        started = time.monotonic()
        frames, _ = await RUNNERS[path](port, secret, Plan(lengths[length], 1, 1), runs)
        spent[f"{path} {length}"] = (time.monotonic() - started, frames)
        await asyncio.to_thread(control, pid, f"--dump={path}-{length}")
    idle = max(seconds for seconds, _ in spent.values())
    await asyncio.sleep(idle)
    spent["idle"] = (idle, 0)
    await asyncio.to_thread(control, pid, "--dump=idle")
    await asyncio.to_thread(control, pid, "-i", "off")
    return spent


def measure(tree: Path, out: Path, lengths: dict[str, int], runs: int) -> dict:
    """Instructions a run of each batch, by thread and in all, background taken out."""
    database, env, valgrind = counted_worker(tree, out, "zett-sse-instr")
    try:
        migrate(env, tree)
        secret = issue_token(env)
        with daphne_of(tree, env, SITE_APP, out / "server.log", valgrind) as (port, pid):
            spent = asyncio.run(drive(port, secret, pid, lengths, runs))
    finally:
        database.unlink(missing_ok=True)
    idle_seconds = spent["idle"][0]
    idle_rate = sum(thread_counts(out, pid, len(BATCHES) + 1).values()) / idle_seconds
    batches = {}
    for part, (path, length) in enumerate(BATCHES, 1):
        seconds, frames = spent[f"{path} {length}"]
        threads = thread_counts(out, pid, part)
        background = idle_rate * seconds
        batches[f"{path} {length}"] = {
            "frames_per_run": frames / runs,
            "per_run": (sum(threads.values()) - background) / runs,
            "background_per_run": background / runs,
            "threads_per_run": {name: count / runs for name, count in threads.items()},
        }
    return batches


def split(batches: dict, path: str) -> dict[str, float]:
    """One more frame's instructions, a run's whatever its length, and per frame at the
    long length, from the two lengths of ``path``."""
    long, short = batches[f"{path} long"], batches[f"{path} short"]
    frames = long["frames_per_run"] - short["frames_per_run"]
    per_frame = (long["per_run"] - short["per_run"]) / frames
    return {
        "per_frame": per_frame,
        "per_run": short["per_run"] - per_frame * short["frames_per_run"],
        "long_per_frame": long["per_run"] / long["frames_per_run"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(REPO), help="the tree to serve (default: this)")
    parser.add_argument("--runs", type=int, default=20, help="runs a path and length")
    parser.add_argument("--short", type=int, default=20, help="deltas of a short run")
    parser.add_argument("--long", type=int, default=500, help="deltas of a long run")
    parser.add_argument("--keep", help="a directory to keep the callgrind files in")
    parser.add_argument("--json", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    out = Path(args.keep or tempfile.mkdtemp(prefix="zett-sse-instr-"))
    out.mkdir(parents=True, exist_ok=True)
    lengths = {"short": args.short, "long": args.long}
    try:
        batches = measure(Path(args.tree).resolve(), out, lengths, args.runs)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    for name, batch in batches.items():
        threads = ", ".join(
            f"{thread} {count / 1e6:.2f}"
            for thread, count in sorted(batch["threads_per_run"].items())
        )
        print(
            f"{name:>12}: {batch['per_run'] / 1e6:.2f} M a run ({batch['frames_per_run']:.0f} "
            f"frames; by thread, M: {threads}; background {batch['background_per_run'] / 1e6:.2f} "
            "M taken out)"
        )
    sse, socket = split(batches, "sse"), split(batches, "socket")
    for name, figures in (("sse", sse), ("socket", socket)):
        print(
            f"{name:>6}: {figures['per_frame']:,.0f} a frame more, "
            f"{figures['per_run'] / 1e6:.2f} M a run whatever its length; "
            f"{figures['long_per_frame']:,.0f} a frame at "
            f"{args.long} deltas"
        )
    print(
        f"SSE / socket: a frame more {sse['per_frame'] / socket['per_frame']:.2f}x, a run "
        f"{sse['per_run'] / socket['per_run']:.2f}x, per frame at {args.long} deltas "
        f"{sse['long_per_frame'] / socket['long_per_frame']:.2f}x"
    )
    if args.json:
        results = {"batches": batches, "sse": sse, "socket": socket, "lengths": lengths}
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
