"""200 chats streaming for 60 s over two workers: nothing lost, nothing twice, no error.

    python -m bench.cluster_stress            # 200 chats, 60 s
    python -m bench.cluster_stress --smoke    # 10 chats, 5 s, every check

Two daphne workers on one PostgreSQL database and one Redis (``bench.serve``). Every chat
has a socket on each worker, so every frame reaches one socket directly and the other
through Redis (fan-out), and its runs alternate between the two sockets, so both workers
own runs and each forwards the other's. Each run is ``paced <n> <ms>``: the model streams
``n`` deltas ``ms`` apart (defaults: 100 deltas, 40 ms: 200 chats then ask for about
5,000 deltas a second, 10,000 frames to the sockets, which keeps both cores busy without
drowning them; ``--pace-ms`` changes it). Chats start spread over one run's length and
keep sending the next message as soon as both sockets saw the last run end, until
``--seconds`` have passed.

Checked:

- both sockets of a chat received the very same numbered frames (same text, same order);
- each run's frames: ``run_started`` first, ``seq`` strictly increasing and contiguous,
  ``n`` deltas, a ``run_completed`` whose answer has ``n`` characters — a frame missing is
  *lost*, a ``seq`` seen twice *duplicated*;
- no ``error`` frame, no socket failure, no warning or error in either server's log, and
  every run stored as ``completed`` with its whole answer (``bench.dbtool``).

Reported: runs, frames, events per second, each worker's CPU (share of one core), Redis's
CPU, the client's CPU and the load average. Every wait has a deadline; the servers, the
database and the Redis data are removed in ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from bench.machine import describe_machine, package_versions
from bench.serve import (
    DEFAULT_POSTGRES,
    DEFAULT_REDIS,
    Server,
    browser_cookie,
    cpu_seconds_of,
    dbtool,
    flushed_redis,
    load_average,
    migrate,
    postgres_database,
    scratch_dir,
    site_env,
)

WAIT_S = 60.0


def load() -> str:
    return "/".join(f"{value:.1f}" for value in load_average())


@dataclass
class Side:
    """One socket of a chat and what it read."""

    socket: ClientConnection
    frames: list[str] = field(default_factory=list)
    ends: int = 0
    errors: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def read(self) -> None:
        try:
            async for raw in self.socket:
                assert isinstance(raw, str)
                if raw.startswith('{"type": "error"'):
                    self.errors.append(raw[:300])
                    self.changed.set()
                    continue
                self.frames.append(raw)
                if raw.startswith('{"type": "run_') or '"run_completed"' in raw:
                    frame = json.loads(raw)
                    kind = frame["type"]
                    if kind == "agent_event":
                        kind = frame["event"]["type"]
                    if kind.startswith("run_") and kind != "run_started":
                        self.ends += 1
                self.changed.set()
        except Exception as error:  # a socket that fails is an error, not a crash
            self.errors.append(f"socket failed: {error!r}")
            self.changed.set()


@dataclass
class Chat:
    session_id: str
    sides: list[Side] = field(default_factory=list)
    runs: int = 0
    wanted: list[int] = field(default_factory=list)


async def open_side(base: str, session_id: str, cookie: str) -> Side:
    socket = await asyncio.wait_for(
        connect(
            f"{base}/ws/sessions/{session_id}/",
            origin=base.replace("ws://", "http://", 1),
            compression=None,
            max_size=None,
            ping_interval=None,
            additional_headers={"Cookie": cookie},
        ),
        WAIT_S,
    )
    first = json.loads(await asyncio.wait_for(socket.recv(), WAIT_S))
    if first.get("type") != "session":
        raise RuntimeError(f"expected the session frame, got {str(first)[:300]}")
    return Side(socket)


async def drive(chat: Chat, args: argparse.Namespace, stop_at: float, start_delay: float) -> None:
    """Runs, one after the other, alternating the sending socket, until ``stop_at``."""
    await asyncio.sleep(start_delay)  # spread the chats over one run's length
    while time.monotonic() < stop_at:
        sender = chat.sides[chat.runs % 2]
        message = f"paced {args.deltas} {args.pace_ms}"
        await sender.socket.send(json.dumps({"type": "user_message", "content": message}))
        chat.runs += 1
        chat.wanted.append(args.deltas)
        deadline = time.monotonic() + WAIT_S
        for side in chat.sides:
            while side.ends < chat.runs and not side.errors:
                side.changed.clear()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"run {chat.runs} of {chat.session_id} did not end")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(side.changed.wait(), remaining)
            if side.errors:
                return


def verify(chat: Chat) -> Counter[str]:
    """Lost, duplicated and differing frames of one chat (see the module docstring)."""
    found: Counter[str] = Counter()
    first, second = (side.frames for side in chat.sides)
    if first != second:
        found["different"] += sum(1 for a, b in zip(first, second, strict=False) if a != b)
        found["different"] += abs(len(first) - len(second))
    frames = [json.loads(raw) for raw in first]
    seqs = [frame["seq"] for frame in frames]
    found["duplicated"] += len(seqs) - len(set(seqs))
    found["out_of_order"] += sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
    runs: list[list[dict[str, Any]]] = []
    for frame in frames:
        if frame["type"] == "run_started":
            runs.append([])
        if not runs:
            found["outside_a_run"] += 1
            continue
        runs[-1].append(frame)
    found["runs"] += len(runs)
    if len(runs) != chat.runs:
        found["runs_missing"] += abs(chat.runs - len(runs))
    for run, wanted in zip(runs, chat.wanted, strict=False):
        numbers = [frame["seq"] for frame in run]
        found["lost"] += (numbers[-1] - numbers[0] + 1) - len(set(numbers))
        deltas = sum(
            1 for f in run if f["type"] == "agent_event" and f["event"]["type"] == "text_delta"
        )
        found["lost"] += max(0, wanted - deltas)
        found["duplicated"] += max(0, deltas - wanted)
        last = run[-1]
        if last["type"] != "agent_event" or last["event"]["type"] != "run_completed":
            found["not_completed"] += 1
        elif len(last["event"]["message"]["content"]) != wanted:
            found["answer_incomplete"] += 1
        found["frames"] += len(run)
        found["deltas"] += deltas
    return found


def redis_pid(url: str) -> int | None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=10)
    try:
        return int(client.info("server")["process_id"])
    except (redis.RedisError, KeyError, ValueError):
        return None
    finally:
        client.close()


def client_cpu() -> float:
    return time.process_time()


async def stress(bases: list[str], cookie: str, args: argparse.Namespace) -> list[Chat]:
    chats = [Chat(str(uuid.uuid4())) for _ in range(args.chats)]
    readers: list[asyncio.Task[None]] = []
    try:
        for start in range(0, len(chats), 25):  # handshakes in batches: no backlog burst
            batch = chats[start : start + 25]
            opened = await asyncio.gather(
                *(open_side(base, chat.session_id, cookie) for chat in batch for base in bases)
            )
            for index, chat in enumerate(batch):
                chat.sides = opened[2 * index : 2 * index + 2]
                readers += [asyncio.create_task(side.read()) for side in chat.sides]
        run_length = args.deltas * args.pace_ms / 1000
        stop_at = time.monotonic() + args.seconds
        rng = random.Random(args.seed)
        await asyncio.gather(
            *(drive(chat, args, stop_at, rng.uniform(0, run_length)) for chat in chats)
        )
    finally:
        for chat in chats:
            for side in chat.sides:
                await side.socket.close()
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    return chats


def run(args: argparse.Namespace, workdir: Path) -> dict:
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres_database(args.postgres))
        redis_url = stack.enter_context(flushed_redis(args.redis))
        env = site_env(database, redis_url=redis_url, ZETT_DB_POOL_SIZE=str(args.pool))
        migrate(env)
        servers = [
            stack.enter_context(Server(env, workdir, f"cluster-{index}")) for index in range(2)
        ]
        cookie = browser_cookie(servers[0].port)
        redis_process = redis_pid(redis_url)
        before = [cpu_seconds_of(server.pid) for server in servers]
        redis_before = cpu_seconds_of(redis_process) if redis_process else 0.0
        client_before = client_cpu()
        load_before = load()
        started = time.perf_counter()
        chats = asyncio.run(stress([server.base for server in servers], cookie, args))
        elapsed = time.perf_counter() - started
        cpu = [cpu_seconds_of(s.pid) - b for s, b in zip(servers, before, strict=True)]
        redis_cpu = (cpu_seconds_of(redis_process) - redis_before) if redis_process else None
        client = client_cpu() - client_before
        load_after = load()
        totals: Counter[str] = Counter()
        for chat in chats:
            totals.update(verify(chat))
        errors = [error for chat in chats for side in chat.sides for error in side.errors]
        storage = stored(env, chats)
        problems = [line for server in servers for line in server.log_problems()]
    bad = {
        key: totals[key]
        for key in (
            "lost",
            "duplicated",
            "different",
            "out_of_order",
            "outside_a_run",
            "runs_missing",
            "not_completed",
            "answer_incomplete",
        )
    }
    ok = not any(bad.values()) and not errors and not problems and not storage["problems"]
    return {
        "chats": args.chats,
        "sockets": 2 * args.chats,
        "deltas_per_run": args.deltas,
        "pace_ms": args.pace_ms,
        "seconds": elapsed,
        "runs": totals["runs"],
        "frames_per_socket": totals["frames"],
        "frames_delivered": 2 * totals["frames"],
        "deltas": totals["deltas"],
        "events_per_second": totals["deltas"] / elapsed,
        "frames_delivered_per_second": 2 * totals["frames"] / elapsed,
        "worker_cpu_share": [value / elapsed for value in cpu],
        "redis_cpu_share": None if redis_cpu is None else redis_cpu / elapsed,
        "client_cpu_share": client / elapsed,
        "load_before": load_before,
        "load_after": load_after,
        "checks": bad,
        "errors": errors[:20],
        "error_count": len(errors),
        "stored": storage,
        "log_problems": problems[:20],
        "ok": ok,
    }


def stored(env: dict[str, str], chats: list[Chat]) -> dict[str, int]:
    found = dbtool(env, "runs", *(chat.session_id for chat in chats))
    result = Counter({"problems": 0})
    for chat in chats:
        rows = found[chat.session_id]
        statuses = Counter(status for _, status in rows["runs"])
        result["runs"] += len(rows["runs"])
        result["completed"] += statuses["completed"]
        if statuses["completed"] != chat.runs or len(rows["runs"]) != chat.runs:
            result["problems"] += 1
        answers = [length for _, role, _, length in rows["messages"] if role == "assistant"]
        if answers != chat.wanted:
            result["problems"] += 1
    return dict(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="10 chats for 5 s, for CI")
    parser.add_argument("--chats", type=int, help="chats (default 200)")
    parser.add_argument("--seconds", type=float, help="how long they stream (default 60)")
    parser.add_argument("--deltas", type=int, default=100, help="deltas per run")
    parser.add_argument("--pace-ms", type=float, default=40.0, help="milliseconds per delta")
    parser.add_argument("--pool", type=int, default=10, help="PostgreSQL connections per worker")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.chats = args.chats or (10 if args.smoke else 200)
    args.seconds = args.seconds or (5.0 if args.smoke else 60.0)
    if args.smoke:
        args.deltas, args.pace_ms = min(args.deltas, 20), min(args.pace_ms, 10.0)
    machine = describe_machine()
    versions = package_versions(["daphne", "channels", "channels-redis", "redis", "psycopg"])
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores; load {load()}", flush=True)
    print(
        f"{args.chats} chats, a socket on each of 2 workers, runs of {args.deltas} deltas "
        f"{args.pace_ms:g} ms apart, for {args.seconds:g} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="zett-cluster-", dir=scratch_dir()) as tmp:
        result = run(args, Path(tmp))
    shares = ", ".join(f"{share:.0%}" for share in result["worker_cpu_share"])
    redis_share = result["redis_cpu_share"]
    print(
        f"{result['runs']:,} runs, {result['deltas']:,} deltas ({result['events_per_second']:,.0f}"
        f"/s), {result['frames_delivered']:,} frames delivered "
        f"({result['frames_delivered_per_second']:,.0f}/s) in {result['seconds']:.1f} s\n"
        f"CPU: workers {shares} of a core, Redis "
        f"{'-' if redis_share is None else f'{redis_share:.0%}'}, client "
        f"{result['client_cpu_share']:.0%}; load {result['load_before']} before, "
        f"{result['load_after']} after\n"
        f"checks {result['checks']}; errors {result['error_count']}; stored {result['stored']};"
        f" server log problems {len(result['log_problems'])} → "
        f"{'OK' if result['ok'] else 'FAILED'}",
        flush=True,
    )
    if not result["ok"]:
        print(f"errors: {result['errors'][:5]}\nlog: {result['log_problems'][:5]}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        report = {"machine": machine, "versions": versions, "result": result}
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
