"""What tracing costs a W1 request in CPU instructions: ``bench.tracing``'s variants under
callgrind, a count that the machine's load does not move.

    python -m bench.tracing_instructions                 # every variant, 200 requests each
    python -m bench.tracing_instructions --variants off sampled-out --requests 100

Each variant runs in two processes under ``valgrind --tool=callgrind``, both building the
same runner and warming it up alike, one then running ``--requests`` requests and the other
none; the difference of their instruction counts, divided by ``--requests``, is what one
request costs. ``PYTHONHASHSEED`` is fixed so that both processes do the same start-up work.
The variants are ``bench.tracing``'s (``off``, ``api-only``, ``sampled-out``, ``ratio-out``,
``recording``,
``floor``: ``off`` plus 4 bare SDK spans, ``full-floor``: ``off`` plus the 4 spans as
recorded, with their attributes and contexts, by bare SDK calls, ``drop-floor``: ``off``
plus one span on the dropping provider, ``sampler-floor``: ``off`` plus one question of
the ratio provider's sampler, ``listener``, ``span-listener``: one asking only
for the moves the tracing extension asks for, heard as it hears them), on W1 as the
runtime benchmark runs it;
and ``no-hooks``, W1 with one extension that overrides no hook (counted here only).
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
import os
import re
import subprocess
import tempfile

VARIANTS = (
    "off",
    "api-only",
    "sampled-out",
    "ratio-out",
    "recording",
    "floor",
    "full-floor",
    "drop-floor",
    "sampler-floor",
    "listener",
    "span-listener",
    "no-hooks",
)
WARMUP = 30


async def _runner(variant: str, base: str) -> object:
    """The runner of one ``bench.tracing`` variant on ``base``, built alone."""
    from bench.tracing import providers, variant_runner

    _, given = providers()
    return await variant_runner(variant, base, given)


async def _child(variant: str, requests: int, base: str) -> None:
    import gc

    runner = await _runner(variant, base)
    for _ in range(WARMUP):
        await runner.request()
    gc.collect()
    for _ in range(requests):
        await runner.request()


def instructions(
    variant: str, requests: int, base: str = "W1", python: str = sys.executable
) -> int:
    """Instructions callgrind counts for one child process (start-up included)."""
    with tempfile.TemporaryDirectory(prefix="zett-callgrind-") as directory:
        out = os.path.join(directory, "callgrind.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            python,
            "-m",
            "bench.tracing_instructions",
            "--child",
            variant,
            "--requests",
            str(requests),
            "--base",
            base,
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{variant}: {done.stderr[-2000:]}")
        match = re.search(r"Collected : (\d+)", done.stderr)
        if match is None:
            raise RuntimeError(f"{variant}: no instruction count in {done.stderr[-500:]}")
        return int(match.group(1))


def per_request(variant: str, requests: int, base: str = "W1") -> float:
    """Instructions one request of ``variant`` costs (two processes' difference)."""
    return (instructions(variant, requests, base) - instructions(variant, 0, base)) / requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument(
        "--base",
        choices=("W1", "W1-history-10"),
        default="W1",
        help="the request: W1 alone, or with the default extensions (no floor variants)",
    )
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        asyncio.run(_child(args.child, args.requests, args.base))
        return 0
    counts = {}
    for variant in args.variants:
        counts[variant] = per_request(variant, args.requests, args.base)
        print(f"  {variant}: {counts[variant]:,.0f} instructions/request", flush=True)
    off = counts.get("off")
    print("\n| variant | instructions/request | vs off |\n|---|---|---|")
    for variant, count in counts.items():
        ratio = f"{count / off:.3f}x" if off else "—"
        print(f"| {variant} | {count:,.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
