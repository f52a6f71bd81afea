"""The socket benchmark's client, run by ``bench.socket`` in a process of its own.

Each scenario prints one JSON object per line on stdout; ``hold`` also reads stdin, so the
orchestrator can weigh the server between stages. Every frame is decoded (a real client
must), and every wait has a deadline: a server that stops answering fails the scenario
instead of hanging the benchmark.

Scenarios (``python -m bench.socket_client SCENARIO --base ws://127.0.0.1:PORT ...``):

- ``record``: one run of ``stream <n>``; prints the frames the server sent for it;
- ``throughput``: ``--connections`` sockets each run ``--requests`` runs of ``stream <n>``
  at once; prints agent events per second and the client's own CPU share;
- ``reply``: one request at a time that pauses in ``ask_user``; times the reply until the
  ``tool_started`` frame (the tool runs next) and until ``tool_completed``;
- ``hold``: opens ``--connections`` idle sockets, then pauses a session in each, then
  releases them, waiting for a line on stdin before each step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

Frame = dict[str, Any]


def _event_type(frame: Frame) -> str | None:
    if frame.get("type") != "agent_event":
        return None
    return frame["event"].get("type")


def _is_run_end(frame: Frame) -> bool:
    return _event_type(frame) == "run_completed" or frame.get("type") in (
        "run_failed",
        "run_cancelled",
        "error",
    )


class Session:
    """One socket on one fresh session id."""

    def __init__(self, socket: ClientConnection, wait: float) -> None:
        self.socket = socket
        #: Seconds any one awaited frame may take before the scenario fails.
        self.wait = wait

    @classmethod
    async def open(cls, base: str, wait: float) -> Session:
        url = f"{base}/ws/sessions/{uuid.uuid4()}/"
        origin = base.replace("ws://", "http://", 1)
        socket = await asyncio.wait_for(
            connect(url, origin=origin, compression=None, max_size=None, ping_interval=None),
            wait,
        )
        session = cls(socket, wait)
        first = await session.receive()
        if first.get("type") != "session":
            raise RuntimeError(f"expected a session frame on connect, got {first}")
        return session

    async def send(self, frame: Frame) -> None:
        await self.socket.send(json.dumps(frame))

    async def receive(self) -> Frame:
        return json.loads(await asyncio.wait_for(self.socket.recv(), self.wait))

    async def until(self, wanted: Callable[[Frame], bool]) -> tuple[Frame, int]:
        """Read frames until ``wanted`` matches; return it and how many agent events came."""
        events = 0
        while True:
            frame = await self.receive()
            if frame.get("type") == "agent_event":
                events += 1
            if wanted(frame):
                return frame, events
            if _is_run_end(frame):
                raise RuntimeError(f"the run ended before the awaited frame: {frame}")

    async def run(self, content: str) -> int:
        """Send one user message and read to the end of its run; return its agent events."""
        await self.send({"type": "user_message", "content": content})
        events = 0
        while True:
            frame = await self.receive()
            if frame.get("type") == "agent_event":
                events += 1
            if _is_run_end(frame):
                if _event_type(frame) != "run_completed":
                    raise RuntimeError(f"the run did not complete: {frame}")
                return events

    async def ask(self) -> str:
        """Start a run that pauses in ``ask_user``; return the tool call id it waits on."""
        await self.send({"type": "user_message", "content": "ask"})
        frame, _ = await self.until(
            lambda f: _event_type(f) == "custom" and f["event"].get("name") == "ask_user"
        )
        return frame["event"]["payload"]["tool_call_id"]

    async def answer(self, call_id: str) -> None:
        payload = {"tool_call_id": call_id, "answer": "yes"}
        await self.send({"type": "external_event", "name": "ask_user_response", "payload": payload})

    async def close(self) -> None:
        await self.socket.close()


async def open_many(base: str, count: int, wait: float, batch: int = 50) -> list[Session]:
    """Open ``count`` sessions, ``batch`` handshakes at a time (a burst would hit the backlog)."""
    sessions: list[Session] = []
    for start in range(0, count, batch):
        size = min(batch, count - start)
        sessions += await asyncio.gather(*(Session.open(base, wait) for _ in range(size)))
    return sessions


def emit(result: Frame) -> None:
    print(json.dumps(result), flush=True)


async def record(args: argparse.Namespace) -> None:
    session = await Session.open(args.base, args.wait)
    await session.send({"type": "user_message", "content": f"stream {args.deltas}"})
    frames = []
    while True:
        frame = await session.receive()
        frames.append(frame)
        if _is_run_end(frame):
            break
    await session.close()
    emit({"frames": frames})


async def throughput(args: argparse.Namespace) -> None:
    sessions = await open_many(args.base, args.connections, args.wait)
    for session in sessions:  # warm both ends before timing
        await session.run(f"stream {args.deltas}")
    cpu_started = time.process_time()
    started = time.perf_counter()

    async def drive(session: Session) -> int:
        total = 0
        for _ in range(args.requests):
            total += await session.run(f"stream {args.deltas}")
        return total

    counts = await asyncio.gather(*(drive(session) for session in sessions))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await asyncio.gather(*(session.close() for session in sessions))
    events = sum(counts)
    emit(
        {
            "connections": args.connections,
            "events": events,
            "seconds": elapsed,
            "events_per_second": events / elapsed,
            "client_cpu_share": cpu / elapsed,
        }
    )


async def reply(args: argparse.Namespace) -> None:
    to_started: list[float] = []
    to_completed: list[float] = []
    warmup = 20
    session = None
    for index in range(args.samples + warmup):
        if index % 20 == 0:  # a fresh session keeps the restored history short
            if session is not None:
                await session.close()
            session = await Session.open(args.base, args.wait)
        call_id = await session.ask()
        started = time.perf_counter()
        await session.answer(call_id)
        await session.until(lambda f: _event_type(f) == "tool_started")
        tool_started = time.perf_counter()
        await session.until(lambda f: _event_type(f) == "tool_completed")
        tool_completed = time.perf_counter()
        await session.until(lambda f: _event_type(f) == "run_completed")
        if index >= warmup:
            to_started.append((tool_started - started) * 1000)
            to_completed.append((tool_completed - started) * 1000)
    if session is not None:
        await session.close()
    emit({"samples": len(to_started), **_percentiles("tool_started", to_started)})
    emit({"samples": len(to_completed), **_percentiles("tool_completed", to_completed)})


def _percentiles(name: str, values: list[float]) -> Frame:
    values = sorted(values)
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return {"until": name, "p50_ms": statistics.median(values), "p99_ms": p99, "max_ms": values[-1]}


async def _wait_for_go() -> None:
    line = await asyncio.to_thread(sys.stdin.readline)
    if not line:
        raise RuntimeError("the orchestrator closed stdin")


async def hold(args: argparse.Namespace) -> None:
    sessions = await open_many(args.base, args.connections, args.wait)
    emit({"stage": "idle", "connections": len(sessions)})
    await _wait_for_go()
    if not args.idle_only:
        call_ids = await asyncio.gather(*(session.ask() for session in sessions))
        emit({"stage": "paused", "sessions": len(call_ids)})
        await _wait_for_go()
        for session, call_id in zip(sessions, call_ids, strict=True):
            await session.answer(call_id)

        async def finish(session: Session) -> None:
            await session.until(lambda f: _event_type(f) == "run_completed")

        await asyncio.gather(*(finish(session) for session in sessions))
        emit({"stage": "released", "completed": len(sessions)})
    await asyncio.gather(*(session.close() for session in sessions))
    emit({"stage": "closed"})


SCENARIOS = {"record": record, "throughput": throughput, "reply": reply, "hold": hold}


def main() -> int:
    parser = argparse.ArgumentParser(description="socket benchmark client")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--base", required=True, help="ws://127.0.0.1:PORT")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--deltas", type=int, default=500, help="text deltas per run")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--idle-only", action="store_true")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds any one frame may take")
    args = parser.parse_args()
    asyncio.run(SCENARIOS[args.scenario](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
