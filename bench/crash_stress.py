"""Chats on two workers that are SIGKILLed and restarted at random: every run completes.

    python -m bench.crash_stress            # 20 chats, 60 s of kills
    python -m bench.crash_stress --smoke    # 4 chats, 15 s, every check

Two daphne workers on one PostgreSQL database and one Redis (``bench.serve``), with a short
lease (``ZETT_LEASE_SECONDS``) and sweep (``ZETT_SWEEP_SECONDS``). Each chat sends
``tally <n> <deltas> <ms>`` (``bench.crash_model``): ``n`` calls of an ``atomic`` tool that
stores one note per call, then a streamed answer. Meanwhile a chaos loop SIGKILLs a random
worker every ``--kill-every`` seconds on average and starts a new one in its place, for
``--seconds``. A chat whose socket dies with its worker reconnects to the other one and
waits there for its run's end; then it sends its next message. At the end the workers are
left alone until no run is ``running`` any more.

Reported, from the database (``bench.dbtool crash``): runs *continued* (a run counts each
extra worker it had), *completed*, *interrupted* (ran out of ``ZETT_RUN_ATTEMPTS``),
*duplicated* tool effects (a note stored twice for one call number of one run), *lost*
tool effects (a completed run missing a note), *lost messages* (a message whose run was
announced but is not stored) and answers of the wrong length. The goal: every run
completes, 0 duplicated, 0 lost. Also each worker's CPU while it ran.
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

from websockets.asyncio.client import connect

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

WAIT_S = 90.0


@dataclass
class Chat:
    session_id: str
    #: Request ids of the runs this chat saw start (their messages were stored).
    started: list[str] = field(default_factory=list)
    #: How each run ended, as its socket saw it (``run_completed``, ``run_interrupted`` …).
    endings: Counter[str] = field(default_factory=Counter)
    reconnects: int = 0


class Cluster:
    """The two worker slots; a killed worker is replaced by a new process."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env, self.workdir = env, workdir
        self.stack = contextlib.ExitStack()
        self.slots: list[Server] = []
        self.cpu: list[float] = []
        self.kills = 0
        self.generation = 0

    def start(self, index: int) -> Server:
        self.generation += 1
        server = self.stack.enter_context(
            Server(self.env, self.workdir, f"crash-{index}-{self.generation}")
        )
        if index < len(self.slots):
            self.slots[index] = server
        else:
            self.slots.append(server)
        return server

    def kill(self, index: int) -> None:
        server = self.slots[index]
        with contextlib.suppress(Exception):
            self.cpu.append(cpu_seconds_of(server.pid))
        assert server.process is not None
        server.process.kill()
        server.process.wait(timeout=30)
        self.kills += 1

    def bases(self) -> list[str]:
        return [server.base for server in self.slots]


async def chaos(cluster: Cluster, args: argparse.Namespace, stop_at: float) -> None:
    """SIGKILL a random worker now and then and start a new one in its place."""
    rng = random.Random(args.seed)
    while True:
        pause = rng.uniform(0.5, 1.5) * args.kill_every
        if time.monotonic() + pause >= stop_at:
            return
        await asyncio.sleep(pause)
        index = rng.randrange(len(cluster.slots))
        await asyncio.to_thread(cluster.kill, index)
        await asyncio.to_thread(cluster.start, index)


