"""The socket path of two trees side by side: server CPU per run and per event, A against B.

    python -m bench.socket_ab --a c81af96 --b .           # a commit against this tree
    python -m bench.socket_ab --a /path/to/tree --b . --rounds 7

Each side is a tree (a path, or a commit checked out into a temporary worktree, as
``bench.ab`` does) served by its own ``tests/app/live_daphne.py`` on daphne, a throw-away
SQLite database each, the socket benchmark's model (``bench.zett_model:socket_model``)
and lifted limits (``bench.serve``).
Both servers run at once; the rounds alternate which side goes first. In each round, on one
fresh socket per shape and side: ``--short-runs`` runs of ``stream 1`` and ``--long-runs``
of ``stream <--deltas>``, and the server process's CPU time (every thread, ended ones
included: ``bench.serve.cpu_seconds_of``) around each. CPU per run = fixed + per event x
events gives the two terms, as ``bench.socket``'s cost model does; "all in" is the long
runs' CPU per event. Printed as ``bench.ab`` prints its figures (whose trees, figures and
table this shares): each side's median, and B/A per round with its median, interquartile
range and range. CPU time, not wall time: on a shared machine it moves far less, and the two
sides share whatever the machine does during a round.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.ab import Figure, checked_out, describe, render
from bench.serve import SITE_APP, browser_cookie, daphne_of, migrate, scratch_dir, site_env
from bench.socket import run_client

#: What each round measures on each side: key in ``measure``'s result → the figure's name.
FIGURES = {
    "fixed_us": "per run, whatever its length (µs)",
    "per_event_us": "per event, the frame path (µs)",
    "all_in_us": "per event all in, long runs (µs)",
}


@contextlib.contextmanager
def served(tree: Path, workdir: Path, label: str) -> Iterator[tuple[int, int]]:
    """``(port, pid)`` of ``tree``'s site on daphne, stopped on exit."""
    env = site_env(f"sqlite:///{workdir / f'{label}.sqlite3'}", PYTHONPATH=str(tree))
    migrate(env, tree)
    with daphne_of(tree, env, SITE_APP, workdir / f"{label}.log") as served_at:
        yield served_at


def measure(port: int, pid: int, args: argparse.Namespace) -> dict[str, float]:
    """One round on one side: CPU per run (fixed), per event, and all in."""
    base, cookie = f"ws://127.0.0.1:{port}", browser_cookie(port)
    found = []
    for deltas, runs in ((1, args.short_runs), (args.deltas, args.long_runs)):
        (line,) = run_client(
            base,
            "throughput",
            args.timeout,
            connections=1,
            requests=runs,
            deltas=deltas,
            wait=60,
            cookie=cookie,
            server_pids=pid,
        )
        found.append((line["server_cpu_seconds"] / runs, line["events"] / runs))
    (short_cpu, short_events), (long_cpu, long_events) = found
    per_event = (long_cpu - short_cpu) / (long_events - short_events)
    return {
        "fixed_us": (short_cpu - per_event * short_events) * 1e6,
        "per_event_us": per_event * 1e6,
        "all_in_us": long_cpu / long_events * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="a tree's path or a commit")
    parser.add_argument("--b", default=".", help="a tree's path or a commit (default: this)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--short-runs", type=int, default=200)
    parser.add_argument("--long-runs", type=int, default=20)
    parser.add_argument("--deltas", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    figures = [Figure(label) for label in FIGURES.values()]
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="zett-socket-ab-", dir=scratch_dir()) as tmp:
        workdir = Path(tmp)
        with contextlib.ExitStack() as stack:
            trees = [stack.enter_context(checked_out(side, workdir)) for side in (args.a, args.b)]
            names = (describe(args.a, trees[0]), describe(args.b, trees[1]))
            sides = [
                stack.enter_context(served(tree, workdir, label))
                for tree, label in zip(trees, "AB", strict=True)
            ]
            for number in range(args.rounds):
                order = (0, 1) if number % 2 == 0 else (1, 0)
                found = {side: measure(*sides[side], args) for side in order}
                for figure, key in zip(figures, FIGURES, strict=True):
                    figure.a.append(found[0][key])
                    figure.b.append(found[1][key])
                print(
                    f"round {number + 1}: "
                    + ", ".join(
                        f"{key} A {found[0][key]:.3f} B {found[1][key]:.3f}" for key in FIGURES
                    ),
                    flush=True,
                )
    load.append(os.getloadavg()[0])
    print()
    print(render(figures, names))
    print(f"\nServer CPU per round; load average (1 min): {min(load):.2f}-{max(load):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
