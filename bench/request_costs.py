"""What a request costs besides instructions, zett against the floor: where CPU time can go
that callgrind does not count.

    python -m bench.request_costs                      # W1 and W1-sync-tool, zett and floor
    python -m bench.request_costs --workloads W2 --requests 5000
    python -m bench.request_costs --future-per-event   # each model event waits for a future
    python -m bench.request_costs --by-function        # where each side's bytecodes run

``--future-per-event`` makes both sides' model double await a future settled on the loop's
next turn before every event, as a network read does (variant (c) yields a bare loop turn
instead, which a driver passes straight to the task): it shows what waiting on a future
costs each side in loop iterations.

For each runner and workload, per request: CPU time split into user and system
(``getrusage``: every thread), voluntary and involuntary context switches, event-loop
iterations (the selector's polls: each iteration polls once, and a poll that finds the loop
with nothing to do is where it sleeps), garbage collections, and Python bytecodes executed
(``sys.settrace`` opcode events, on a separate, shorter run: tracing slows every bytecode).
System calls need ``strace -f -c`` around it; the figures here show whether they matter.

``--by-function`` also prints, per workload, the bytecodes each function runs a request on
either side, the functions with the largest difference first: a function both sides call
(the model double, the message classes it builds, the standard library) shows the same
count twice, so what is left is each side's own loop, function by function.

Instructions (``bench.ab --instructions``) do not see system calls, thread wake-ups, cache
misses or branch mispredictions; bytecodes, which the interpreter dispatches one indirect
jump at a time, are the unit those mostly scale with.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    _BENCH = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _BENCH]
    sys.path.insert(0, str(_BENCH.parent))

import argparse
import asyncio
import gc
import importlib
import resource
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from bench import zett_model
from bench.workloads import WORKLOADS

RUNNERS = {"zett": "bench.zett_runner", "floor": "bench.floor"}


@dataclass(slots=True)
class Costs:
    """Per-request figures of one runner on one workload."""

    cpu_us: float
    user_us: float
    system_us: float
    voluntary_switches: float
    involuntary_switches: float
    loop_iterations: float
    collections: float
    bytecodes: float


class _Polls:
    """Counts the running loop's selector polls: one per loop iteration."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.count = 0
        self._selector = loop._selector  # type: ignore[attr-defined]
        select = self._selector.select

        def counted(timeout: float | None = None) -> Any:
            self.count += 1
            return select(timeout)

        self._selector.select = counted

    def restore(self) -> None:
        del self._selector.select


async def _future_per_event(events: Any) -> Any:
    """``events``, each after a future the loop settles on its next turn."""
    loop = asyncio.get_running_loop()
    async for event in events:
        arrived = loop.create_future()
        loop.call_soon(arrived.set_result, None)
        await arrived
        yield event


def _awaiting_futures(self: zett_model.WorkloadModel, request: Any) -> Any:
    return _future_per_event(self._events(request))


async def measure(
    module: str,
    workload: str,
    requests: int,
    traced: int,
    by_function: Counter[str] | None = None,
) -> Costs:
    """Warm one runner up, then take every figure over ``requests`` requests (and, into
    ``by_function``, the traced bytecodes per function)."""
    runner = await importlib.import_module(module).build(WORKLOADS[workload])
    for _ in range(200):
        await runner.request()
    collections = 0

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        nonlocal collections
        collections += phase == "start"

    polls = _Polls(asyncio.get_running_loop())
    gc.callbacks.append(on_gc)
    polls.count = 0
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu = time.process_time()
    try:
        for _ in range(requests):
            await runner.request()
    finally:
        cpu = time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_SELF)
        gc.callbacks.remove(on_gc)
        polls.restore()

    def each(field: str) -> float:
        return (getattr(after, field) - getattr(before, field)) / requests

    return Costs(
        cpu_us=cpu / requests * 1e6,
        user_us=each("ru_utime") * 1e6,
        system_us=each("ru_stime") * 1e6,
        voluntary_switches=each("ru_nvcsw"),
        involuntary_switches=each("ru_nivcsw"),
        loop_iterations=polls.count / requests,
        collections=collections / requests,
        bytecodes=await _traced_bytecodes(runner, traced, by_function),
    )


