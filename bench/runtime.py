"""Agent-loop overhead of zett against peer frameworks, with zero-latency scripted models.

    python -m bench.runtime            # full run: every workload and variant, then W3
    python -m bench.runtime --smoke    # a few requests of everything, no targets judged

The workloads (``bench.workloads``): W1 and W2, and the variants a user meets: (a) zett's
OpenAI-compatible provider path, (b) a sync tool, (c) one event-loop turn per model event,
(d) W1 with 10 / 1,000 / 5,000 earlier messages in the session. Each runs in every installed
framework in one process, one request after another, each streamed to the end through the
framework's streaming API. Before any timing, every framework runs one checked request per
workload: the ``add`` tool must have run as often as the workload asks and the answer must
have streamed as 20 deltas, otherwise the run stops.

The machine is shared and noisy, so everything is interleaved: each repetition times every
workload in every framework back to back (frameworks in a rotated order), each ratio is
taken inside one repetition, and the tables report medians and min-max over repetitions,
never one run, with the load average seen during the run. Each block is measured twice:
CPU time of the whole process (``time.process_time``: every thread, so a worker thread's
share of a sync tool counts) and wall time. The targets are judged on CPU time, which
measures the work each framework does even when other processes keep both cores busy;
wall time, which on a loaded machine mostly measures the scheduler, is reported beside it.
A timed block is as many requests as fit in ``--block-seconds`` (at least 20, at most
``--requests``), so a peer at 40 ms a request does not stretch the run to an hour.

The two targets that compare zett with itself ((d) 5,000 against 10 earlier messages, (b)
a sync tool against an async one) are judged on adjacent pairs: after the repetitions, the
two zett runners alternate block by block (``--pairs`` times, swapping which goes first),
so both sides of each ratio ran within a fraction of a second of each other. Each (b) pair
also times the floor of its target: the async W1 requests with one bare round trip to a
tool thread after each (``zett_agent._threads.run_in_thread`` of a function that does
nothing), the hop a sync tool needs and nothing else, as it costs on this machine now.

W3 (zett only, run first, in a fresh process) pauses 1,000 sessions at once inside an
external wait and reports the memory each one holds, then releases them all and checks that
every one completes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a file, bench/ would come first on sys.path and its socket.py would shadow
    # the standard library for every import below; the repository root replaces it.
    _BENCH = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _BENCH]
    sys.path.insert(0, str(_BENCH.parent))

import argparse
import asyncio
import gc
import importlib
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field

from bench.machine import describe_machine, package_versions
from bench.runner import Runner
from bench.workloads import ANSWER_DELTAS, ANSWER_TEXT, WORKLOADS, Workload
from zett_agent._threads import run_in_thread

#: Framework name -> module exposing ``async build(workload) -> Runner``. zett comes first:
#: every ratio is taken against it.
FRAMEWORKS = {
    "zett": "bench.zett_runner",
    "floor": "bench.floor",
    "pydantic-ai": "bench.peers.pydantic_ai_peer",
    "openai-agents": "bench.peers.openai_agents_peer",
    "langgraph": "bench.peers.langgraph_peer",
}
DISTRIBUTIONS = [
    "pydantic",
    "pydantic-ai-slim",
    "openai-agents",
    "openai",
    "langgraph",
    "langchain-core",
]
#: zett must be at least this many times faster than the fastest peer, in every workload,
#: and at least ``W1_TARGET_FACTOR`` times on W1.
TARGET_FACTOR = 15
W1_TARGET_FACTOR = 20
#: zett costs at most this multiple of the floor (``bench.floor``) on W1.
FLOOR_LIMIT = 1.5
#: Not a peer: the hand-written loop zett's overhead is judged against.
FLOOR = "floor"
#: (d) zett at 5,000 earlier messages costs at most this multiple of its cost at 10.
HISTORY_GROWTH_LIMIT = 1.3
#: (b) a sync tool costs zett at most this many µs more than the async one.
SYNC_TOOL_EXTRA_US = 100


@dataclass(slots=True)
class Series:
    """Timings of one framework on one workload: µs/request, one sample per repetition."""

    framework: str
    version: str
    workload: str
    #: CPU µs/request (process time, all threads), one per repetition.
    samples: list[float] = field(default_factory=list)
    #: Wall-clock µs/request, one per repetition.
    wall_samples: list[float] = field(default_factory=list)
    #: peer/zett inside each repetition, on CPU time (empty for zett itself).
    ratios: list[float] = field(default_factory=list)
    #: The same on wall time.
    wall_ratios: list[float] = field(default_factory=list)
    #: Requests per timed block.
    requests: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


class VerificationError(RuntimeError):
    """A framework did not do the workload: its timings would be meaningless."""


async def build_runners(names: list[str], workload: Workload) -> list[Runner]:
    """Build each named framework; one that is not installed is reported and skipped."""
    runners = []
    for name in names:
        module = importlib.import_module(FRAMEWORKS[name])
        try:
            runners.append(await module.build(workload))
        except LookupError:
            continue  # the floor, on a workload it does not cover
        except ImportError as error:
            if name == "zett":
                raise
            print(f"  skipping {name}: {error}", file=sys.stderr)
    return runners


async def verify(runner: Runner, workload: Workload) -> None:
    """Run one checked request: the tool ran, the deltas streamed, the answer is exact."""
    seen = await runner.observe()
    problems = []
    if seen.tool_calls != workload.tool_calls:
        problems.append(f"tool ran {seen.tool_calls} times, expected {workload.tool_calls}")
    if seen.text_deltas != len(ANSWER_DELTAS):
        problems.append(f"{seen.text_deltas} text deltas streamed, expected {len(ANSWER_DELTAS)}")
    if seen.answer != ANSWER_TEXT:
        problems.append(f"answer {seen.answer!r}, expected {ANSWER_TEXT!r}")
    if problems:
        raise VerificationError(f"{runner.name} {workload.name}: " + "; ".join(problems))


async def time_requests(
    runner: Runner, workload: Workload, requests: int, *, hop: bool = False
) -> tuple[float, float]:
    """Run ``requests`` requests back to back; return CPU and wall µs per request.

    ``hop``: one bare round trip to a tool thread after each request ((b)'s floor).
    """
    before = runner.counter.calls
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(requests):
        await runner.request()
        if hop:
            await run_in_thread(_nothing)
    cpu = time.process_time() - cpu_started
    elapsed = time.perf_counter() - started
    ran = runner.counter.calls - before
    if ran != requests * workload.tool_calls:
        raise VerificationError(
            f"{runner.name} {workload.name}: tool ran {ran} times in {requests} requests"
        )
    return cpu / requests * 1e6, elapsed / requests * 1e6


def _nothing() -> None:
    """What the floor's thread hop runs."""


@dataclass(slots=True)
class Prepared:
    """One framework ready for one workload, with its block size."""

    runner: Runner
    workload: Workload
    requests: int
    series: Series


async def prepare(
    workloads: list[Workload], names: list[str], args: argparse.Namespace
) -> list[list[Prepared]]:
    """Build, verify, warm up and size the blocks of every framework for every workload."""
    prepared = []
    for workload in workloads:
        row = []
        for runner in await build_runners(names, workload):
            await verify(runner, workload)
            started = time.perf_counter()
            for _ in range(args.warmup):
                await runner.request()
            each = (time.perf_counter() - started) / max(args.warmup, 1)
            fitting = int(args.block_seconds / each) if each > 0 else args.requests
            requests = max(args.min_requests, min(args.requests, fitting))
            series = Series(runner.name, runner.version, workload.name, requests=requests)
            row.append(Prepared(runner, workload, requests, series))
        print(
            f"  {workload.name}: ready " + ", ".join(f"{p.runner.name} x{p.requests}" for p in row),
            flush=True,
        )
        prepared.append(row)
    return prepared


async def bench_all(prepared: list[list[Prepared]], repetitions: int) -> list[float]:
    """Time every workload in every framework in each repetition; return the load averages."""
    loads = [os.getloadavg()[0]]
    for repetition in range(repetitions):
        for row in prepared:
            # Rotate so that no framework always runs first (or right after a slow neighbour).
            shift = repetition % len(row)
            for item in row[shift:] + row[:shift]:
                cpu, wall = await time_requests(item.runner, item.workload, item.requests)
                item.series.samples.append(cpu)
                item.series.wall_samples.append(wall)
            line = "  ".join(f"{p.runner.name} {p.series.samples[-1]:,.1f}" for p in row)
            print(f"  rep {repetition + 1}/{repetitions} {row[0].workload.name}: {line} CPU µs/req")
        loads.append(os.getloadavg()[0])
        print(f"  load average after rep {repetition + 1}: {loads[-1]:.2f}", flush=True)
    for row in prepared:
        zett = next((p.series for p in row if p.runner.name == "zett"), None)
        if zett is None:
            continue
        for item in row:
            if item.series is not zett:
                pairs = zip(item.series.samples, zett.samples, strict=True)
                item.series.ratios = [peer / ours for peer, ours in pairs]
                pairs = zip(item.series.wall_samples, zett.wall_samples, strict=True)
                item.series.wall_ratios = [peer / ours for peer, ours in pairs]
    return loads


@dataclass(slots=True)
class PairedComparison:
    """Two zett workloads timed in adjacent blocks; per-pair CPU and wall figures."""

    first: str
    second: str
    cpu_ratios: list[float] = field(default_factory=list)
    wall_ratios: list[float] = field(default_factory=list)
    cpu_differences: list[float] = field(default_factory=list)
    wall_differences: list[float] = field(default_factory=list)
    #: (b) only: what one bare thread hop after each ``first`` request adds, CPU µs.
    hop_differences: list[float] = field(default_factory=list)


async def compare_in_pairs(
    prepared: list[list[Prepared]], first: str, second: str, pairs: int, *, hop: bool = False
) -> PairedComparison | None:
    """Alternate zett's blocks of ``first`` and ``second``; None if either was not run.

    ``hop``: each pair also times ``first`` with a bare thread hop after each request.
    """
    zett = {
        item.workload.name: item for row in prepared for item in row if item.runner.name == "zett"
    }
    if first not in zett or second not in zett or pairs < 1:
        return None
    result = PairedComparison(first, second)
    a, b = zett[first], zett[second]
    for index in range(pairs):
        order = (a, b) if index % 2 == 0 else (b, a)
        timed = {}
        for item in order:
            timed[item.workload.name] = await time_requests(
                item.runner, item.workload, item.requests
            )
        (cpu_a, wall_a), (cpu_b, wall_b) = timed[first], timed[second]
        if hop:
            cpu_hop, _ = await time_requests(a.runner, a.workload, a.requests, hop=True)
            result.hop_differences.append(cpu_hop - cpu_a)
        result.cpu_ratios.append(cpu_b / cpu_a)
        result.wall_ratios.append(wall_b / wall_a)
        result.cpu_differences.append(cpu_b - cpu_a)
        result.wall_differences.append(wall_b - wall_a)
    return result


def _span(values: list[float], digits: int = 1) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def render_runtime_table(all_series: list[Series]) -> str:
    """A Markdown table: CPU µs/request, the ratio against zett, and the wall-time view."""
    lines = [
        "| workload | framework | CPU µs/request median | min-max | ratio vs zett median "
        "| ratio min-max | wall µs/request median | wall ratio median | requests per block |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in all_series:
        ratio = f"{statistics.median(s.ratios):,.1f}x" if s.ratios else "1x"
        ratio_span = _span(s.ratios) if s.ratios else "—"
        wall_ratio = f"{statistics.median(s.wall_ratios):,.1f}x" if s.wall_ratios else "1x"
        lines.append(
            f"| {s.workload} | {s.framework} | {s.median:,.1f} "
            f"| {_span(s.samples)} | {ratio} | {ratio_span} "
            f"| {statistics.median(s.wall_samples):,.1f} | {wall_ratio} | {s.requests:,} |"
        )
    return "\n".join(lines)


def render_history_table(all_series: list[Series]) -> str:
    """(d): each framework's cost by earlier messages, and its growth over 10 messages."""
    by_key = {(s.framework, s.workload): s for s in all_series}
    sizes = [w for w in WORKLOADS if WORKLOADS[w].prior_messages]
    frameworks = list(dict.fromkeys(s.framework for s in all_series if s.workload in sizes))
    if not frameworks:
        return ""
    head = " | ".join(f"{WORKLOADS[w].prior_messages:,} earlier (CPU)" for w in sizes)
    lines = [f"| framework | {head} | 5,000 vs 10 |", "|---|" + "---:|" * (len(sizes) + 1)]
    for name in frameworks:
        cells = []
        for workload in sizes:
            series = by_key.get((name, workload))
            cells.append(f"{series.median:,.1f} µs" if series else "—")
        small, large = by_key.get((name, sizes[0])), by_key.get((name, sizes[-1]))
        growth = f"{large.median / small.median:,.2f}x" if small and large else "—"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {growth} |")
    return "\n".join(lines)


def _floor_verdict(name: str, zett: Series, floor: Series) -> str:
    """zett against the hand-written floor, on the ratios taken inside each repetition."""
    ratios = [1 / ratio for ratio in floor.ratios]
    median = statistics.median(ratios)
    target = f"target ≤ {FLOOR_LIMIT}x: {'met' if median <= FLOOR_LIMIT else 'MISSED'}"
    return (
        f"{name}: zett {zett.median:,.1f} CPU µs = {median:.2f}x the floor's "
        f"{floor.median:,.1f} µs ({_span(ratios, 2)} over repetitions"
        + (f"; {target})" if name == "W1" else ")")
    )


def judge_targets(
    all_series: list[Series],
    growth: PairedComparison | None = None,
    sync: PairedComparison | None = None,
) -> list[str]:
    """One line per target, judged on this run's medians (and adjacent pairs for b, d)."""
    verdicts = []
    by_key = {(s.framework, s.workload): s for s in all_series}
    for name in dict.fromkeys(s.workload for s in all_series):
        rows = [s for s in all_series if s.workload == name]
        zett = by_key.get(("zett", name))
        floor = by_key.get((FLOOR, name))
        if zett is not None and floor is not None:
            verdicts.append(_floor_verdict(name, zett, floor))
        peers = [s for s in rows if s.framework not in ("zett", FLOOR)]
        if zett is None or not peers:
            continue
        fastest = min(peers, key=lambda s: s.median)
        factor = fastest.median / zett.median
        wanted = W1_TARGET_FACTOR if name == "W1" else TARGET_FACTOR
        met = "met" if factor >= wanted else "MISSED"
        wall_fastest = min(statistics.median(s.wall_samples) for s in peers)
        wall_factor = wall_fastest / statistics.median(zett.wall_samples)
        verdicts.append(
            f"{name}: zett {zett.median:,.1f} CPU µs vs fastest peer {fastest.framework} "
            f"{fastest.median:,.1f} µs = {factor:.1f}x faster (target ≥ {wanted}x: {met}; "
            f"wall time: {wall_factor:.1f}x)"
        )
    if growth is not None:
        met = "met" if statistics.median(growth.cpu_ratios) <= HISTORY_GROWTH_LIMIT else "MISSED"
        verdicts.append(
            f"(d) zett at 5,000 earlier messages = {statistics.median(growth.cpu_ratios):.2f}x "
            f"its cost at 10 (CPU, median of {len(growth.cpu_ratios)} adjacent pairs, "
            f"{_span(growth.cpu_ratios, 2)}; target ≤ {HISTORY_GROWTH_LIMIT}x: {met}; "
            f"wall time: {statistics.median(growth.wall_ratios):.2f}x)"
        )
    if sync is not None:
        extra = statistics.median(sync.cpu_differences)
        met = "met" if extra <= SYNC_TOOL_EXTRA_US else "MISSED"
        verdicts.append(
            f"(b) zett's sync tool costs {extra:,.1f} CPU µs more than the async one (median "
            f"of {len(sync.cpu_differences)} adjacent pairs, {_span(sync.cpu_differences)}; "
            f"target ≤ {SYNC_TOOL_EXTRA_US} µs: {met}; wall time: "
            f"{statistics.median(sync.wall_differences):,.1f} µs)"
        )
        if sync.hop_differences:
            floor = statistics.median(sync.hop_differences)
            verdicts.append(
                f"(b) its floor: one bare round trip to a tool thread after each async W1 "
                f"request adds {floor:,.1f} CPU µs (same pairs, {_span(sync.hop_differences)}); "
                f"the sync tool costs {extra - floor:+,.1f} µs beyond that hop"
            )
    return verdicts


async def run(args: argparse.Namespace) -> dict:
    names = args.frameworks
    results: dict = {
        "machine": describe_machine(),
        "versions": package_versions(DISTRIBUTIONS) | {"zett_agent": _zett_version()},
        "settings": {
            "requests": args.requests,
            "min_requests": args.min_requests,
            "block_seconds": args.block_seconds,
            "repetitions": args.repetitions,
            "pairs": args.pairs,
            "warmup": args.warmup,
            "sessions": args.sessions,
        },
    }
    if args.sessions:
        # First, in a process whose heap has not yet grown and shrunk: RSS growth is only
        # meaningful when freed memory is not waiting to be reused.
        results["w3"] = await bench_paused_sessions(args.sessions)
    workloads = [WORKLOADS[name] for name in args.workloads]
    print(f"Preparing {len(workloads)} workloads x {len(names)} frameworks", flush=True)
    prepared = await prepare(workloads, names, args)
    loads = await bench_all(prepared, args.repetitions)
    print(f"Adjacent pairs: {args.pairs} x (W1-history-10, W1-history-5000), (W1, W1-sync-tool)")
    growth = await compare_in_pairs(prepared, "W1-history-10", "W1-history-5000", args.pairs)
    sync = await compare_in_pairs(prepared, "W1", "W1-sync-tool", args.pairs, hop=True)
    loads.append(os.getloadavg()[0])
    all_series = [item.series for row in prepared for item in row]
    results["load_average"] = loads
    results["runtime"] = [asdict(s) | {"median": s.median} for s in all_series]
    results["pairs"] = [asdict(c) for c in (growth, sync) if c is not None]
    results["targets"] = judge_targets(all_series, growth, sync)
    results["table"] = render_runtime_table(all_series)
    results["history_table"] = render_history_table(all_series)
    return results


async def bench_paused_sessions(sessions: int) -> dict:
    """W3: memory per paused session; raises if any session fails to complete."""
    from bench.external_wait import measure_paused_memory

    print(f"W3: {sessions} sessions paused in an external wait", flush=True)
    memory = await measure_paused_memory(sessions)
    expected = 2 * sessions  # two passes: RSS, then tracemalloc
    if memory.released != expected or memory.tool_runs != expected:
        raise VerificationError(
            f"W3: {memory.released} of {expected} sessions completed, "
            f"tool ran {memory.tool_runs} times"
        )
    return asdict(memory)


def render_w3(w3: dict) -> str:
    return "\n".join(
        [
            "| paused sessions | RSS per session | Python heap per session | all released |",
            "|---:|---:|---:|---|",
            f"| {w3['sessions']:,} | {w3['rss_per_session'] / 1024:,.1f} KiB "
            f"| {w3['heap_per_session'] / 1024:,.1f} KiB "
            f"| yes ({w3['released']:,} runs completed) |",
        ]
    )


def _zett_version() -> str:
    from zett_agent import __version__

    return __version__


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few requests, for CI")
    parser.add_argument("--requests", type=int, default=1000, help="most requests per block")
    parser.add_argument("--min-requests", type=int, default=20, help="fewest requests per block")
    parser.add_argument(
        "--block-seconds", type=float, default=0.3, help="target duration of one timed block"
    )
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument(
        "--pairs", type=int, default=15, help="adjacent zett block pairs for targets b and d"
    )
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per framework")
    parser.add_argument("--sessions", type=int, default=1000, help="W3 sessions (0 skips W3)")
    parser.add_argument("--workloads", type=lambda v: v.split(","), default=list(WORKLOADS))
    parser.add_argument("--frameworks", type=lambda v: v.split(","), default=list(FRAMEWORKS))
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.smoke:
        args.requests, args.min_requests, args.repetitions = 5, 2, 2
        args.warmup, args.sessions, args.block_seconds = 2, 50, 0.01
        args.pairs = 2
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    unknown += [f for f in args.frameworks if f not in FRAMEWORKS]
    if unknown:
        parser.error(f"unknown workload or framework: {', '.join(unknown)}")
    if "zett" not in args.frameworks:
        args.frameworks.insert(0, "zett")
    if (
        args.requests < 1
        or args.min_requests < 1
        or args.repetitions < 1
        or args.warmup < 1
        or args.sessions < 0
    ):
        parser.error(
            "--requests, --min-requests, --repetitions and --warmup must be >= 1, --sessions >= 0"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    results = asyncio.run(run(args))
    machine = results["machine"]
    loads = results["load_average"]
    print()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    print(f"Load average (1 min) during the run: {min(loads):.2f}-{max(loads):.2f}")
    print()
    print(results["table"])
    if results["history_table"]:
        print()
        print(results["history_table"])
    if "w3" in results:
        print()
        print(render_w3(results["w3"]))
    if not args.smoke:
        print()
        print("\n".join(results["targets"]))
    print(f"\nTotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
