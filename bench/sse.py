"""The AG-UI event stream (SSE over HTTP) against the chat socket, through real daphne.

    python -m bench.sse            # full run, about a minute
    python -m bench.sse --smoke    # a few runs of each, no target judged

One daphne worker (``bench.serve``) serves the site with the zero-latency socket model
(``bench.zett_model:socket_model``: ``stream <n>`` answers with ``n`` text deltas), a
throw-away SQLite database and the per-person limits lifted. The same person (an API
token of one user) runs the same runs both ways, one at a time, repetitions alternating
the two paths:

- **socket**: one websocket, ``user_message`` ``stream <n>``, every frame read and decoded
  until the run's end;
- **SSE**: one ``POST api/ag-ui/demo/`` per run (a new connection each, as an AG-UI client
  does), every event read and decoded until ``RUN_FINISHED``.

Measured, per path: the server's CPU time (every thread of the daphne process, from
``/proc``) per zett frame of the timed runs — a frame is one numbered socket frame, and on
the SSE path the AG-UI events one frame became (a frame becomes one or more events; the
last carries its ``seq`` as ``id``) — and the time to the first byte: from sending the
request until the run's first frame (``run_started``) or the stream's first body bytes
(``RUN_STARTED``). Targets: SSE CPU per frame, and its first byte's p50, at most 1.2 times
the socket's, in the same repetition. The client runs in this process; it spends its own
CPU, not the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from websockets.asyncio.client import connect

from bench.machine import describe_machine, package_versions
from bench.serve import REPO, Server, load_average, migrate, scratch_dir, site_env

#: The target of docs/http-api.md: SSE server CPU per frame against the socket's.
CPU_RATIO_TARGET = 1.2
#: The stream's first byte (p50) against the socket's first frame, in the same repetition.
FIRST_BYTE_RATIO_TARGET = 1.2
TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Plan:
    deltas: int
    runs: int
    repetitions: int


FULL = Plan(deltas=500, runs=20, repetitions=5)
SMOKE = Plan(deltas=20, runs=2, repetitions=1)


def issue_token(env: dict[str, str]) -> str:
    """A user of the bench database and the secret of an API token of theirs."""
    create = (
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user('bench', password='unused-pw')"
    )
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "shell", "-c", create], cwd=REPO, env=env, check=True, timeout=120)
    done = subprocess.run(
        [*manage, "zett_token", "create", "bench"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


# --- the socket path -----------------------------------------------------------------------


async def socket_runs(port: int, secret: str, plan: Plan, count: int) -> tuple[int, list[float]]:
    """``count`` runs over one socket: (numbered frames, seconds to each ``run_started``)."""
    url = f"ws://127.0.0.1:{port}/ws/sessions/{uuid.uuid4()}/"
    headers = {"Authorization": f"Bearer {secret}"}
    frames, first_bytes = 0, []
    async with connect(url, additional_headers=headers, max_size=2**22) as socket:
        session = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
        assert session["type"] == "session", session
        for _ in range(count):
            sent = time.perf_counter()
            await socket.send(
                json.dumps({"type": "user_message", "content": f"stream {plan.deltas}"})
            )
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
                if frame["type"] == "run_started":
                    first_bytes.append(time.perf_counter() - sent)
                if "seq" in frame:
                    frames += 1
                if frame["type"] == "error":
                    raise RuntimeError(f"the socket run was refused: {frame}")
                event = frame.get("event") or {}
                if event.get("type") == "run_completed" or frame["type"] in (
                    "run_failed",
                    "run_cancelled",
                ):
                    break
    return frames, first_bytes


# --- the SSE path --------------------------------------------------------------------------


async def sse_run(port: int, secret: str, thread_id: str, text: str) -> tuple[int, float]:
    """One POSTed run read to its end: (events with an id, seconds to the first body bytes)."""
    body = json.dumps(
        {
            "threadId": thread_id,
            "runId": uuid.uuid4().hex,
            "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": text}],
        }
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /api/ag-ui/demo/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
        f"Authorization: Bearer {secret}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sent = time.perf_counter()
    writer.write(head.encode() + body)
    try:
        status = await asyncio.wait_for(reader.readline(), TIMEOUT)
        if b" 200 " not in status:
            raise RuntimeError(f"the SSE run was refused: {status!r} {await reader.read()!r}")
        while (await asyncio.wait_for(reader.readline(), TIMEOUT)) not in (b"\r\n", b""):
            pass
        first_byte: float | None = None
        numbered, pending, finished = 0, b"", False
        while not finished:
            size = int((await asyncio.wait_for(reader.readline(), TIMEOUT)).strip() or b"0", 16)
            if size == 0:
                break
            chunk = (await asyncio.wait_for(reader.readexactly(size + 2), TIMEOUT))[:-2]
            if first_byte is None:
                first_byte = time.perf_counter() - sent
            pending += chunk
            *blocks, pending = pending.split(b"\n\n")
            for block in blocks:
                event_id = None
                for line in block.split(b"\n"):
                    if line.startswith(b"id: "):
                        event_id = int(line[4:])
                    elif line.startswith(b"data: "):
                        event = json.loads(line[6:])
                        finished = finished or event["type"] in ("RUN_FINISHED", "RUN_ERROR")
                if event_id is not None:
                    numbered += 1
        assert first_byte is not None
        return numbered, first_byte
    finally:
        writer.close()


async def sse_runs(port: int, secret: str, plan: Plan, count: int) -> tuple[int, list[float]]:
    thread_id = str(uuid.uuid4())
    frames, first_bytes = 0, []
    for _ in range(count):
        numbered, first_byte = await sse_run(port, secret, thread_id, f"stream {plan.deltas}")
        frames += numbered
        first_bytes.append(first_byte)
    return frames, first_bytes


# --- the measurement -----------------------------------------------------------------------


async def timed(server: Server, runner, secret: str, plan: Plan) -> dict:
    await runner(server.port, secret, plan, 1)  # warm this path
    cpu = server.cpu_seconds
    frames, first_bytes = await runner(server.port, secret, plan, plan.runs)
    spent = server.cpu_seconds - cpu
    return {
        "frames": frames,
        "server_cpu_us_per_frame": spent / frames * 1e6,
        "first_byte_ms_p50": statistics.median(first_bytes) * 1000,
        "first_byte_ms_max": max(first_bytes) * 1000,
    }


async def measure(server: Server, secret: str, plan: Plan) -> dict:
    paths = {"socket": socket_runs, "sse": sse_runs}
    samples: dict[str, list[dict]] = {name: [] for name in paths}
    for repetition in range(plan.repetitions):
        order = list(paths.items())
        if repetition % 2:
            order.reverse()
        for name, runner in order:
            sample = await timed(server, runner, secret, plan)
            samples[name].append(sample)
            print(
                f"  {name:>6}: {sample['server_cpu_us_per_frame']:.1f} µs server CPU/frame, "
                f"first byte {sample['first_byte_ms_p50']:.2f} ms (p50), "
                f"{sample['frames']} frames, load {load_average()[0]:.2f}",
                flush=True,
            )
    ratios = [
        sse["server_cpu_us_per_frame"] / socket["server_cpu_us_per_frame"]
        for sse, socket in zip(samples["sse"], samples["socket"], strict=True)
    ]
    first_byte_ratios = [
        sse["first_byte_ms_p50"] / socket["first_byte_ms_p50"]
        for sse, socket in zip(samples["sse"], samples["socket"], strict=True)
    ]
    return {
        "samples": samples,
        "cpu_ratios": ratios,
        "cpu_ratio_median": statistics.median(ratios),
        "first_byte_ratios": first_byte_ratios,
        "first_byte_ratio_median": statistics.median(first_byte_ratios),
    }


def run(plan: Plan) -> dict:
    with tempfile.TemporaryDirectory(prefix="zett-bench-sse-", dir=scratch_dir()) as work:
        workdir = Path(work)
        env = site_env(f"sqlite:///{workdir / 'bench.sqlite3'}")
        migrate(env)
        secret = issue_token(env)
        with Server(env, workdir, "sse-site") as server:
            results = asyncio.run(measure(server, secret, plan))
            results["log_problems"] = server.log_problems()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few runs of each, for CI")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    plan = SMOKE if args.smoke else FULL
    machine = describe_machine()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}")
    print(f"Plan: {asdict(plan)}; load average {load_average()}")
    started = time.perf_counter()
    results = run(plan)
    results.update(
        plan=asdict(plan),
        machine=machine,
        versions=package_versions(["daphne", "Django", "Twisted", "websockets"]),
    )
    for name in ("socket", "sse"):
        cpu = [s["server_cpu_us_per_frame"] for s in results["samples"][name]]
        ttfb = [s["first_byte_ms_p50"] for s in results["samples"][name]]
        print(
            f"{name:>6}: server CPU {statistics.median(cpu):.1f} µs/frame (median of "
            f"{len(cpu)}), first byte {statistics.median(ttfb):.2f} ms (median p50)"
        )
    ratio = results["cpu_ratio_median"]
    print(
        f"SSE / socket server CPU per frame: {ratio:.2f} (each repetition: "
        + ", ".join(f"{r:.2f}" for r in results["cpu_ratios"])
        + ")"
    )
    first = results["first_byte_ratio_median"]
    print(
        f"SSE first byte / socket first frame (p50s): {first:.2f} (each repetition: "
        + ", ".join(f"{r:.2f}" for r in results["first_byte_ratios"])
        + ")"
    )
    if not args.smoke:
        verdict = "met" if ratio <= CPU_RATIO_TARGET else "MISSED"
        print(f"Target SSE CPU per frame <= {CPU_RATIO_TARGET}x the socket's: {verdict}")
        verdict = "met" if first <= FIRST_BYTE_RATIO_TARGET else "MISSED"
        print(f"Target SSE first byte <= {FIRST_BYTE_RATIO_TARGET}x the socket's: {verdict}")
    if results["log_problems"]:
        print("server log problems:\n" + "\n".join(results["log_problems"][:20]))
        if args.smoke:
            return 1
    print(f"Total time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
