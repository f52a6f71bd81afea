"""Profile zett alone on W1 or W2, to find where a request's microseconds go.

    python -m bench.profile_zett W1                 # cProfile, top functions by own time
    python -m bench.profile_zett W2 --sort cumulative
    py-spy record -o w1.svg -- python -m bench.profile_zett W1 --plain --requests 20000

``--plain`` runs the same loop without cProfile, for a sampling profiler attached from
outside (py-spy), which distorts the picture far less than cProfile's per-call hooks.
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
import cProfile
import io
import pstats
import time

from bench import zett_runner
from bench.workloads import WORKLOADS


async def drive(workload_name: str, requests: int, profiler: cProfile.Profile | None) -> float:
    runner = await zett_runner.build(WORKLOADS[workload_name])
    for _ in range(50):
        await runner.request()
    if profiler is not None:
        profiler.enable()
    started = time.perf_counter()
    for _ in range(requests):
        await runner.request()
    elapsed = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
    return elapsed / requests * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--plain", action="store_true", help="no cProfile (for py-spy)")
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    profiler = None if args.plain else cProfile.Profile()
    cost = asyncio.run(drive(args.workload, args.requests, profiler))
    label = "" if args.plain else " under cProfile"
    print(f"zett {args.workload}: {cost:,.1f} µs/request{label}")
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(args.sort).print_stats(args.top)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
