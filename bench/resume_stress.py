"""Sockets that drop and come back at random points of runs: nothing lost, nothing twice.

    python -m bench.resume_stress            # 1,000 cycles on one worker, then on two
    python -m bench.resume_stress --smoke    # 40 cycles on one worker, every check

Each of ``--clients`` chats has a *watcher* socket that stays connected from the first
frame to the last, and a *client* socket that keeps leaving: it sends ``paced <n> <ms>``
messages (a model that streams ``n`` deltas ``ms`` apart; every third run calls a tool
first), and at a random moment — before the run starts, in its middle, after its end —
drops the socket (a clean close or an aborted TCP connection, half each), waits 0-20 ms,
and reconnects, with ``?after_seq=`` the last ``seq`` it read (four times in five) or
without it. That is one cycle; ``--cycles`` of them in all, spread over the clients. With
two workers (PostgreSQL + Redis) the watcher sits on the first and every reconnect picks a
worker at random, so runs start on both and replays cross workers.

Checked, against the watcher's frames (the truth):

- every socket life of the client got exactly the frames it should: after its ``session``
  frame, the active run's frames from ``after_seq`` (or from that run's ``run_started``
  without it, or none when no run was active), then the live ones, with no frame missing,
  repeated or different in between — **lost** and **duplicated** frames are counted per
  client and must be 0;
- no run was cancelled or interrupted by a disconnect: each ends with ``run_completed``;
- every run is stored (``bench.dbtool``): its row is ``completed``, its answer has all
  ``n`` characters, the message count is what the runs wrote; and no server logged a
  warning or an error.

Every wait has a deadline; the servers and the database are removed in ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from bench.machine import describe_machine
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

WAIT_S = 30.0
RUN_ENDS = ("run_failed", "run_cancelled", "run_interrupted", "run_paused")


def load() -> str:
    return "/".join(f"{value:.1f}" for value in load_average())


def is_end(frame: dict[str, Any]) -> bool:
    if frame.get("type") in RUN_ENDS:
        return True
    return frame.get("type") == "agent_event" and frame["event"].get("type") == "run_completed"


async def open_socket(
    base: str, session_id: str, cookie: str, after_seq: int | None = None
) -> tuple[ClientConnection, dict[str, Any]]:
    query = "" if after_seq is None else f"?after_seq={after_seq}"
    socket = await asyncio.wait_for(
        connect(
            f"{base}/ws/sessions/{session_id}/{query}",
            origin=base.replace("ws://", "http://", 1),
            compression=None,
            max_size=None,
            additional_headers={"Cookie": cookie},
        ),
        WAIT_S,
    )
    first = json.loads(await asyncio.wait_for(socket.recv(), WAIT_S))
    if first.get("type") != "session":
        raise RuntimeError(f"expected the session frame, got {str(first)[:300]}")
    return socket, first


@dataclass
class Life:
    """One connection of the client: how it was opened and the numbered frames it read."""

    after_seq: int | None
    active_request_id: str | None
    last_seq: int
    frames: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Chat:
    session_id: str
    watcher: list[tuple[int, str]] = field(default_factory=list)
    lives: list[Life] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    runs_sent: int = 0
    #: Runs the watcher saw start and not yet end; set on every frame it reads.
    running: int = 0
    progress: asyncio.Event = field(default_factory=asyncio.Event)


class Stress:
    def __init__(self, bases: list[str], cookie: str, args: argparse.Namespace) -> None:
        self.bases = bases
        self.cookie = cookie
        self.args = args
        self.cycles_left = args.cycles
        self.cycles = 0
        self.random = random.Random(args.seed)
        self.stats: Counter[str] = Counter()

    async def watch(self, chat: Chat, ready: asyncio.Event) -> None:
        """The watcher: every numbered frame of the chat, until cancelled."""
        socket, _ = await open_socket(self.bases[0], chat.session_id, self.cookie)
        ready.set()
        try:
            while True:
                raw = await socket.recv()  # (cancelled by ``settled`` once all is seen)
                frame = json.loads(raw)
                if "seq" in frame:
                    chat.watcher.append((frame["seq"], raw))
                if frame.get("type") == "run_started":
                    chat.running += 1
                elif is_end(frame):
                    chat.running -= 1
                elif frame.get("type") == "error":
                    chat.errors.append(f"watcher: {raw[:200]}")
                chat.progress.set()
        finally:
            await socket.close()

    @staticmethod
    async def settled(chat: Chat) -> None:
        """Return once the watcher has every frame a client read and no run is left."""
        target = max((seq for life in chat.lives for seq, _ in life.frames), default=0)
        while chat.running or not chat.watcher or chat.watcher[-1][0] < target:
            chat.progress.clear()
            try:
                await asyncio.wait_for(chat.progress.wait(), WAIT_S)
            except TimeoutError:
                chat.errors.append(
                    f"watcher: {chat.running} run(s) never ended, or frames up to {target} "
                    f"(read by the client) never came; its last is "
                    f"{chat.watcher[-1][0] if chat.watcher else None}"
                )
                return

    async def client(self, chat: Chat) -> None:
        """The socket that keeps leaving (see the module docstring)."""
        rng = self.random
        last_seq: int | None = None
        running = False
        after: int | None = None
        while True:
            base = rng.choice(self.bases)
            socket, session = await open_socket(base, chat.session_id, self.cookie, after)
            life = Life(after, session.get("active_request_id"), session["last_seq"])
            chat.lives.append(life)
            running = life.active_request_id is not None
            finishing = self.cycles_left <= 0
            if not finishing:
                self.cycles_left -= 1  # this life ends in a disconnect: one cycle
            # Leave at a random moment: often mid-run, sometimes before a run or after one.
            deadline = time.monotonic() + rng.uniform(0.0, self.args.leave_within)
            # Three lives in ten stay after their run ends: they leave between runs.
            linger = rng.random() < 0.3
            ran = False
            try:
                while True:
                    if not running and not finishing and not (linger and ran):
                        count = rng.randint(self.args.min_deltas, self.args.max_deltas)
                        tool = " tool" if chat.runs_sent % 3 == 2 else ""
                        content = f"paced {count} {self.args.pace_ms}{tool}"
                        await socket.send(json.dumps({"type": "user_message", "content": content}))
                        chat.runs_sent += 1
                        running = True
                    if finishing and not running:
                        break
                    remaining = WAIT_S if finishing else deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        raw = await asyncio.wait_for(socket.recv(), remaining)
                    except TimeoutError:
                        if finishing:
                            raise
                        break
                    frame = json.loads(raw)
                    if "seq" in frame:
                        life.frames.append((frame["seq"], raw))
                        last_seq = frame["seq"]
                    if frame.get("type") == "error" and frame.get("code") == "busy":
                        # The last life's message started its run after this life's
                        # ``session`` frame was taken: its frames come live. Not an error.
                        self.stats["busy_after_reconnect"] += 1
                        running = True
                    elif frame.get("type") == "error":
                        chat.errors.append(f"client: {raw[:200]}")
                    elif frame.get("type") == "run_started":
                        running = True
                    elif is_end(frame):
                        running = False
                        ran = True
                        self.stats["runs_ended_while_connected"] += 1
            finally:
                if finishing:
                    await socket.close()
                elif rng.random() < 0.5:
                    await socket.close()
                    self.stats["clean_closes"] += 1
                else:
                    socket.transport.abort()  # the network dropped: no closing handshake
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(socket.wait_closed(), WAIT_S)
                    self.stats["aborts"] += 1
            if finishing:
                return
            self.cycles += 1
            self.stats["mid_run" if running else "between_runs"] += 1
            await asyncio.sleep(rng.uniform(0.0, 0.02))  # a flaky network's pause
            if rng.random() < 0.8:
                after = last_seq
            else:
                after = None
                self.stats["reconnects_without_after_seq"] += 1


def check(chat: Chat) -> dict[str, int]:
    """Lost, duplicated and different frames of the client, against the watcher.

    Each life must read a contiguous stretch of the watcher's frames starting where the
    protocol says: with a run active at connect, at that run's ``run_started`` or just
    after ``after_seq``, whichever is later; with none, at the first frame after the
    ``session`` frame's ``last_seq``. A frame past the expected one means the ones between
    were lost; a frame before it (already read, or at or below ``after_seq``) is a
    duplicate; a frame whose text differs from the watcher's is different.
    """
    truth = chat.watcher
    index_of = {seq: index for index, (seq, _) in enumerate(truth)}
    starts = {
        json.loads(raw)["request_id"]: index
        for index, (_, raw) in enumerate(truth)
        if raw.startswith('{"type": "run_started"')
    }

    def first_after(seq: int) -> int:
        return next((i for i, (number, _) in enumerate(truth) if number > seq), len(truth))

    lost = duplicated = different = 0
    for life in chat.lives:
        if life.active_request_id is not None:
            position = starts.get(life.active_request_id, 0)
            if life.after_seq is not None:
                position = max(position, first_after(life.after_seq))
        else:
            position = first_after(life.last_seq)
        for seq, raw in life.frames:
            at = index_of.get(seq)
            if at is None or truth[at][1] != raw:
                different += 1
            elif at < position:
                duplicated += 1
            else:
                lost += at - position
                position = at + 1
    return {"lost": lost, "duplicated": duplicated, "different": different}


def run_ends(chat: Chat) -> Counter[str]:
    ends: Counter[str] = Counter()
    for _, raw in chat.watcher:
        frame = json.loads(raw)
        if is_end(frame):
            ends["run_completed" if frame["type"] == "agent_event" else frame["type"]] += 1
    return ends


def stored(env: dict[str, str], chats: list[Chat]) -> dict[str, int]:
    """Every run the watcher saw is stored, completed, with its whole answer."""
    found = dbtool(env, "runs", *(chat.session_id for chat in chats))
    result: Counter[str] = Counter()
    for chat in chats:
        rows = found[chat.session_id]
        statuses = dict(rows["runs"])
        answers: dict[str, int] = {}
        for _position, role, request_id, length in rows["messages"]:
            if role == "assistant" and length > 0:
                answers[request_id] = length
        for _, raw in chat.watcher:
            if not raw.startswith('{"type": "run_started"'):
                continue
            frame = json.loads(raw)
            wanted = int(frame["content"].split()[1])
            result["runs"] += 1
            if statuses.get(frame["request_id"]) != "completed":
                result["not_completed"] += 1
            if answers.get(frame["request_id"]) != wanted:
                result["answer_incomplete"] += 1
        result["messages"] += len(rows["messages"])
    return dict(result)


async def stress(bases: list[str], cookie: str, args: argparse.Namespace) -> tuple:
    runner = Stress(bases, cookie, args)
    chats = [Chat(str(uuid.uuid4())) for _ in range(args.clients)]
    readies = [asyncio.Event() for _ in chats]
    watchers = [
        asyncio.create_task(runner.watch(chat, ready))
        for chat, ready in zip(chats, readies, strict=True)
    ]
    try:
        for ready in readies:
            await asyncio.wait_for(ready.wait(), WAIT_S)
        await asyncio.gather(*(runner.client(chat) for chat in chats))
        await asyncio.gather(*(runner.settled(chat) for chat in chats))
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    return runner, chats


def run_on(workers: int, args: argparse.Namespace, workdir: Path) -> dict:
    label = f"{workers} worker{'s' if workers > 1 else ''}"
    print(f"{label}: {args.cycles} cycles over {args.clients} chats", flush=True)
    with contextlib.ExitStack() as stack:
        if workers == 1:
            env = site_env(f"sqlite:///{workdir / 'resume.sqlite3'}")
        else:
            database = stack.enter_context(postgres_database(args.postgres))
            redis = stack.enter_context(flushed_redis(args.redis))
            env = site_env(database, redis_url=redis)
        migrate(env)
        servers = [
            stack.enter_context(Server(env, workdir, f"resume-{workers}-{index}"))
            for index in range(workers)
        ]
        cookie = browser_cookie(servers[0].port)
        cpu_before = sum(cpu_seconds_of(server.pid) for server in servers)
        started = time.perf_counter()
        runner, chats = asyncio.run(stress([s.base for s in servers], cookie, args))
        elapsed = time.perf_counter() - started
        cpu = sum(cpu_seconds_of(server.pid) for server in servers) - cpu_before
        checks = Counter()
        worst = Counter()
        for chat in chats:
            found = check(chat)
            checks.update(found)
            for key, value in found.items():
                worst[key] = max(worst[key], value)
        ends: Counter[str] = Counter()
        for chat in chats:
            ends.update(run_ends(chat))
        storage = stored(env, chats)
        problems = [line for server in servers for line in server.log_problems()]
    errors = [error for chat in chats for error in chat.errors]
    result = {
        "workers": workers,
        "cycles": runner.cycles,
        "clients": args.clients,
        "seconds": elapsed,
        "server_cpu_seconds": cpu,
        "load": load(),
        "lives": sum(len(chat.lives) for chat in chats),
        "frames_watched": sum(len(chat.watcher) for chat in chats),
        "frames_read_by_clients": sum(len(life.frames) for c in chats for life in c.lives),
        "lost": checks["lost"],
        "duplicated": checks["duplicated"],
        "different": checks["different"],
        "worst_client": dict(worst),
        "run_ends": dict(ends),
        "stored": storage,
        "errors": errors[:20],
        "error_count": len(errors),
        "log_problems": problems[:20],
        "stats": dict(runner.stats),
    }
    ok = (
        checks["lost"] == checks["duplicated"] == checks["different"] == 0
        and set(ends) <= {"run_completed"}
        and not storage.get("not_completed")
        and not storage.get("answer_incomplete")
        and not errors
        and not problems
    )
    result["ok"] = ok
    print(
        f"  {runner.cycles} cycles ({runner.stats['mid_run']} mid-run), {result['lives']} socket "
        f"lives, {storage.get('runs', 0)} runs, {result['frames_watched']:,} frames watched, "
        f"{result['frames_read_by_clients']:,} read by the clients; lost {checks['lost']}, "
        f"duplicated {checks['duplicated']}, different {checks['different']}; run ends "
        f"{dict(ends)}; stored: {storage}; errors {len(errors)}, server log problems "
        f"{len(problems)}; {elapsed:.1f} s, server CPU {cpu:.1f} s, load {result['load']}"
        f" → {'OK' if ok else 'FAILED'}",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="40 cycles on one worker, for CI")
    parser.add_argument("--cycles", type=int, help="disconnect/reconnect cycles (1,000)")
    parser.add_argument("--clients", type=int, default=20, help="chats at once")
    parser.add_argument("--workers", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--min-deltas", type=int, default=20)
    parser.add_argument("--max-deltas", type=int, default=80)
    parser.add_argument("--pace-ms", type=float, default=3.0, help="milliseconds per delta")
    parser.add_argument("--leave-within", type=float, default=0.3, help="seconds a life lasts")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.cycles is None:
        args.cycles = 40 if args.smoke else 1000
    if args.smoke:
        args.clients = min(args.clients, 8)
    workers = [int(n) for n in (args.workers or ("1" if args.smoke else "1,2")).split(",")]
    machine = describe_machine()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores; load {load()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="zett-resume-", dir=scratch_dir()) as tmp:
        for count in workers:
            results.append(run_on(count, args, Path(tmp)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"machine": machine, "results": results}, indent=2))
    failed = [result for result in results if not result["ok"]]
    for result in failed:
        print(
            f"FAILED ({result['workers']} workers): errors {result['errors'][:5]}, "
            f"log {result['log_problems'][:5]}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
