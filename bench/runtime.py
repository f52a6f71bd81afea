"""Agent-loop overhead of zett against peer frameworks, with zero-latency scripted models.

    python -m bench.runtime            # full run: W1, W2 (5 x 1,000 requests each), W3
    python -m bench.runtime --smoke    # a few requests of everything, no targets judged

W1 and W2 (see ``bench.workloads``) run in every installed framework in one process, one
request after another, each streamed to the end through the framework's streaming API.
Before any timing, every framework runs one checked request: the ``add`` tool must have run
as often as the workload asks and the answer must have streamed as 20 deltas, otherwise the
run stops. The machine is noisy, so frameworks are interleaved: each repetition times every
framework back to back (in a rotated order), a ratio peer/zett is taken inside each
repetition, and the table reports medians and min-max over repetitions, never one run.

W3 (zett only) pauses 1,000 sessions at once inside an external wait and reports the
memory each one holds, then releases them all and checks that every one completes.
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
import statistics
import time
from dataclasses import asdict, dataclass, field

from bench.machine import describe_machine, package_versions
from bench.runner import Runner
from bench.workloads import ANSWER_DELTAS, ANSWER_TEXT, WORKLOADS, Workload

#: Framework name -> module exposing ``async build(workload) -> Runner``. zett comes first:
#: every ratio is taken against it.
FRAMEWORKS = {
    "zett": "bench.zett_runner",
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
TARGET_FRACTION = 10  # zett's cost must be at most 1/10 of the fastest peer's.


@dataclass(slots=True)
class Series:
    """Timings of one framework on one workload: µs/request, one sample per repetition."""

    framework: str
    version: str
    workload: str
    samples: list[float] = field(default_factory=list)
    #: peer/zett inside each repetition (empty for zett itself).
    ratios: list[float] = field(default_factory=list)

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


async def time_requests(runner: Runner, workload: Workload, requests: int) -> float:
    """Run ``requests`` requests back to back and return microseconds per request."""
    before = runner.counter.calls
    gc.collect()
    started = time.perf_counter()
    for _ in range(requests):
        await runner.request()
    elapsed = time.perf_counter() - started
    ran = runner.counter.calls - before
    if ran != requests * workload.tool_calls:
        raise VerificationError(
            f"{runner.name} {workload.name}: tool ran {ran} times in {requests} requests"
        )
    return elapsed / requests * 1e6


async def bench_workload(
    workload: Workload, names: list[str], requests: int, repetitions: int, warmup: int
) -> list[Series]:
    """Verify, warm up, then time every framework in each repetition, interleaved."""
    runners = await build_runners(names, workload)
    for runner in runners:
        await verify(runner, workload)
        for _ in range(warmup):
            await runner.request()
    series = {r.name: Series(r.name, r.version, workload.name) for r in runners}
    for repetition in range(repetitions):
        # Rotate so that no framework always runs first (or right after a slow neighbour).
        shift = repetition % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            series[runner.name].samples.append(await time_requests(runner, workload, requests))
        line = "  ".join(f"{name} {s.samples[-1]:9.1f}" for name, s in series.items())
        print(f"  {workload.name} rep {repetition + 1}/{repetitions}: {line} µs/req", flush=True)
    zett = series.get("zett")
    if zett is not None:
        for s in series.values():
            if s is not zett:
                s.ratios = [peer / ours for peer, ours in zip(s.samples, zett.samples, strict=True)]
    return list(series.values())


def _span(values: list[float], digits: int = 1) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def render_runtime_table(all_series: list[Series]) -> str:
    """A Markdown table: µs/request and the pairwise ratio against zett."""
    lines = [
        "| workload | framework | version | µs/request median | min-max "
        "| ratio vs zett median | ratio min-max |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for s in all_series:
        ratio = f"{statistics.median(s.ratios):,.1f}x" if s.ratios else "1x"
        ratio_span = _span(s.ratios) if s.ratios else "—"
        lines.append(
            f"| {s.workload} | {s.framework} | {s.version} | {s.median:,.1f} "
            f"| {_span(s.samples)} | {ratio} | {ratio_span} |"
        )
    return "\n".join(lines)


def judge_targets(all_series: list[Series]) -> list[str]:
    """One line per workload: zett's cost against the fastest peer's in this run."""
    verdicts = []
    for name in dict.fromkeys(s.workload for s in all_series):
        rows = [s for s in all_series if s.workload == name]
        zett = next((s for s in rows if s.framework == "zett"), None)
        peers = [s for s in rows if s.framework != "zett"]
        if zett is None or not peers:
            continue
        fastest = min(peers, key=lambda s: s.median)
        fraction = fastest.median / zett.median
        met = "met" if fraction >= TARGET_FRACTION else "MISSED"
        verdicts.append(
            f"{name}: zett {zett.median:,.1f} µs vs fastest peer {fastest.framework} "
            f"{fastest.median:,.1f} µs = 1/{fraction:.1f} (target ≤ 1/{TARGET_FRACTION}: {met})"
        )
    return verdicts


async def run(args: argparse.Namespace) -> dict:
    names = args.frameworks
    results: dict = {
        "machine": describe_machine(),
        "versions": package_versions(DISTRIBUTIONS) | {"zett_agent": _zett_version()},
        "settings": {
            "requests": args.requests,
            "repetitions": args.repetitions,
            "warmup": args.warmup,
            "sessions": args.sessions,
        },
    }
    all_series: list[Series] = []
    for name in args.workloads:
        print(f"{name}: {args.repetitions} x {args.requests} requests per framework", flush=True)
        all_series += await bench_workload(
            WORKLOADS[name], names, args.requests, args.repetitions, args.warmup
        )
    results["runtime"] = [asdict(s) | {"median": s.median} for s in all_series]
    results["targets"] = judge_targets(all_series)
    results["table"] = render_runtime_table(all_series)
    if args.sessions:
        results["w3"] = await bench_paused_sessions(args.sessions)
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
    parser.add_argument("--requests", type=int, default=1000, help="requests per repetition")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="untimed requests per framework")
    parser.add_argument("--sessions", type=int, default=1000, help="W3 sessions (0 skips W3)")
    parser.add_argument("--workloads", type=lambda v: v.upper().split(","), default=list(WORKLOADS))
    parser.add_argument("--frameworks", type=lambda v: v.split(","), default=list(FRAMEWORKS))
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.smoke:
        args.requests, args.repetitions, args.warmup, args.sessions = 10, 2, 2, 50
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    unknown += [f for f in args.frameworks if f not in FRAMEWORKS]
    if unknown:
        parser.error(f"unknown workload or framework: {', '.join(unknown)}")
    if "zett" not in args.frameworks:
        args.frameworks.insert(0, "zett")
    if args.requests < 1 or args.repetitions < 1 or args.warmup < 0 or args.sessions < 0:
        parser.error("--requests and --repetitions must be >= 1, --warmup and --sessions >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    results = asyncio.run(run(args))
    machine = results["machine"]
    print()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()))
    print()
    print(results["table"])
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
