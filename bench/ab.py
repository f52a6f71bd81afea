"""Two versions of the code on the same workload, interleaved: the ratio B/A with its spread.

    python -m bench.ab 27dbcd6 .                     # W1: the commit (A) against this tree (B)
    python -m bench.ab main HEAD --workloads W1,W2   # two commits, two workloads
    python -m bench.ab 27dbcd6 . --instructions      # instructions counted by callgrind
    python -m bench.ab 27dbcd6 . --command "bench.sse --smoke"   # any bench's JSON figures
    python -m bench.ab HEAD . --smoke                # a few rounds, for CI

A side is a directory (a worktree, ``.`` for this one, uncommitted changes included) or
anything ``git rev-parse`` knows; a commit is checked out into a temporary worktree
(``git worktree add --detach``), removed at the end.

CPU mode (default): one long-lived child process per side (``bench/_ab_child.py``, with that
side's tree first on ``sys.path``) builds the workloads with the side's own runner module
(``--runner``, default ``bench.zett_runner``) and warms them up. Then each round times one
block of each workload on A and on B, one right after the other, the order swapped every
round (A B, B A, A B, ...), so both sides of a ratio ran within a fraction of a second of
each other on a machine whose speed drifts. A round's ratio is B's CPU µs per request over
A's (``time.process_time``: every thread of the child). Printed: each side's median, and the
ratio's median, interquartile range and min-max over rounds.

Instruction mode (``--instructions``): each side's workload runs under
``valgrind --tool=callgrind`` twice, with ``--small`` and ``--large`` requests after the
same warm-up; the difference of the two totals (Ir) over the difference of requests is the
instructions per request, start-up and imports cancelling out. ``PYTHONHASHSEED=0`` keeps
the runs repeatable, and the machine's load does not change the count. It does not see a
thread hop's wait or a cache miss: read it beside the CPU mode, not instead of it.

Command mode (``--command "bench.<name> <args>"``): each round runs that module once in each
tree (order swapped every round) with ``--json``, and every number in the two JSON results
found at the same place is a figure; their ratios are printed like the CPU mode's.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    _BENCH = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _BENCH]
    sys.path.insert(0, str(_BENCH.parent))

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

CHILD = Path(__file__).resolve().parent / "_ab_child.py"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(slots=True)
class Figure:
    """One figure measured on both sides, one sample per round."""

    name: str
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.a, self.b, strict=True) if a]


@contextmanager
def checked_out(side: str, temp: Path) -> Iterator[Path]:
    """The tree for ``side``: the directory itself, or a temporary worktree of the commit."""
    path = Path(side)
    if path.is_dir():
        yield path.resolve()
        return
    commit = _git("rev-parse", "--verify", f"{side}^{{commit}}").strip()
    tree = temp / f"{re.sub(r'[^A-Za-z0-9._-]', '_', side)}-{commit[:8]}"
    _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
    try:
        yield tree
    finally:
        _git("worktree", "remove", "--force", str(tree))


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def describe(side: str, tree: Path) -> str:
    """``side`` with the commit its tree is at (and ``+dirty`` for uncommitted changes)."""
    head = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{side} ({head}{'+dirty' if dirty else ''})"


class Child:
    """A side's long-lived child: builds and warms the workloads, times blocks on demand."""

    def __init__(self, tree: Path, args: argparse.Namespace) -> None:
        command = [args.python, str(CHILD), str(tree), "--runner", args.runner]
        command += ["--workloads", ",".join(args.workloads), "--warmup", str(args.warmup)]
        self.process = subprocess.Popen(
            command, cwd=tree, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the child for {self.process.args[2]} stopped")
        return json.loads(line)

    def time(self, workload: str, requests: int) -> dict:
        self.process.stdin.write(json.dumps({"workload": workload, "requests": requests}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run_cpu(trees: tuple[Path, Path], args: argparse.Namespace) -> list[Figure]:
    """Interleaved rounds of every workload on both sides; CPU and wall µs per request."""
    children = []
    try:
        for tree in trees:
            children.append(Child(tree, args))
        figures = []
        for workload in args.workloads:
            each = max(child.ready["per_request_us"][workload] for child in children)
            requests = max(args.min_requests, int(args.block_seconds * 1e6 / max(each, 1)))
            cpu, wall = Figure(f"{workload} CPU µs/request"), Figure(f"{workload} wall µs/request")
            for index in range(args.rounds):
                order = (0, 1) if index % 2 == 0 else (1, 0)
                timed = {side: children[side].time(workload, requests) for side in order}
                cpu.a.append(timed[0]["cpu_us"])
                cpu.b.append(timed[1]["cpu_us"])
                wall.a.append(timed[0]["wall_us"])
                wall.b.append(timed[1]["wall_us"])
            print(f"  {workload}: {args.rounds} rounds of {requests} requests", flush=True)
            figures += [cpu, wall]
        return figures
    finally:
        for child in children:
            child.close()


def run_instructions(trees: tuple[Path, Path], args: argparse.Namespace) -> list[Figure]:
    """Instructions per request of each workload on each side, from two callgrind runs."""
    figures = []
    with tempfile.TemporaryDirectory(prefix="zett-ab-cg-") as out:
        for workload in args.workloads:
            counts: dict[tuple[int, int], int] = {}
            # Both sides at once, one count size at a time: two processes for two cores (a
            # count does not depend on the load).
            for requests in (args.small, args.large):
                started = [
                    (side, _start_callgrind(tree, workload, requests, args, out))
                    for side, tree in enumerate(trees)
                ]
                try:
                    for side, (process, path) in started:
                        counts[side, requests] = _finish_callgrind(process, path)
                finally:
                    for _, (process, _) in started:
                        if process.poll() is None:
                            process.kill()
                            process.wait()
            figure = Figure(f"{workload} instructions/request")
            for side in (0, 1):
                per = (counts[side, args.large] - counts[side, args.small]) / (
                    args.large - args.small
                )
                (figure.a if side == 0 else figure.b).append(per)
            figures.append(figure)
            print(f"  {workload}: counted", flush=True)
    return figures


def _start_callgrind(
    tree: Path, workload: str, requests: int, args: argparse.Namespace, out: str
) -> tuple[subprocess.Popen, Path]:
    path = Path(out) / f"{tree.name}-{workload}-{requests}.out"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={path}", "--quiet"]
    command += [args.python, str(CHILD), str(tree), "--runner", args.runner]
    command += ["--workloads", workload, "--warmup", str(args.warmup), "--requests", str(requests)]
    env = os.environ | {"PYTHONHASHSEED": "0"}
    process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL)
    return process, path


def _finish_callgrind(process: subprocess.Popen, path: Path) -> int:
    if process.wait() != 0:
        raise RuntimeError(f"callgrind run failed: {shlex.join(process.args)}")
    for line in path.read_text().splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no total in {path}")


def run_command(trees: tuple[Path, Path], args: argparse.Namespace) -> list[Figure]:
    """Interleaved runs of a bench module in both trees; every shared number is a figure."""
    module, *rest = shlex.split(args.command)
    figures: dict[str, Figure] = {}
    with tempfile.TemporaryDirectory(prefix="zett-ab-json-") as out:
        for index in range(args.rounds):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            results = {}
            for side in order:
                path = Path(out) / f"{side}-{index}.json"
                command = [args.python, "-m", module, *rest, "--json", str(path)]
                subprocess.run(command, cwd=trees[side], check=True, stdout=subprocess.DEVNULL)
                results[side] = dict(_numbers(json.loads(path.read_text())))
            for name in results[0].keys() & results[1].keys():
                figure = figures.setdefault(name, Figure(name))
                figure.a.append(results[0][name])
                figure.b.append(results[1][name])
            print(f"  round {index + 1}/{args.rounds} done", flush=True)
    return [figures[name] for name in sorted(figures) if len(figures[name].a) == args.rounds]


def _numbers(value: object, prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every number in a JSON value, named by its path (``runtime.0.median``)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield prefix, float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{prefix}.{index}" if prefix else str(index))


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def render(figures: list[Figure], names: tuple[str, str]) -> str:
    """A Markdown table: each side's median, and the ratio B/A with its spread."""
    lines = [
        "| figure | A median | B median | B/A median | B/A IQR | B/A min-max | rounds |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for figure in figures:
        ratios = figure.ratios
        if not ratios:
            continue
        low, high = _quartiles(ratios)
        lines.append(
            f"| {figure.name} | {statistics.median(figure.a):,.1f} "
            f"| {statistics.median(figure.b):,.1f} | {statistics.median(ratios):.3f} "
            f"| {low:.3f}-{high:.3f} | {min(ratios):.3f}-{max(ratios):.3f} | {len(ratios)} |"
        )
    return f"A = {names[0]}\nB = {names[1]}\n\n" + "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="side A: a directory, or a commit to check out")
    parser.add_argument("b", help="side B: a directory, or a commit to check out")
    parser.add_argument("--workloads", type=lambda v: v.split(","), default=["W1"])
    parser.add_argument("--runner", default="bench.zett_runner", help="module with build()")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block-seconds", type=float, default=0.1)
    parser.add_argument("--min-requests", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--small", type=int, default=10, help="requests of the short count run")
    parser.add_argument("--large", type=int, default=110, help="requests of the long count run")
    parser.add_argument("--command", help='a bench module and its options, e.g. "bench.sse"')
    parser.add_argument("--python", default=sys.executable, help="interpreter of both sides")
    parser.add_argument("--smoke", action="store_true", help="a few rounds, for CI")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.block_seconds, args.min_requests, args.warmup = 4, 0.01, 2, 2
        args.small, args.large = 1, 2
    if args.rounds < 1 or args.large <= args.small:
        parser.error("--rounds must be >= 1 and --large > --small")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Stopped with SIGTERM, still remove the temporary worktrees and stop the children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with ExitStack() as stack:
        temp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zett-ab-")))
        trees = tuple(stack.enter_context(checked_out(side, temp)) for side in (args.a, args.b))
        names = (describe(args.a, trees[0]), describe(args.b, trees[1]))
        load = [os.getloadavg()[0]]
        if args.command:
            figures = run_command(trees, args)
        elif args.instructions:
            figures = run_instructions(trees, args)
        else:
            figures = run_cpu(trees, args)
        load.append(os.getloadavg()[0])
    print()
    print(render(figures, names))
    print(f"\nLoad average (1 min): {min(load):.2f}-{max(load):.2f}")
    if args.json:
        data = {"a": names[0], "b": names[1], "load_average": load}
        data["figures"] = [{"name": f.name, "a": f.a, "b": f.b} for f in figures]
        Path(args.json).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
