"""Runs SIGKILLed at random points, many times a second: the ``atomic`` tool's effects.

    python -m tests.app.durable.kill_points <kills> <seed>   (Django settings from the env)

One process loads Django and the app once and then forks a child for each step of the
work, so a step costs a fork, not an interpreter: a child either starts a chat's run
(``tally 5 <deltas> <ms>`` of ``bench.crash_model``: five calls of an ``atomic`` tool
that stores one note each, then a streamed answer) or, when the chat's run was left
``running`` by a killed child, sweeps as a worker starting up does and continues it. The
parent SIGKILLs the child at a random moment of its work (it starts timing when the child
says it is ready) until ``kills`` children died that way, and lets the last child of each
chat finish. The parent never opens the app's database connections (a connection must
not cross a fork); it reads the database file with ``sqlite3``.

Prints one JSON line: kills (and the tool calls done when each kill hit), chats, runs
completed, notes duplicated and lost, and the seconds it took.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
import uuid
from collections import Counter

import django

PROMPT = "tally 5 4 2"
WARM = (
    "agent_app.assistants.llm",
    "agent_app.sessions.background",
    "bench.crash_model",
    "django.db.models.sql.compiler",
)
CALLS = 5


def child(session_id: str, key: str, start: bool, ready: int) -> None:
    """A worker's part of the work: start the chat's run, or continue what was left."""
    from agent_app.durable.runs import Creator
    from agent_app.sessions.background import sweep
    from agent_app.sessions.registry import live_sessions

    async def work() -> None:
        sessions = live_sessions()
        os.write(ready, b"r")
        if start:
            live = sessions.session(session_id)
            await live.start(PROMPT, Creator(browser_key=key))
            await live.wait_for_run()
        while await sweep(sessions):  # as a worker starting up does
            for live in list(sessions):
                await live.wait_for_run()
        await sessions.close()

    asyncio.run(work())


def state(path: str, session_id: str) -> tuple[str, str, int]:
    """``(request id, status, notes stored)`` of the chat's run ("" before it exists)."""
    with sqlite3.connect(path, timeout=30) as db:
        row = db.execute(
            "SELECT request_id, status FROM agent_app_chatrun WHERE session_id = ?",
            (uuid.UUID(session_id).hex,),
        ).fetchone()
        if row is None:
            return "", "", 0
        (notes,) = db.execute(
            "SELECT COUNT(*) FROM agent_app_note WHERE title LIKE ?", (f"{row[0]} %",)
        ).fetchone()
    return row[0], row[1], notes


def fork_step(session_id: str, key: str, start: bool, kill_after: float | None) -> bool:
    """Run one child to its end, or SIGKILL it ``kill_after`` seconds after it is ready;
    whether the kill hit a live child."""
    from django.db import connections

    connections.close_all()
    ready, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready)
        code = 0
        try:
            child(session_id, key, start, ready_write)
        except BaseException:  # a child's failure is the parent's to see (the run's row)
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(ready_write)
    os.read(ready, 1)
    os.close(ready)
    if kill_after is not None:
        time.sleep(kill_after)
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False  # it had finished: reaped
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def main(kills: int, seed: int) -> dict:
    django.setup()
    from django.conf import settings

    for module in WARM:  # imported once, before the forks (each child would import them)
        importlib.import_module(module)

    path = str(settings.DATABASES["default"]["NAME"])
    rng = random.Random(seed)
    began = time.monotonic()
    chats: dict[str, str] = {}
    window = calibrate(path, chats)  # how long a whole run takes a child
    hits: Counter[int] = Counter()
    while sum(hits.values()) < kills:
        session_id = str(uuid.uuid4())
        for _ in range(6):  # up to six kills a chat, then it may finish
            request_id, status, _ = state(path, session_id)
            if status == "completed":
                break
            if fork_step(session_id, KEY, not request_id, rng.uniform(0, window)):
                hits[state(path, session_id)[2]] += 1
        finish(path, session_id)
        chats[session_id] = state(path, session_id)[0]
    return {**report(path, chats, hits, time.monotonic() - began), "window": round(window, 3)}


KEY = "kill-points"


def finish(path: str, session_id: str) -> None:
    """Let children work on the chat, unkilled, until its run has ended."""
    while state(path, session_id)[1] not in ("completed", "interrupted", "failed"):
        fork_step(session_id, KEY, not state(path, session_id)[0], None)


def calibrate(path: str, chats: dict[str, str]) -> float:
    """The seconds a child takes for a whole run, unkilled (a chat of its own)."""
    session_id = str(uuid.uuid4())
    started = time.monotonic()
    finish(path, session_id)
    chats[session_id] = state(path, session_id)[0]
    return time.monotonic() - started


def report(path: str, chats: dict[str, str], hits: Counter[int], seconds: float) -> dict:
    completed = duplicated = lost = 0
    with sqlite3.connect(path) as db:
        for request_id in chats.values():
            (status,) = db.execute(
                "SELECT status FROM agent_app_chatrun WHERE request_id = ?", (request_id,)
            ).fetchone()
            completed += status == "completed"
            titles = Counter(
                title
                for (title,) in db.execute(
                    "SELECT title FROM agent_app_note WHERE title LIKE ?", (f"{request_id} %",)
                )
            )
            duplicated += sum(count - 1 for count in titles.values() if count > 1)
            lost += sum(1 for n in range(1, CALLS + 1) if f"{request_id} {n}" not in titles)
    return {
        "kills": sum(hits.values()),
        "kills_by_calls_done": {str(done): count for done, count in sorted(hits.items())},
        "chats": len(chats),
        "completed": completed,
        "duplicated": duplicated,
        "lost": lost,
        "seconds": round(seconds, 1),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), int(sys.argv[2]))), flush=True)