async def follow_run(chat: Chat, cluster: Cluster, cookie: str, first: str) -> None:
    """Wait for the run ``first`` ... to end, reconnecting while workers die."""
    request_id: str | None = None
    after_seq: int | None = None
    deadline = time.monotonic() + WAIT_S
    sent = False
    while time.monotonic() < deadline:
        base = random.choice(cluster.bases())
        query = f"?after_seq={after_seq}" if after_seq is not None else ""
        try:
            async with connect(
                f"{base}/ws/sessions/{chat.session_id}/{query}",
                origin=base.replace("ws://", "http://", 1),
                additional_headers={"Cookie": cookie},
                max_size=None,
                ping_interval=None,
                open_timeout=10,
            ) as socket:
                session = json.loads(await asyncio.wait_for(socket.recv(), 10))
                active = session.get("active_request_id")
                if not sent:
                    await socket.send(json.dumps({"type": "user_message", "content": first}))
                    sent = True
                elif request_id is None:
                    # The worker died after it was sent, before its run_started came: the
                    # chat's state says whether it was stored (then its run is ours).
                    known = set(chat.started)
                    fresh = [
                        run for run in session.get("runs", []) if run["request_id"] not in known
                    ]
                    if active and active not in known:
                        request_id = active  # ours once one of its frames comes (below)
                    elif fresh:
                        chat.started.append(fresh[-1]["request_id"])
                        chat.endings[f"ended_while_away:{fresh[-1]['status']}"] += 1
                        return
                    else:
                        return  # never stored: the next message is sent instead
                elif active != request_id:
                    runs = {run["request_id"]: run for run in session.get("runs", [])}
                    status = (runs.get(request_id) or {}).get("status")
                    if status and status not in ("running",):
                        chat.endings[f"ended_while_away:{status}"] += 1
                        return
                    if status is None and request_id not in chat.started:
                        return  # a run that was about to start when its worker died
                while True:
                    frame = json.loads(await asyncio.wait_for(socket.recv(), WAIT_S))
                    if "seq" in frame:
                        after_seq = frame["seq"]
                    kind = frame.get("type")
                    if kind == "run_started" and request_id is None:
                        request_id = frame["request_id"]
                        chat.started.append(request_id)
                    if kind == "error" and request_id is None:
                        return  # refused (the worker was draining): not sent, not counted
                    if frame.get("request_id") != request_id or request_id is None:
                        continue
                    if request_id not in chat.started:
                        chat.started.append(request_id)  # a run adopted on reconnect
                    if kind == "agent_event" and frame["event"]["type"] == "run_completed":
                        chat.endings["run_completed"] += 1
                        return
                    if kind in ("run_failed", "run_interrupted", "run_cancelled"):
                        chat.endings[kind] += 1
                        return
        except Exception:
            chat.reconnects += 1
            await asyncio.sleep(0.2)
    chat.endings["no_end_seen"] += 1