async def _traced_bytecodes(
    runner: Any, requests: int, by_function: Counter[str] | None = None
) -> float:
    """Bytecodes a request, over ``requests`` traced requests; counted per function into
    ``by_function`` too when it is given (per request, keyed by ``function_name``)."""
    counted = 0
    codes: Counter[Any] = Counter()

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal counted
        if event == "opcode":
            counted += 1
        return local

    def local_by_code(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            codes[frame.f_code] += 1
        return local_by_code

    step = local if by_function is None else local_by_code

    def trace(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return step

    sys.settrace(trace)
    try:
        for _ in range(requests):
            await runner.request()
    finally:
        sys.settrace(None)
    if by_function is None:
        return counted / requests
    for code, count in codes.items():
        by_function[function_name(code)] += count / requests
    return sum(codes.values()) / requests


def function_name(code: Any) -> str:
    """``<file>:<qualified name>``, the file as the repository or ``site-packages`` names it
    (the standard library's by its base name)."""
    parts = PurePath(code.co_filename).parts
    for anchor in ("site-packages", "zett_agent", "bench"):
        if anchor in parts:
            at = parts.index(anchor) + (anchor == "site-packages")
            return f"{'/'.join(parts[at:])}:{code.co_qualname}"
    return f"{parts[-1] if parts else code.co_filename}:{code.co_qualname}"


def render_functions(workload: str, sides: dict[str, Counter[str]], top: int) -> str:
    """The ``top`` functions whose bytecodes a request differ most between the sides."""
    (first, ours), (second, theirs) = sides.items()
    names = sorted(set(ours) | set(theirs), key=lambda n: (-abs(ours[n] - theirs[n]), n))
    lines = [
        f"| {workload}: function | {first} | {second} | difference |",
        "|---|---:|---:|---:|",
    ]
    for name in names[:top]:
        lines.append(
            f"| `{name}` | {ours[name]:,.0f} | {theirs[name]:,.0f} "
            f"| {ours[name] - theirs[name]:+,.0f} |"
        )
    rest = names[top:]
    rest_ours, rest_theirs = sum(ours[n] for n in rest), sum(theirs[n] for n in rest)
    lines.append(
        f"| {len(rest)} others | {rest_ours:,.0f} | {rest_theirs:,.0f} "
        f"| {rest_ours - rest_theirs:+,.0f} |"
    )
    total_ours, total_theirs = sum(ours.values()), sum(theirs.values())
    lines.append(
        f"| **all** | {total_ours:,.0f} | {total_theirs:,.0f} | {total_ours - total_theirs:+,.0f} |"
    )
    return "\n".join(lines)


def render(rows: list[tuple[str, str, Costs]]) -> str:
    lines = [
        "| workload | runner | CPU µs | user µs | system µs | voluntary switches "
        "| involuntary switches | loop iterations | collections | bytecodes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, name, c in rows:
        lines.append(
            f"| {workload} | {name} | {c.cpu_us:,.1f} | {c.user_us:,.1f} | {c.system_us:,.1f} "
            f"| {c.voluntary_switches:.2f} | {c.involuntary_switches:.2f} "
            f"| {c.loop_iterations:.2f} | {c.collections:.3f} | {c.bytecodes:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=lambda v: v.split(","), default=["W1", "W1-sync-tool"])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--traced", type=int, default=50, help="requests of the bytecode count")
    parser.add_argument("--smoke", action="store_true", help="a few requests, no figure to trust")
    parser.add_argument(
        "--future-per-event", action="store_true", help="the model awaits a future per event"
    )
    parser.add_argument(
        "--by-function",
        type=int,
        nargs="?",
        const=25,
        default=0,
        metavar="TOP",
        help="also print the TOP (25) functions whose bytecodes differ most between the sides",
    )
    args = parser.parse_args(argv)
    if args.future_per_event:  # both runners' doubles are this class (bench.floor reuses it)
        zett_model.WorkloadModel.stream = _awaiting_futures  # type: ignore[method-assign]
    if args.smoke:
        args.requests, args.traced = 20, 2
    rows = []
    tables = []
    for workload in args.workloads:
        sides: dict[str, Counter[str]] = {}
        for name, module in RUNNERS.items():
            functions = sides[name] = Counter() if args.by_function else None
            costs = asyncio.run(measure(module, workload, args.requests, args.traced, functions))
            rows.append((workload, name, costs))
        if args.by_function:
            tables.append(render_functions(workload, sides, args.by_function))
    print(render(rows))
    for table in tables:
        print(f"\n{table}")
    waits = ", a future awaited before every model event" if args.future_per_event else ""
    print(f"\nper request, {args.requests:,} requests each (bytecodes: {args.traced}){waits}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
