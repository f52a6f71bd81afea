"""The socket benchmark's client, run by ``bench.socket`` in a process of its own.

Each scenario prints one JSON object per line on stdout; ``hold`` also reads stdin, so the
orchestrator can weigh the server between stages. Every frame is decoded (a real client
must), and every wait has a deadline: a server that stops answering fails the scenario
instead of hanging the benchmark.

Scenarios (``python -m bench.socket_client SCENARIO --base ws://127.0.0.1:PORT ...``):

- ``record``: one run of ``stream <n>``; prints the frames the server sent for it;
- ``throughput``: ``--connections`` sockets each run ``--requests`` runs of ``stream <n>``
  at once; prints agent events per second, the client's own CPU share and, with
  ``--server-pids``, the CPU time those server processes spent in the timed window;
- ``reply``: one request at a time that pauses in ``ask_user``; times the reply until the
  ``tool_started`` frame (the tool runs next) and until ``tool_completed``;
- ``hold``: opens ``--connections`` idle sockets, then pauses a session in each, then
  releases them, waiting for a line on stdin before each step.

The site wants a browser: ``--cookie`` is the ``sessionid`` cookie a page visit gave (the
orchestrator fetches it), sent on every socket. With ``--follow-base`` (two workers),
``throughput`` and ``reply`` open each session on both: the *driver* socket on ``--base``
sends the user messages, so the run runs on that worker, and the *follower* socket on
``--follow-base`` is the one measured: it receives the frames through the other worker and
sends the replies, which that worker forwards to the run's owner. The driver's frames are
read (so its socket never stalls the run) but only checked for an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bench.serve import cpu_seconds_of

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
    async def open(
        cls, base: str, wait: float, cookie: str | None = None, session_id: str | None = None
    ) -> Session:
        url = f"{base}/ws/sessions/{session_id or uuid.uuid4()}/"
        origin = base.replace("ws://", "http://", 1)
        headers = {"Cookie": cookie} if cookie else None
        socket = await asyncio.wait_for(
            connect(
                url,
                origin=origin,
                compression=None,
                max_size=None,
                ping_interval=None,
                additional_headers=headers,
            ),
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
        return await self.read_run()

    async def read_run(self) -> int:
        """Read to the end of the current run; return its agent events."""
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
        return await self.asked()

    async def asked(self) -> str:
        """Read until the run asks its question; return the tool call id it waits on."""
        frame, _ = await self.until(
            lambda f: _event_type(f) == "custom" and f["event"].get("name") == "ask_user"
        )
        return frame["event"]["payload"]["tool_call_id"]

    async def answer(self, call_id: str) -> None:
        payload = {"tool_call_id": call_id, "answer": "yes"}
        await self.send({"type": "external_event", "name": "ask_user_response", "payload": payload})

    async def close(self) -> None:
        await self.socket.close()


class Pair:
    """One session open on two workers: runs start on the driver's, the follower is measured.

    The driver's frames are drained in a task of their own and only checked for ``error``
    (a ``busy`` would otherwise surface as a follower timeout).
    """

    def __init__(self, driver: Session, follower: Session) -> None:
        self.driver = driver
        self.follower = follower
        self.errors: list[str] = []
        self._drain = asyncio.create_task(self._read_driver())

    @classmethod
    async def open(cls, base: str, follow_base: str, wait: float, cookie: str | None) -> Pair:
        session_id = str(uuid.uuid4())
        follower = await Session.open(follow_base, wait, cookie, session_id)
        driver = await Session.open(base, wait, cookie, session_id)
        return cls(driver, follower)

    async def _read_driver(self) -> None:
        with contextlib.suppress(Exception):
            async for raw in self.driver.socket:
                if isinstance(raw, str) and raw.startswith('{"type":"error"'):
                    self.errors.append(raw)

    def _check(self, error: Exception) -> RuntimeError:
        return RuntimeError(f"{error!r}; the driver socket got {self.errors[:3]}")

    async def run(self, content: str) -> int:
        await self.driver.send({"type": "user_message", "content": content})
        try:
            return await self.follower.read_run()
        except (TimeoutError, RuntimeError) as error:
            raise self._check(error) from error

    async def ask(self) -> str:
        await self.driver.send({"type": "user_message", "content": "ask"})
        try:
            return await self.follower.asked()
        except (TimeoutError, RuntimeError) as error:
            raise self._check(error) from error

    async def answer(self, call_id: str) -> None:
        await self.follower.answer(call_id)

    async def until(self, wanted: Callable[[Frame], bool]) -> tuple[Frame, int]:
        return await self.follower.until(wanted)

    async def close(self) -> None:
        await self.driver.close()
        await self.follower.close()
        self._drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._drain


Chat = Session | Pair


async def open_chat(args: argparse.Namespace) -> Chat:
    if args.follow_base:
        return await Pair.open(args.base, args.follow_base, args.wait, args.cookie)
    return await Session.open(args.base, args.wait, args.cookie)


async def open_many(args: argparse.Namespace, count: int, batch: int = 50) -> list[Chat]:
    """Open ``count`` chats, ``batch`` handshakes at a time (a burst would hit the backlog)."""
    chats: list[Chat] = []
    for start in range(0, count, batch):
        size = min(batch, count - start)
        chats += await asyncio.gather(*(open_chat(args) for _ in range(size)))
    return chats


def emit(result: Frame) -> None:
    print(json.dumps(result), flush=True)


async def record(args: argparse.Namespace) -> None:
    session = await Session.open(args.base, args.wait, args.cookie)
    await session.send({"type": "user_message", "content": f"stream {args.deltas}"})
    frames = []
    while True:
        frame = await session.receive()
        frames.append(frame)
        if _is_run_end(frame):
            break
    await session.close()
    emit({"frames": frames})


def _server_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds_of(pid) for pid in pids)


async def throughput(args: argparse.Namespace) -> None:
    chats = await open_many(args, args.connections)
    for chat in chats:  # warm both ends before timing
        await chat.run(f"stream {args.deltas}")
    pids = [int(pid) for pid in args.server_pids.split(",") if pid]
    server_started = _server_cpu(pids)
    cpu_started = time.process_time()
    started = time.perf_counter()

    async def drive(chat: Chat) -> int:
        total = 0
        for _ in range(args.requests):
            total += await chat.run(f"stream {args.deltas}")
        return total

    counts = await asyncio.gather(*(drive(chat) for chat in chats))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    server_cpu = _server_cpu(pids) - server_started
    await asyncio.gather(*(chat.close() for chat in chats))
    events = sum(counts)
    emit(
        {
            "connections": args.connections,
            "events": events,
            "seconds": elapsed,
            "events_per_second": events / elapsed,
            "client_cpu_share": cpu / elapsed,
            "server_cpu_seconds": server_cpu if pids else None,
            "server_cpu_us_per_event": server_cpu / events * 1e6 if pids else None,
        }
    )


async def reply(args: argparse.Namespace) -> None:
    to_started: list[float] = []
    to_completed: list[float] = []
    #: When the replying socket got its verdict, and the others' ``reply_accepted``.
    stages: dict[str, list[float]] = {}
    warmup = 20
    chat: Chat | None = None
    for index in range(args.samples + warmup):
        if index % 20 == 0:  # a fresh session keeps the restored history short
            if chat is not None:
                await chat.close()
            chat = await open_chat(args)
        call_id = await chat.ask()
        started = time.perf_counter()
        await chat.answer(call_id)
        seen: dict[str, float] = {}

        def arrived(frame: Frame, seen: dict[str, float] = seen) -> bool:
            kind = _event_type(frame) or frame["type"]
            seen.setdefault(kind, time.perf_counter())
            return kind == "tool_started"

        await chat.until(arrived)
        tool_started = time.perf_counter()
        for kind in ("external_event_result", "reply_accepted"):
            if kind in seen:
                stages.setdefault(kind, []).append((seen[kind] - started) * 1000)
        await chat.until(lambda f: _event_type(f) == "tool_completed")
        tool_completed = time.perf_counter()
        await chat.until(lambda f: _event_type(f) == "run_completed")
        if index >= warmup:
            to_started.append((tool_started - started) * 1000)
            to_completed.append((tool_completed - started) * 1000)
    if chat is not None:
        await chat.close()
    emit({"samples": len(to_started), **_percentiles("tool_started", to_started)})
    emit({"samples": len(to_completed), **_percentiles("tool_completed", to_completed)})
    for kind, values in stages.items():
        values = values[-len(to_started) :] if to_started else values
        emit({"samples": len(values), **_percentiles(kind, values)})
    if args.all_samples:
        emit({"until": "samples", "tool_started_ms": to_started})


def _percentiles(name: str, values: list[float]) -> Frame:
    values = sorted(values)
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return {"until": name, "p50_ms": statistics.median(values), "p99_ms": p99, "max_ms": values[-1]}


async def _wait_for_go() -> None:
    line = await asyncio.to_thread(sys.stdin.readline)
    if not line:
        raise RuntimeError("the orchestrator closed stdin")


async def hold(args: argparse.Namespace) -> None:
    sessions = await open_many(args, args.connections)
    emit({"stage": "idle", "connections": len(sessions)})
    await _wait_for_go()
    if not args.idle_only:
        call_ids = await asyncio.gather(*(session.ask() for session in sessions))
        emit({"stage": "paused", "sessions": len(call_ids)})
        await _wait_for_go()
        for session, call_id in zip(sessions, call_ids, strict=True):
            await session.answer(call_id)

        async def finish(session: Chat) -> None:
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
    parser.add_argument("--follow-base", help="a second worker: measure the session there")
    parser.add_argument("--cookie", help="the browser's cookie header value (sessionid=...)")
    parser.add_argument("--server-pids", default="", help="comma-separated, for server CPU")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--deltas", type=int, default=500, help="text deltas per run")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--all-samples", action="store_true", help="also print every sample")
    parser.add_argument("--idle-only", action="store_true")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds any one frame may take")
    args = parser.parse_args()
    asyncio.run(SCENARIOS[args.scenario](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