async def drive(chat: Chat, cluster: Cluster, cookie: str, args, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        await follow_run(chat, cluster, cookie, f"tally {args.calls} {args.deltas} {args.pace_ms}")


def verify(found: dict, chats: list[Chat], calls: int, deltas: int) -> Counter[str]:
    totals: Counter[str] = Counter()
    for chat in chats:
        rows = found[chat.session_id]
        statuses = {request_id: (status, attempts) for request_id, status, attempts in rows["runs"]}
        notes = Counter(rows["notes"])
        answers = {request_id: length for request_id, length in rows["answers"]}
        totals["user_messages_stored"] += rows["user_messages"]
        for request_id, (status, attempts) in statuses.items():
            totals["runs"] += 1
            totals[status] += 1
            totals["continued"] += attempts - 1
            numbers = [notes[f"{request_id} {number}"] for number in range(1, calls + 1)]
            totals["duplicated_effects"] += sum(max(0, count - 1) for count in numbers)
            if status == "completed":
                totals["lost_effects"] += sum(1 for count in numbers if count == 0)
                if answers.get(request_id) != deltas:
                    totals["wrong_answers"] += 1
        totals["lost_messages"] += sum(
            1 for request_id in chat.started if request_id not in statuses
        )
    return totals


async def stress(cluster: Cluster, cookie: str, args: argparse.Namespace) -> list[Chat]:
    chats = [Chat(str(uuid.uuid4())) for _ in range(args.chats)]
    stop_at = time.monotonic() + args.seconds
    await asyncio.gather(
        chaos(cluster, args, stop_at),
        *(drive(chat, cluster, cookie, args, stop_at) for chat in chats),
    )
    return chats


def settle(env: dict[str, str], chats: list[Chat]) -> dict:
    """Wait (up to two minutes) until no run is ``running``; the database's answer."""
    deadline = time.monotonic() + 120
    while True:
        found = dbtool(env, "crash", *(chat.session_id for chat in chats))
        if found["running"] == 0 or time.monotonic() > deadline:
            return found
        time.sleep(1)


def run(args: argparse.Namespace, workdir: Path) -> dict:
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres_database(args.postgres))
        redis_url = stack.enter_context(flushed_redis(args.redis))
        env = site_env(
            database,
            redis_url=redis_url,
            ZETT_MODEL="bench.crash_model:crash_model",
            ZETT_ASSISTANTS="bench.crash_model.Tally",
            ZETT_DEFAULT_ASSISTANT="tally",
            ZETT_LEASE_SECONDS=str(args.lease),
            ZETT_SWEEP_SECONDS="1",
            ZETT_RUN_ATTEMPTS=str(args.attempts),
        )
        migrate(env)
        cluster = Cluster(env, workdir)
        stack.enter_context(cluster.stack)
        for index in range(2):
            cluster.start(index)
        cookie = browser_cookie(cluster.slots[0].port)
        load_before = load_average()
        started = time.perf_counter()
        chats = asyncio.run(stress(cluster, cookie, args))
        found = settle(env, chats)
        elapsed = time.perf_counter() - started
        for server in cluster.slots:
            with contextlib.suppress(Exception):
                cluster.cpu.append(cpu_seconds_of(server.pid))
    totals = verify(found, chats, args.calls, args.deltas)
    seen = Counter()
    for chat in chats:
        seen.update(chat.endings)
    ok = (
        found["running"] == 0
        and totals["runs"] > 0
        and totals["completed"] == totals["runs"]
        and totals["duplicated_effects"] == 0
        and totals["lost_effects"] == 0
        and totals["lost_messages"] == 0
        and totals["wrong_answers"] == 0
    )
    return {
        "chats": args.chats,
        "seconds": elapsed,
        "kills": cluster.kills,
        "runs": totals["runs"],
        "completed": totals["completed"],
        "continued": totals["continued"],
        "interrupted": totals["interrupted"],
        "duplicated_effects": totals["duplicated_effects"],
        "lost_effects": totals["lost_effects"],
        "lost_messages": totals["lost_messages"],
        "wrong_answers": totals["wrong_answers"],
        "still_running": found["running"],
        "endings_seen": dict(seen),
        "reconnects": sum(chat.reconnects for chat in chats),
        "worker_cpu_seconds": sum(cluster.cpu),
        "load_before": load_before,
        "load_after": load_average(),
        "ok": ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="4 chats, 15 s, for CI")
    parser.add_argument("--chats", type=int, help="chats (default 20)")
    parser.add_argument("--seconds", type=float, help="how long workers are killed (default 60)")
    parser.add_argument("--kill-every", type=float, default=4.0, help="mean seconds per kill")
    parser.add_argument("--calls", type=int, default=3, help="atomic tool calls per run")
    parser.add_argument("--deltas", type=int, default=40, help="deltas per answer")
    parser.add_argument("--pace-ms", type=float, default=25.0, help="milliseconds per delta")
    parser.add_argument("--lease", type=float, default=2.0, help="ZETT_LEASE_SECONDS")
    parser.add_argument("--attempts", type=int, default=20, help="ZETT_RUN_ATTEMPTS")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--redis", default=DEFAULT_REDIS)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.chats = args.chats or (4 if args.smoke else 20)
    args.seconds = args.seconds or (15.0 if args.smoke else 60.0)
    machine = describe_machine()
    print(f"Machine: {machine['cpu']}, {machine['cores']} cores", flush=True)
    print(
        f"{args.chats} chats on 2 workers, a SIGKILL every ~{args.kill_every:g} s for "
        f"{args.seconds:g} s; runs of {args.calls} atomic calls and {args.deltas} deltas",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="zett-crash-", dir=scratch_dir()) as tmp:
        result = run(args, Path(tmp))
    print(
        f"{result['kills']} kills; {result['runs']} runs: {result['completed']} completed, "
        f"{result['continued']} continuations, {result['interrupted']} interrupted, "
        f"{result['still_running']} still running; duplicated effects "
        f"{result['duplicated_effects']}, lost effects {result['lost_effects']}, lost messages "
        f"{result['lost_messages']}, wrong answers {result['wrong_answers']}; "
        f"{result['reconnects']} reconnects → {'OK' if result['ok'] else 'FAILED'}",
        flush=True,
    )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"machine": machine, "result": result}, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
