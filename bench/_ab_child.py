"""One side of ``bench.ab``: a tree's workloads, timed on the parent's command.

Run as a file by ``bench.ab`` with the tree to measure as its first argument: the tree's
root goes first on ``sys.path``, so ``bench.workloads``, the runner module and
``zett_agent`` all come from that tree, while this driver (which an older tree may not
have) comes from the tree running ``bench.ab``. It speaks JSON lines on stdin/stdout:

- it prints ``{"ready": ..., "per_request_us": {...}}`` (CPU µs of a warm-up request)
  once every workload is built, checked and warmed up;
- for each ``{"workload": W, "requests": N}`` it reads, it times N requests of W and prints
  ``{"cpu_us": ..., "wall_us": ...}`` (per request);
- ``--requests N`` (instruction mode) instead runs N requests of each workload once, with no
  protocol, and exits: callgrind counts the whole process, and ``bench.ab`` subtracts two
  such runs of different N so that start-up and imports cancel out.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TREE = Path(sys.argv[1]).resolve()
_HERE = Path(__file__).resolve().parent
# Run as a file, bench/ would come first on sys.path and its socket.py would shadow the
# standard library; the measured tree's root replaces it.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
sys.path.insert(0, str(_TREE))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("tree")
    parser.add_argument("--runner", default="bench.zett_runner")
    parser.add_argument("--workloads", type=lambda v: v.split(","), default=["W1"])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--requests", type=int, default=None)
    return parser.parse_args()


async def _build(args: argparse.Namespace) -> dict:
    from bench.workloads import WORKLOADS

    module = importlib.import_module(args.runner)
    runners = {}
    for name in args.workloads:
        workload = WORKLOADS[name]
        runner = await module.build(workload)
        before = runner.counter.calls
        await runner.request()
        if runner.counter.calls - before != workload.tool_calls:
            raise SystemExit(f"{_TREE} {name}: the tool did not run as the workload asks")
        runners[name] = (runner, workload)
    return runners


async def _time(runner: object, requests: int) -> tuple[float, float]:
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(requests):
        await runner.request()
    cpu = time.process_time() - cpu_started
    return cpu / requests * 1e6, (time.perf_counter() - started) / requests * 1e6


async def _serve(args: argparse.Namespace) -> None:
    runners = await _build(args)
    per_request = {}
    for name, (runner, _) in runners.items():
        # CPU time sizes the blocks: on a loaded machine wall time is mostly waiting.
        per_request[name], _ = await _time(runner, args.warmup)
    _say({"ready": str(_TREE), "per_request_us": per_request})
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        runner, workload = runners[command["workload"]]
        before = runner.counter.calls
        cpu, wall = await _time(runner, command["requests"])
        ran = runner.counter.calls - before
        if ran != command["requests"] * workload.tool_calls:
            raise SystemExit(f"{_TREE}: the tool ran {ran} times")
        _say({"cpu_us": cpu, "wall_us": wall})


async def _count(args: argparse.Namespace) -> None:
    runners = await _build(args)
    for runner, _ in runners.values():
        for _ in range(args.warmup):
            await runner.request()
    for runner, _ in runners.values():
        for _ in range(args.requests):
            await runner.request()


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    args = _parse()
    asyncio.run(_count(args) if args.requests is not None else _serve(args))


if __name__ == "__main__":
    main()
